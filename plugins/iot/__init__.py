"""Devices: the IoT service (simulated home, MQTT), its gateway plugin and the assistant's device tools."""
