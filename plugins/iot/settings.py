"""`[plugins.iot]`: the IoT service (docs/iot.md, docs/configuration.md)."""
from marshmallow import fields, validate

from gateway.plugins import PluginSettings

POSITIVE = validate.Range(min=0, min_inclusive=False)
ADAPTERS = ("simulation", "mqtt")


class IotSettings(PluginSettings):
    adapters = fields.List(fields.String(validate=validate.OneOf(ADAPTERS)), load_default=lambda: ["simulation"],
                           validate=validate.Length(min=1), metadata={
        "description": "Where devices come from: `simulation` (each person's simulated home of eight devices) "
                       "and/or `mqtt` (real devices announced by Home Assistant MQTT discovery)."})
    tick_seconds = fields.Float(load_default=30.0, validate=POSITIVE, metadata={
        "description": "Seconds between two steps of the simulated climate (the sensors' drift)."})
    allow_remote_unlock = fields.Boolean(load_default=True, metadata={
        "description": "Whether a lock may be unlocked through the API (the assistant, the console, "
                       "automations); false: unlocking answers 403 operation_refused and is recorded as failed."})
    max_pending_frames = fields.Integer(load_default=256, validate=validate.Range(min=1), metadata={
        "description": "Frames queued for a WebSocket subscriber that does not read; beyond it the subscriber "
                       "is disconnected, so the others are not held up."})
    heartbeat_seconds = fields.Float(load_default=30.0, validate=POSITIVE, metadata={
        "description": "WebSocket ping interval; a subscriber that does not answer is closed."})
    mqtt_host = fields.String(load_default="127.0.0.1", metadata={"description": "The MQTT broker's host."})
    mqtt_port = fields.Integer(load_default=1883, validate=validate.Range(min=1, max=65535),
                               metadata={"description": "The MQTT broker's port."})
    mqtt_username = fields.String(load_default="", metadata={"description": "MQTT user name (empty: anonymous)."})
    mqtt_password = fields.String(load_default="", metadata={"description": "MQTT password."})
    mqtt_tls = fields.Boolean(load_default=False, metadata={
        "description": "Connect with TLS (the system's certificate authorities)."})
    mqtt_client_id = fields.String(load_default="", metadata={
        "description": "The MQTT client id (empty: `assistant-iot-` and a random suffix)."})
    mqtt_discovery_prefix = fields.String(load_default="homeassistant", validate=validate.Length(min=1), metadata={
        "description": "Home Assistant's discovery prefix: configs are read from "
                       "`<prefix>/<component>/[<node_id>/]<object_id>/config`."})
    mqtt_owner = fields.String(load_default="admin", validate=validate.Length(min=1), metadata={
        "description": "The user id whose devices the MQTT devices are (default: the administrator)."})
    mqtt_reconnect_seconds = fields.Float(load_default=5.0, validate=POSITIVE, metadata={
        "description": "Seconds between two attempts to reach the broker after it went away."})
    mqtt_birth = fields.Boolean(load_default=True, metadata={
        "description": "Publish `online` on `<prefix>/status` after connecting, as Home Assistant does, so "
                       "devices announce themselves again."})
