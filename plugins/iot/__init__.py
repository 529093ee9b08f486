"""Devices (docs/iot.md). The IoT service's plugin `iot` lives in plugins.iot.service (with
its adapters: the simulation, and MQTT with Home Assistant discovery); the gateway's side in
plugins.iot.gateway and the AI tools in plugins.iot.assistant. Kept empty so that importing one
of them (or contract.py) does not load the others."""
