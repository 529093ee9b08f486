"""Where a peer answers: its `*_URL` variable (`[peers] <peer>_url`), else its port of the
service table on 127.0.0.1. The services (gateway/context.py), the console and the plugin
manager all find each other through these functions."""
from __future__ import annotations

from .config import Config, ConfigError
from .services import ServiceSpec, load_services

# Peer name (the stem of its `[peers]` key): (its id in the service table, its variable).
PEER_SERVICES: dict[str, tuple[str, str]] = {
    "gateway": ("gateway", "GATEWAY_URL"),
    "ai_core": ("ai-core", "AI_CORE_URL"),
    "memory_service": ("memory-service", "MEMORY_SERVICE_URL"),
    "voice_service": ("voice-service", "VOICE_SERVICE_URL"),
    "iot_service": ("iot-debug-service", "IOT_SERVICE_URL"),
    "platform_bridge": ("platform-bridge", "PLATFORM_BRIDGE_URL"),
    "plugin_manager": ("plugin-manager", "PLUGIN_MANAGER_URL"),
}
# Where the services of the table answer when no variable names them.
TABLE_HOST = "127.0.0.1"
def peer_name(service_id: str) -> str | None:
    """The peer name of a service of the table (`ai-core` -> `ai_core`); None for one no service
    calls (the frontend)."""
    return next((name for name, (table_id, _) in PEER_SERVICES.items() if table_id == service_id), None)


def service_url(config: Config, spec: "ServiceSpec", host: str = TABLE_HOST) -> str:
    """Where one service of the table answers: its variable's address, else its table port."""
    name = peer_name(spec.id)
    configured = config.settings.peers.url_of(name) if name else ""
    return (configured or f"http://{host}:{spec.port}").rstrip("/")


def peer_addresses(config: Config, specs: list[ServiceSpec] | None = None) -> dict[str, str]:
    """Every peer's address, no trailing slash ("" for a peer neither configured nor in the
    table). Read once, when a service is built: the service table is a file."""
    if specs is None:
        try:
            specs = load_services()
        except ConfigError:
            specs = []
    by_id = {spec.id: spec for spec in specs}
    addresses = {}
    for name, (table_id, _) in PEER_SERVICES.items():
        spec = by_id.get(table_id)
        addresses[name] = (service_url(config, spec) if spec else  # the variable, else the table
                           config.settings.peers.url_of(name))
    return addresses
