"""The `PRESENCE` contract: known clients and live sessions across every instance.

Live state lives on the bus in expiring sets (renewed while a connection or a turn lasts), so a
crashed instance's devices drop out by themselves; the known-clients table keeps the history."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from plugins.sessions.contract import CONVERSATIONS

from . import store
from .keys import LIVE_SESSIONS, LIVE_TTL, SessionRef, activity_key, lock_key

if TYPE_CHECKING:
    from gateway.connection import Connection
    from gateway.context import Context

ONLINE_CLIENTS = "chat:clients-online"
SESSION_KEY = "chat_session"


def devices_key(session: str) -> str:
    return f"chat:devices:{session}"


def session_of(connection: "Connection") -> SessionRef:
    """The session a chat connection was opened on."""
    return SessionRef(connection.user_id, connection.data[SESSION_KEY])


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

    async def _devices(self, session: SessionRef, local: dict[SessionRef, list[dict]] | None = None) -> list[dict]:
        if self._shared:
            return [json.loads(member) for member in await self.context.bus.members(devices_key(session.key))]
        if local is not None:
            return local.get(session, [])
        return [c.describe() for c in self._local() if session_of(c) == session]

    async def mark(self, connection: "Connection") -> None:
        if not self._shared:
            return
        bus = self.context.bus
        session = session_of(connection).key
        await bus.mark(devices_key(session), self._device(connection), LIVE_TTL)
        await bus.mark(LIVE_SESSIONS, session, LIVE_TTL)
        if connection.client_id:
            await bus.mark(ONLINE_CLIENTS, connection.client_id, LIVE_TTL)

    async def arriving(self, user_id: str, client_id: str, device_name: str, user_agent: str) -> None:
        """Records a device before its WebSocket handshake is answered, so a client that lists its
        known clients right after connecting finds itself there."""
        if client_id:
            await store.client_connected(self.context.db, client_id=client_id, user_id=user_id,
                                         device_name=device_name, user_agent=user_agent)

    async def not_arrived(self, client_id: str) -> None:
        """The handshake failed after `arriving`: the device is not online after all."""
        if client_id:
            await store.client_disconnected(self.context.db, client_id)

    async def disconnected(self, connection: "Connection") -> None:
        bus = self.context.bus
        if self._shared:
            await bus.unmark(devices_key(session_of(connection).key), self._device(connection))
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

    async def session_state(self, session_id: str, local: dict[SessionRef, list[dict]] | None = None) -> dict | None:
        """The live state of a session with this id (ids are per owner: of the user whose
        session with it was most recently active)."""
        candidates = {SessionRef(session["user_id"], session_id)
                      for session in await self._conversations_with(session_id)}
        candidates |= {session for session in map(SessionRef.from_key, await self.context.bus.members(LIVE_SESSIONS))
                       if session.session_id == session_id}
        candidates |= {session_of(c) for c in self._local() if c.data[SESSION_KEY] == session_id}
        states = [state for session in sorted(candidates, key=lambda ref: ref.user_id)
                  if (state := await self._state(session, local)) is not None]
        return max(states, key=lambda state: state["last_activity"], default=None)

    async def _conversations_with(self, session_id: str) -> list[dict]:
        conversations = self.context.contracts.get(CONVERSATIONS)
        return await conversations.find_sessions(session_id) if conversations is not None else []

    async def _state(self, session: SessionRef, local: dict[SessionRef, list[dict]] | None) -> dict | None:
        bus = self.context.bus
        devices = sorted(await self._devices(session, local), key=lambda device: device["connected_at"])
        turn_running = bool(await bus.get(lock_key(session.key)))
        queue_length = await store.queue_length(self.context.db, session.user_id, session.session_id)
        if not devices and not turn_running and not queue_length:
            return None
        conversations = self.context.contracts.get(CONVERSATIONS)
        stored = await conversations.get_session(session.user_id, session.session_id) \
            if conversations is not None else None
        activity = await bus.get(activity_key(session.key))
        return {
            "session_id": session.session_id, "user_id": session.user_id, "title": (stored or {}).get("title") or "",
            "devices": [{key: device[key] for key in ("connection_id", "client_id", "device_name", "user_agent",
                                                      "connected_at")} for device in devices],
            "device_count": len(devices), "turn_running": turn_running, "queue_length": queue_length,
            # A connection is activity too, read from the device rather than written per connection.
            "last_activity": max([int(activity or 0), (stored or {}).get("updated_at") or 0,
                                  *(device["connected_at"] for device in devices)]),
        }

    async def live_sessions(self) -> list[dict]:
        states = []
        sessions = set(map(SessionRef.from_key, await self.context.bus.members(LIVE_SESSIONS)))
        local: dict[SessionRef, list[dict]] | None = None
        if not self._shared:  # one pass over this instance's connections, not one per session
            local = {}
            for connection in self._local():
                local.setdefault(session_of(connection), []).append(connection.describe())
            sessions |= set(local)
        for session in sorted(sessions, key=lambda ref: (ref.session_id, ref.user_id)):
            state = await self._state(session, local)
            if state is not None:
                states.append(state)
        return sorted(states, key=lambda state: state["last_activity"], reverse=True)
