"""`[plugins.iot]`: the IoT service (docs/iot.md, docs/configuration.md)."""
from dataclasses import dataclass

from marshmallow import fields, validate

from gateway.plugin_settings import PluginSettings, setting

POSITIVE = validate.Range(min=0, min_inclusive=False)
AT_LEAST_A_MILLISECOND = validate.Range(min=0.001)
ADAPTERS = ("simulation", "mqtt")


@dataclass(frozen=True, kw_only=True)
class IotSettings(PluginSettings):
    adapters: list[str] = setting(fields.List(fields.String(validate=validate.OneOf(ADAPTERS)), load_default=lambda: ["simulation"],
                           validate=validate.Length(min=1), metadata={
        "description": "Where devices come from: `simulation` (each person's simulated home of eight devices) "
                       "and/or `mqtt` (real devices announced by Home Assistant MQTT discovery)."}))
    tick_seconds: float = setting(fields.Float(load_default=30.0, validate=POSITIVE, metadata={
        "description": "Seconds between two steps of the simulated climate (the sensors' drift)."}))
    allow_remote_unlock: bool = setting(fields.Boolean(load_default=True, metadata={
        "description": "Whether a lock may be unlocked through the API (the assistant, the console, "
                       "automations); false: unlocking answers 403 operation_refused and is recorded as failed."}))
    max_pending_frames: int = setting(fields.Integer(load_default=256, validate=validate.Range(min=1), metadata={
        "description": "Frames queued for a WebSocket subscriber that does not read; beyond it the subscriber "
                       "is disconnected, so the others are not held up."}))
    heartbeat_seconds: float = setting(fields.Float(load_default=30.0, validate=POSITIVE, metadata={
        "description": "WebSocket ping interval; a subscriber that does not answer is closed."}))
    mqtt_host: str = setting(fields.String(load_default="127.0.0.1", metadata={"description": "The MQTT broker's host."}))
    mqtt_port: int = setting(fields.Integer(load_default=1883, validate=validate.Range(min=1, max=65535),
                               metadata={"description": "The MQTT broker's port."}))
    mqtt_username: str = setting(fields.String(load_default="", metadata={"description": "MQTT user name (empty: anonymous)."}))
    mqtt_password: str = setting(fields.String(load_default="", metadata={"description": "MQTT password."}))
    mqtt_tls: bool = setting(fields.Boolean(load_default=False, metadata={
        "description": "Connect with TLS (the system's certificate authorities)."}))
    mqtt_client_id: str = setting(fields.String(load_default="", metadata={
        "description": "The MQTT client id (empty: `assistant-iot-` and a random suffix)."}))
    mqtt_discovery_prefix: str = setting(fields.String(load_default="homeassistant", validate=validate.Length(min=1), metadata={
        "description": "Home Assistant's discovery prefix: configs are read from "
                       "`<prefix>/<component>/[<node_id>/]<object_id>/config`."}))
    mqtt_owner: str = setting(fields.String(load_default="admin", validate=validate.Length(min=1), metadata={
        "description": "The user id whose devices the MQTT devices are (default: the administrator)."}))
    mqtt_reconnect_seconds: float = setting(fields.Float(load_default=5.0, validate=POSITIVE, metadata={
        "description": "Seconds between two attempts to reach the broker after it went away."}))
    mqtt_birth: bool = setting(fields.Boolean(load_default=True, metadata={
        "description": "Publish `online` on `<prefix>/status` after connecting, as Home Assistant does, so "
                       "devices announce themselves again."}))


@dataclass(frozen=True, kw_only=True)
class DevicesSettings(PluginSettings):
    """`[plugins.devices]`: how the gateway reaches the IoT service and follows its changes."""
    timeout: float = setting(fields.Float(load_default=10.0, validate=AT_LEAST_A_MILLISECOND, metadata={
        "description": "Seconds the gateway waits for the IoT service (IOT_SERVICE_URL) per call, connecting "
                       "included; then it answers 502 iot_service_unreachable."}))
    feed: bool = setting(fields.Boolean(load_default=True, metadata={
        "description": "Follow the IoT service's changes and send them to the owners' devices as `device_update` "
                       "frames (one gateway instance at a time does, whichever holds the feed's lease)."}))
    feed_lease_seconds: float = setting(fields.Float(load_default=15.0, validate=validate.Range(min=0.2), metadata={
        "description": "How long the feed's lease lasts unless renewed (renewed every third of it): the longest "
                       "a dead holder keeps the other instances from taking the feed over."}))
    feed_retry_min: float = setting(fields.Float(load_default=0.5, validate=AT_LEAST_A_MILLISECOND, metadata={
        "description": "Seconds before the first reconnection after the IoT service's stream closed or failed."}))
    feed_retry_max: float = setting(fields.Float(load_default=30.0, validate=AT_LEAST_A_MILLISECOND, metadata={
        "description": "The longest wait between reconnections (the wait doubles from feed_retry_min)."}))
    feed_heartbeat: float = setting(fields.Float(load_default=20.0, validate=validate.Range(min=0.1), metadata={
        "description": "Seconds between WebSocket pings to the IoT service; a missing pong closes the stream "
                       "(and it is opened again)."}))
    dedupe_seconds: float = setting(fields.Float(load_default=300.0, validate=AT_LEAST_A_MILLISECOND, metadata={
        "description": "How long a change's event_id is remembered on the bus, so that a change heard twice at "
                       "a feed hand-over is sent once."}))
