"""The MQTT adapter: real devices that announce themselves by Home Assistant's MQTT discovery
(discovery.py reads the configs), through aiomqtt, the maintained asyncio client.

It subscribes to `<prefix>/+/+/config` and `<prefix>/+/+/+/config`, keeps one entity per config
topic (persisted with the device, so a restart knows them before the broker resends retained
configs), subscribes to their state and availability topics, mirrors state messages into the
device's state (pushed with cause "mqtt"), and publishes an operation on the command topics.
When the broker goes away every MQTT device is marked offline (an operation answers 503
device_unreachable) and the adapter tries again every `mqtt_reconnect_seconds`."""
from __future__ import annotations

import asyncio
import json
import logging
import ssl
import uuid
from typing import Any

import aiomqtt

from .devices import DeviceService
from .discovery import entity_from, parse_topic
from .discovery_entity import Entity
from .discovery_templates import DiscoveryError
from .model import Device, DeviceUnreachable
from .settings import IotSettings

log = logging.getLogger("plugins.iot.mqtt")


class MqttAdapter:
    name = "mqtt"

    def __init__(self, service: DeviceService, settings: IotSettings):
        self.service = service
        self.settings = settings
        self.owner: str = settings.mqtt_owner
        self.prefix: str = settings.mqtt_discovery_prefix.rstrip("/")
        self.entities: dict[str, Entity] = {}      # by discovery topic
        self.client: aiomqtt.Client | None = None
        self.connected = asyncio.Event()
        self._subscribed: set[str] = set()

    # ------------------------------------------------------------ the registry
    def by_device(self, device_id: str) -> Entity | None:
        return next((entity for entity in self.entities.values() if entity.device_id == device_id), None)

    def topics(self) -> set[str]:
        return {topic for entity in self.entities.values()
                for topic in [*entity.readers, *(entry[0] for entry in entity.availability),
                              *([entity.attributes_topic] if entity.attributes_topic else [])]}

    async def load(self) -> None:
        """The entities known before this start (their devices stay listed, offline until heard)."""
        for device in await self.service.store.of_adapter("mqtt"):
            if device.owner != self.owner or not device.source.get("discovery_topic"):
                continue
            source = device.source
            try:
                entity = entity_from(source["discovery_topic"], source["component"], source.get("node_id"),
                                     source["object_id"], source["config"], device.id)
            except (DiscoveryError, KeyError, TypeError, ValueError) as error:
                log.warning("MQTT device %s cannot be rebuilt: %s", device.id, error)
                continue
            if isinstance(source.get("attributes"), dict):
                entity.add_attributes(source["attributes"])
            self.entities[entity.discovery_topic] = entity
        await self.service.set_online("mqtt", False, self.owner)

    # ------------------------------------------------------------ the connection
    async def run(self) -> None:
        await self.load()
        while True:
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except aiomqtt.MqttError as error:
                log.warning("MQTT broker %s:%s: %s; trying again in %gs", self.settings.mqtt_host,
                            self.settings.mqtt_port, error, self.settings.mqtt_reconnect_seconds)
            except Exception:
                log.exception("the MQTT adapter failed; starting again in %gs", self.settings.mqtt_reconnect_seconds)
            finally:
                self.client = None
                self.connected.clear()
                self._subscribed.clear()
            try:
                await self.service.set_online("mqtt", False, self.owner)
            except Exception:
                log.exception("marking the MQTT devices offline failed")
            await asyncio.sleep(self.settings.mqtt_reconnect_seconds)

    async def _session(self) -> None:
        settings = self.settings
        tls = ssl.create_default_context() if settings.mqtt_tls else None
        async with aiomqtt.Client(
                settings.mqtt_host, settings.mqtt_port, username=settings.mqtt_username or None,
                password=settings.mqtt_password or None, tls_context=tls, keepalive=30,
                identifier=settings.mqtt_client_id or f"assistant-iot-{uuid.uuid4().hex[:8]}") as client:
            self.client = client
            log.info("connected to the MQTT broker %s:%s", settings.mqtt_host, settings.mqtt_port)
            await client.subscribe(f"{self.prefix}/+/+/config")
            await client.subscribe(f"{self.prefix}/+/+/+/config")
            await self._subscribe(client, self.topics())
            for entity in self.entities.values():
                if not entity.availability:
                    await self.service.set_online("mqtt", True, self.owner, entity.device_id)
            if settings.mqtt_birth:
                await client.publish(f"{self.prefix}/status", "online")
            self.connected.set()
            async for message in client.messages:
                try:
                    await self._handle(client, message.topic.value, _text(message.payload))
                except DiscoveryError as error:
                    log.warning("MQTT discovery on %s: %s", message.topic.value, error)
                except aiomqtt.MqttError:
                    raise
                except Exception:  # one bad message must not end the session
                    log.exception("an MQTT message on %s could not be handled", message.topic.value)

    async def _subscribe(self, client: aiomqtt.Client, topics: set[str]) -> None:
        for topic in sorted(topics - self._subscribed):
            await client.subscribe(topic)
            self._subscribed.add(topic)

    async def _unsubscribe_unused(self, client: aiomqtt.Client) -> None:
        unused = self._subscribed - self.topics()
        for topic in sorted(unused):
            await client.unsubscribe(topic)
            self._subscribed.discard(topic)

    # ------------------------------------------------------------ messages
    async def _handle(self, client: aiomqtt.Client, topic: str, payload: str) -> None:
        parsed = parse_topic(topic, self.prefix)
        if parsed is not None:
            await self._discovered(client, topic, parsed, payload)
            return
        for entity in list(self.entities.values()):
            for availability_topic, available, not_available in entity.availability:
                if availability_topic == topic and payload in (available, not_available):
                    await self.service.set_online("mqtt", payload == available, self.owner, entity.device_id)
            values = entity.read(topic, payload) if topic in entity.readers else {}
            if topic == entity.attributes_topic:
                new, attributes = entity.attributes(payload)
                if new:  # attributes seen for the first time: the device's description grows
                    entity.add_attributes(new)
                    await self.service.announce(self._device(entity), keep_online=bool(entity.availability))
                values = {**attributes, **values}
            if values:
                await self.service.report(self.owner, entity.device_id, values, "mqtt")

    async def _discovered(self, client: aiomqtt.Client, topic: str, parsed: tuple[str, str | None, str],
                          payload: str) -> None:
        component, node_id, object_id = parsed
        if not payload.strip():  # an empty config: the device (every component of it) is gone
            for key in [key for key in self.entities if key == topic or key.startswith(topic + "#")]:
                await self._forget(key)
            await self._unsubscribe_unused(client)
            return
        try:
            config = json.loads(payload)
        except ValueError as error:
            raise DiscoveryError(f"the config is not JSON: {error}") from None
        if not isinstance(config, dict):
            raise DiscoveryError("the config is not a JSON object")
        if component == "device":
            await self._device_discovered(client, topic, object_id, config)
        else:
            await self._upsert(topic, component, node_id, object_id, config)
        await self._subscribe(client, self.topics())
        await self._unsubscribe_unused(client)

    async def _device_discovered(self, client: aiomqtt.Client, topic: str, object_id: str, config: dict) -> None:
        """Device-based discovery (`<prefix>/device/<id>/config`): one config, its entities in
        `cmps` (each with its platform `p`), the other keys shared by all of them. A component
        sent with its platform alone is removed."""
        components = config.get("cmps", config.get("components"))
        if not isinstance(components, dict):
            raise DiscoveryError("a device config needs `cmps`, its components")
        shared = {key: value for key, value in config.items() if key not in ("cmps", "components", "o", "origin")}
        for component_id, component_config in components.items():
            if not isinstance(component_config, dict):
                continue
            key = f"{topic}#{component_id}"
            platform = component_config.get("p", component_config.get("platform"))
            if set(component_config) <= {"p", "platform"}:
                if key in self.entities:
                    await self._forget(key)
                continue
            merged = {**shared, **{k: v for k, v in component_config.items() if k not in ("p", "platform")}}
            try:
                await self._upsert(key, str(platform), object_id, str(component_id), merged)
            except DiscoveryError as error:  # one component this adapter cannot use: the others still count
                log.warning("MQTT discovery on %s, component %s: %s", topic, component_id, error)

    async def _upsert(self, key: str, component: str, node_id: str | None, object_id: str, config: dict) -> None:
        known = self.entities.get(key)
        device_id = known.device_id if known else self._free_id(key, component, node_id, object_id, config)
        entity = entity_from(key, component, node_id, object_id, config, device_id)
        if known is not None and entity.attributes_topic:  # the attributes it reported before
            entity.add_attributes({name: known.properties[name] for name in known.attribute_names
                                   if name not in entity.properties})
        self.entities[key] = entity
        await self.service.announce(self._device(entity), keep_online=bool(entity.availability))
        log.info("MQTT device %s (%s) discovered on %s", entity.device_id, entity.type, key)

    def _device(self, entity: Entity) -> Device:
        return Device(owner=self.owner, id=entity.device_id, adapter="mqtt", type=entity.type,
                      names={"en": entity.name, "zh": entity.name}, room=entity.room,
                      room_names={"en": entity.room_name or "Unassigned", "zh": entity.room_name or "未分配"},
                      properties=entity.properties, state=entity.initial_state(), online=not entity.availability,
                      source=entity.source())

    async def _forget(self, key: str) -> None:
        entity = self.entities.pop(key)
        await self.service.remove(self.owner, entity.device_id)
        log.info("MQTT device %s removed", entity.device_id)

    def _free_id(self, topic: str, component: str, node_id: str | None, object_id: str, config: dict) -> str:
        """The new entity's id, made unique: another component's entity may share its object id."""
        candidate = entity_from(topic, component, node_id, object_id, config).device_id
        taken = {entity.device_id for entity in self.entities.values()}
        return candidate if candidate not in taken else f"{candidate}_{component}"

    # ------------------------------------------------------------ operations
    async def command(self, device: Device, values: dict[str, Any]) -> dict[str, Any]:
        entity = self.by_device(device.id)
        client = self.client
        if entity is None or client is None or not self.connected.is_set():
            raise DeviceUnreachable(f"{device.id} cannot be reached: the MQTT broker is not connected.",
                                    hint="Check the broker ([plugins.iot] mqtt_host, mqtt_port); the adapter "
                                         "reconnects by itself.")
        try:
            for publish in entity.commands(values, device.state):
                await client.publish(publish.topic, publish.payload, qos=publish.qos, retain=publish.retain)
        except aiomqtt.MqttError as error:
            raise DeviceUnreachable(f"{device.id} cannot be reached: {error}",
                                    hint="The MQTT broker went away; try again when it is back.") from None
        # A property the device reports on a state topic changes when it says so (cause mqtt).
        return {name: value for name, value in values.items() if name in entity.optimistic}


def _text(payload: Any) -> str:
    if isinstance(payload, (bytes, bytearray)):
        return bytes(payload).decode("utf-8", errors="replace")
    return "" if payload is None else str(payload)
