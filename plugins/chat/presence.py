"""The `PRESENCE` contract: known clients and live sessions across every instance.

Live state lives on the bus in expiring sets (renewed while a connection or a turn lasts), so a
crashed instance's devices drop out by themselves; the known-clients table keeps the history."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from plugins.sessions.contract import CONVERSATIONS

from . import store
from .keys import LIVE_SESSIONS, LIVE_TTL, activity_key, lock_key

if TYPE_CHECKING:
    from gateway.context import Context
    from gateway.hub import Connection

ONLINE_CLIENTS = "chat:clients-online"
SESSION_KEY = "chat_session"


def devices_key(session_id: str) -> str:
    return f"chat:devices:{session_id}"


class Presence:
    """With a shared bus (several instances) live devices are kept there; with one instance the
    hub's own connections answer, so an idle connection costs no presence entries."""

    def __init__(self, context: "Context"):
        self.context = context

    @property
    def _shared(self) -> bool:
        return self.context.bus.shared

    def _device(self, connection: "Connection") -> str:
        return json.dumps(connection.describe(), sort_keys=True, separators=(",", ":"))

    def _local(self) -> list["Connection"]:
        return [c for c in self.context.hub.connections() if SESSION_KEY in c.data]

    async def _online_clients(self) -> set[str]:
        if self._shared:
            return await self.context.bus.members(ONLINE_CLIENTS)
        return {c.client_id for c in self._local() if c.client_id}

    async def _devices(self, session_id: str, local: dict[str, list[dict]] | None = None) -> list[dict]:
        if self._shared:
            return [json.loads(member) for member in await self.context.bus.members(devices_key(session_id))]
        if local is not None:
            return local.get(session_id, [])
        return [c.describe() for c in self._local() if c.data[SESSION_KEY] == session_id]

    async def mark(self, connection: "Connection") -> None:
        if not self._shared:
            return
        bus = self.context.bus
        session_id = connection.data[SESSION_KEY]
        await bus.mark(devices_key(session_id), self._device(connection), LIVE_TTL)
        await bus.mark(LIVE_SESSIONS, session_id, LIVE_TTL)
        if connection.client_id:
            await bus.mark(ONLINE_CLIENTS, connection.client_id, LIVE_TTL)

    async def connected(self, connection: "Connection") -> None:
        await self.mark(connection)
        if connection.client_id:
            await store.client_connected(self.context.db, client_id=connection.client_id,
                                         user_id=connection.user_id, device_name=connection.device_name,
                                         user_agent=connection.user_agent)

    async def disconnected(self, connection: "Connection") -> None:
        bus = self.context.bus
        if self._shared:
            await bus.unmark(devices_key(connection.data[SESSION_KEY]), self._device(connection))
        if connection.client_id:
            still_here = any(other.client_id == connection.client_id and other is not connection
                             for other in self.context.hub.connections(connection.user_id))
            if not still_here:
                if self._shared:
                    await bus.unmark(ONLINE_CLIENTS, connection.client_id)
                await store.client_disconnected(self.context.db, connection.client_id)

    async def renew(self) -> None:
        if not self._shared:
            return
        for connection in self.context.hub.connections():
            if SESSION_KEY in connection.data:
                await self.mark(connection)

    # ------------------------------------------------------------------ the service

    async def known_clients(self, user_id: str | None = None) -> list[dict]:
        online = await self._online_clients()
        rows = await store.known_clients(self.context.db, user_id)
        return [{**row, "last_seen": int(row["last_seen"]), "online": row["client_id"] in online} for row in rows]

    async def set_client_note(self, client_id: str, note: str) -> dict | None:
        row = await store.set_client_note(self.context.db, client_id, note)
        if row is None:
            return None
        online = await self._online_clients()
        return {**row, "last_seen": int(row["last_seen"]), "online": row["client_id"] in online}

    async def session_state(self, session_id: str, local: dict[str, list[dict]] | None = None) -> dict | None:
        bus = self.context.bus
        devices = sorted(await self._devices(session_id, local), key=lambda device: device["connected_at"])
        turn_running = bool(await bus.get(lock_key(session_id)))
        queue_length = await store.queue_length(self.context.db, session_id)
        if not devices and not turn_running and not queue_length:
            return None
        conversations = self.context.contracts.get(CONVERSATIONS)
        session = await conversations.get_session(session_id) if conversations is not None else None
        user_id = (session or {}).get("user_id") or (devices[0]["user_id"] if devices else "")
        activity = await bus.get(activity_key(session_id))
        return {
            "session_id": session_id, "user_id": user_id, "title": (session or {}).get("title") or "",
            "devices": [{key: device[key] for key in ("connection_id", "client_id", "device_name", "user_agent",
                                                      "connected_at")} for device in devices],
            "device_count": len(devices), "turn_running": turn_running, "queue_length": queue_length,
            # A connection is activity too, read from the device rather than written per connection.
            "last_activity": max([int(activity or 0), (session or {}).get("updated_at") or 0,
                                  *(device["connected_at"] for device in devices)]),
        }

    async def live_sessions(self) -> list[dict]:
        states = []
        session_ids = await self.context.bus.members(LIVE_SESSIONS)
        local: dict[str, list[dict]] | None = None
        if not self._shared:  # one pass over this instance's connections, not one per session
            local = {}
            for connection in self._local():
                local.setdefault(connection.data[SESSION_KEY], []).append(connection.describe())
            session_ids |= set(local)
        for session_id in sorted(session_ids):
            state = await self.session_state(session_id, local)
            if state is not None:
                states.append(state)
        return sorted(states, key=lambda state: state["last_activity"], reverse=True)
