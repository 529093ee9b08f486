"""Who is connected over WebSocket, on which devices, and delivery to them.

With a shared bus (Redis), each instance marks itself on the bus as a holder of every user it
holds connections of, and a message for a user is also sent to the other holders of that user
only (`Bus.fan_out`, one script call that also appends a reply's frame to its replay stream):
instances without that user's devices hear nothing of it. Holders tell each other when they
join or leave (hub_peers.py), so a frame for a user whose devices are all on this instance (a
worker) needs no fan_out: its replay entry is appended without waiting
(`Bus.stream_append_nowait`), before the ack a joining holder waits for, and the frame goes to
the devices once the bus answered that append (pipelined with the others: no round trip waited
per frame). A device never sees a frame a resume could not find: the sweeper that ends the reply
of a worker killed mid-stream numbers its end after every frame in the replay.

`send_to_user` is the one way to send to a user's devices. Frames of a numbered run (a streamed
reply, say: `run_id`, `seq` from 0) carry both in the delivery's envelope, so a connection that is
being replayed such a run (see `Connection.hold`) filters live frames without parsing them. One
connection's own state, queue and writer are gateway/connection.py's."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from functools import partial
from typing import TYPE_CHECKING, Awaitable, Callable, Protocol

from aiohttp import WSCloseCode, web

from .connection import DEFAULT_MAX_PENDING, Connection
from .hub_peers import Join, Peers
from .text import dumps_text
from .typedefs import Identity

if TYPE_CHECKING:
    from .bus import Bus, Record, Subscription

log = logging.getLogger("gateway.hub")

# Deliveries and presence are per service: services sharing one Redis (the gateway, the IoT
# service) each have their own connections, and one's frames for a user are not another's.
DELIVERY_CHANNEL = "hub.deliver"  # + service + instance: the deliveries other instances send one instance
HOLDERS = "hub.holders"  # + service + user: the instances holding a connection of the user
# Presence entries expire unless renewed, so a crashed instance's connections drop out by themselves.
PRESENCE_TTL = 60.0
# How long a shutdown waits for closed connections to leave the bus before giving up on them.
LEAVING_BOUND = 5.0
ONLINE_USERS = "presence:users"
# The run's key in a delivery's envelope: "turn_id", as instances of 0.1.0 write and read it (they
# share the bus with this release's during a rolling restart).
ENVELOPE_RUN = "turn_id"
ConnectionListener = Callable[[Connection], Awaitable[None]]


class HubContext(Protocol):
    """What the hub reads of its service's context: the service's id and its bus. The context
    (gateway/context.py) builds the hub, so the hub names what it needs rather than its class."""

    @property
    def service_id(self) -> str: ...

    @property
    def bus(self) -> Bus: ...

    def has(self, name: str) -> bool: ...


class WebSocketHub:
    def __init__(self, context: HubContext) -> None:
        self.context = context
        self.instance_id = uuid.uuid4().hex
        scope = context.service_id
        self._delivery_prefix = f"{DELIVERY_CHANNEL}:{scope}:"
        self._holders_prefix = f"{HOLDERS}:{scope}:"
        self._presence_prefix = f"presence:{scope}:"
        self._online_users = f"{ONLINE_USERS}:{scope}"
        self._by_user: dict[str, dict[str, Connection]] = {}
        # With a shared bus: the users this instance is marked a holder of (those it holds a
        # connection of), and its subscription to the deliveries other instances send it.
        self._holding: set[str] = set()
        self._peers = Peers()  # the other holders of the users held here, as told
        self._holding_changes = asyncio.Lock()
        self._inbox: Subscription | None = None
        self._leaving: set[asyncio.Future] = set()
        self._renewer: asyncio.Task | None = None
        self._connect_listeners: list[ConnectionListener] = []
        self._disconnect_listeners: list[ConnectionListener] = []
        self._bus_shared: bool | None = None
        # How the connections are closed at shutdown: 1001 "going away" when the service stops,
        # 1012 "service restart" when a replacement already serves the port (`replaced`).
        self._closing = (int(WSCloseCode.GOING_AWAY), b"server shutting down")

    # -- listeners (plugins: what a device missed while away, what a connection held)
    def on_connect(self, listener: "ConnectionListener") -> None:
        """`await listener(connection)` once each connection is registered and visible to
        deliveries (a held connection queues what the listener delivers behind its replay)."""
        self._connect_listeners.append(listener)

    def on_disconnect(self, listener: "ConnectionListener") -> None:
        """`await listener(connection)` when a connection goes, before its writer stops: free
        what it held (an open voice stream, say)."""
        self._disconnect_listeners.append(listener)

    async def _notify(self, listeners: "list[ConnectionListener]", connection: Connection, what: str) -> None:
        for listener in listeners:
            try:
                await listener(connection)
            except Exception:  # one plugin's failure must not refuse or leak the connection
                log.exception("a WebSocket %s listener failed for connection %s", what, connection.id[:8])

    # -- lifecycle (called by the core)
    async def start(self) -> None:
        # Listening from start-up, long before any connection makes this instance a holder.
        if self._shared:
            self._inbox = await self.context.bus.subscribe(self._delivery_prefix + self.instance_id, self._on_remote)
            self.context.bus.on_restored(self._restored)
        self._renewer = asyncio.create_task(self._renew_presence(), name="hub-presence")

    def replaced(self) -> None:
        """This process is being replaced by one already serving the same port (a rolling
        restart): its connections are closed with 1012 "service restart", which tells a client
        to reconnect at once (it lands on the replacement) instead of backing off."""
        self._closing = (int(WSCloseCode.SERVICE_RESTART), b"service restart: reconnect")

    async def close_all(self, code: int | None = None, message: bytes | None = None) -> None:
        code = self._closing[0] if code is None else code
        message = self._closing[1] if message is None else message
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
            self._renewer = None
        connections = [c for user in self._by_user.values() for c in user.values()]
        await asyncio.gather(*(c.ws.close(code=code, message=message) for c in connections),
                             return_exceptions=True)
        for connection in connections:
            await connection.stop()
        # Connections that closed by themselves may still be leaving the bus (their handlers
        # cancelled): let them finish while the bus is open.
        if self._leaving:
            _, late = await asyncio.wait(set(self._leaving), timeout=LEAVING_BOUND)
            # A bus that does not answer (Redis killed or hung) must not hold the shutdown, nor
            # leave a task running after it: the marks left expire by themselves (PRESENCE_TTL).
            for leaving in late:
                leaving.cancel()
            if late:
                await asyncio.wait(late)
                log.warning("%d closed connections could not leave the bus within %s s; their "
                            "presence marks expire by themselves", len(late), LEAVING_BOUND)
        inbox, self._inbox = self._inbox, None
        if inbox is not None:
            await inbox.close()

    async def _hold(self, user_id: str) -> Join | None:
        """Be marked a holder of `user_id` on the bus while the user has a connection here, and
        only then, telling the other holders (hub_peers.py). Marked before the connection reads
        what it missed (a replay): a frame sent after the mark comes here, one sent before is in
        what it reads once the join returned is settled. One change at a time: a user's last
        connection leaving while a new one arrives must not unmark after the mark."""
        if not self._shared:
            return None
        bus = self.context.bus
        async with self._holding_changes:
            if user_id in self._by_user:  # a connection arrives: the bus may have been away since the mark
                await bus.ensure_listening()
            if user_id in self._by_user and user_id not in self._holding:
                join = self._peers.begin(user_id)
                try:
                    told = await bus.hold_and_tell(self._holders_prefix + user_id, self.instance_id, PRESENCE_TTL,
                                                   self._delivery_prefix, self._notice("join", user_id, join.id))
                except BaseException:
                    self._peers.drop(join)
                    raise
                self._peers.told(join, told)
                self._holding.add(user_id)
            elif user_id not in self._by_user and user_id in self._holding:
                self._holding.discard(user_id)
                self._peers.forget(user_id)
                await bus.hold_and_tell(self._holders_prefix + user_id, self.instance_id, None,
                                        self._delivery_prefix, self._notice("left", user_id))
            return self._peers.joining(user_id)

    def _notice(self, kind: str, user_id: str, join_id: str = "") -> dict:
        """What holders tell each other (hub_peers.py): `join`, `left`, `ack` (of a join)."""
        return {"kind": kind, "user_id": user_id, "from": self.instance_id, "join": join_id}

    async def _on_notice(self, notice: dict) -> None:
        kind, user_id, sender = notice["kind"], notice["user_id"], notice["from"]
        if kind == "join":
            # Switched before the ack is sent: the ack goes out after every frame appended
            # without waiting, and every later frame for the user goes through the bus.
            self._peers.joined(user_id, sender, user_id in self._holding)
            await self.context.bus.publish(self._delivery_prefix + sender, self._notice("ack", user_id, notice["join"]))
        elif kind == "left":
            self._peers.left(user_id, sender)
        elif kind == "ack":
            self._peers.acked(notice["join"], sender)

    def all_here(self, user_id: str) -> bool:
        """Every device of the user is on this instance: its frames need not touch the bus."""
        return user_id in self._holding and user_id in self._by_user and self._peers.alone(user_id)

    # -- membership
    async def register(self, ws: web.WebSocketResponse, user_id: str, *, identity: "Identity | None" = None,
                       client_id: str = "", device_name: str = "", user_agent: str = "",
                       max_pending: int = DEFAULT_MAX_PENDING, data: dict | None = None,
                       hold: bool = False) -> Connection:
        """`data` is seeded, and with `hold` deliveries are held (see `Connection.hold`), before
        the connection becomes visible to deliveries: no frame slips past either."""
        connection = Connection(ws, user_id, client_id, device_name, user_agent, max_pending=max_pending,
                                data=dict(data or {}), identity=identity)
        if hold:
            connection.hold()
        self._by_user.setdefault(user_id, {})[connection.id] = connection
        join = await self._hold(user_id)
        if join is not None:  # what the other holders sent without the bus is in the replay then
            await self._peers.settle(join)
        await self._mark(connection)
        await self._notify(self._connect_listeners, connection, "connect")
        return connection

    async def unregister(self, connection: Connection) -> None:
        user = self._by_user.get(connection.user_id, {})
        user.pop(connection.id, None)
        if not user:
            self._by_user.pop(connection.user_id, None)
        await self._notify(self._disconnect_listeners, connection, "disconnect")
        await connection.stop()
        if self._shared:
            # Finished even when the handler is cancelled meanwhile (its client went away):
            # neither the presence mark nor the user's channel may outlive the connection.
            # Kept until done, so that close_all waits for it before the bus closes.
            leaving = asyncio.ensure_future(self._leave(connection))
            self._leaving.add(leaving)
            leaving.add_done_callback(self._leaving.discard)
            await asyncio.shield(leaving)

    async def _leave(self, connection: Connection) -> None:
        # Shielded: nobody may be left to read its failure (the bus away), so it says so itself;
        # the presence mark then expires by itself (PRESENCE_TTL).
        try:
            await self._hold(connection.user_id)
            await self.context.bus.unmark(self._presence_prefix + connection.user_id, self._member(connection))
        except Exception as error:
            log.warning("leaving the bus for a closed connection of user %s failed: %s", connection.user_id, error)

    # -- presence across instances
    @property
    def _shared(self) -> bool:
        """Presence is written to the bus only when other instances read it; with one instance
        this hub's own connections are the whole truth (and nothing is kept per connection)."""
        shared = self._bus_shared  # asked of every frame sent: read once the bus exists
        if shared is None:
            if not self.context.has("bus"):
                return False
            shared = self._bus_shared = bool(getattr(self.context.bus, "shared", False))
        return shared

    def _member(self, connection: Connection) -> str:
        return connection.id  # a UUID: unique across instances

    async def _mark(self, connection: Connection) -> None:
        if self._shared:
            await self.context.bus.mark(self._presence_prefix + connection.user_id, self._member(connection), PRESENCE_TTL)
            await self.context.bus.mark(self._online_users, connection.user_id, PRESENCE_TTL)

    async def _restored(self) -> None:
        """The bus answers again, maybe empty: other holders may mark themselves again without
        telling this one, so its users' frames go through the bus while their devices stay."""
        for user_id in self._holding:
            self._peers.unknown(user_id)
        await self._mark_all()

    async def _renew_presence(self) -> None:
        while True:
            await asyncio.sleep(PRESENCE_TTL / 3)
            if self._shared:
                await self._mark_all()

    async def _mark_all(self) -> None:
        """Every presence and holder mark of this instance, again: renewed before they expire,
        and made again when the bus comes back (a restarted Redis lost them, and until then
        other instances would send this one nothing)."""
        for connection in self.connections():
            try:
                await self._mark(connection)
            except Exception:
                log.exception("renewing WebSocket presence failed")
        for user_id in list(self._holding):
            try:
                await self.context.bus.mark(self._holders_prefix + user_id, self.instance_id, PRESENCE_TTL)
            except Exception:
                log.exception("renewing WebSocket presence failed")

    async def is_online(self, user_id: str) -> bool:
        """Whether `user_id` has a live connection on any instance sharing the bus."""
        if self._by_user.get(user_id):
            return True
        return self._shared and bool(await self.context.bus.members(self._presence_prefix + user_id))

    async def online_users(self) -> set[str]:
        """Users with a live connection on any instance sharing the bus."""
        if not self._shared:
            return set(self._by_user)
        candidates = await self.context.bus.members(self._online_users)
        return {user for user in candidates if await self.is_online(user)}

    async def held_elsewhere(self, user_id: str) -> bool:
        """Whether another instance sharing the bus holds a connection of `user_id` now."""
        if not self._shared or self.all_here(user_id):  # the others would have told this one
            return False
        return bool(await self.context.bus.members(self._holders_prefix + user_id) - {self.instance_id})

    def connections(self, user_id: str | None = None) -> list[Connection]:
        if user_id is not None:
            return list(self._by_user.get(user_id, {}).values())
        return [c for user in self._by_user.values() for c in user.values()]

    def count(self, user_id: str | None = None) -> int:
        if user_id is not None:
            return len(self._by_user.get(user_id, ()))
        return sum(len(user) for user in self._by_user.values())

    # -- delivery
    def _deliver_local(self, user_id: str, payload: str, exclude: str | None, only: str | None,
                       run_id: str | None, seq: int) -> int:
        connections = self._by_user.get(user_id)
        if not connections:
            return 0
        if only is not None:
            connection = connections.get(only)
            return int(connection is not None and only != exclude and connection.deliver(payload, run_id, seq))
        delivered = 0
        for connection in list(connections.values()):
            if connection.id != exclude and connection.deliver(payload, run_id, seq):
                delivered += 1
        return delivered

    async def send_to_user(self, user_id: str, message: dict | str, *, exclude: str | None = None,
                           only: str | None = None, run_id: str | None = None, seq: int = -1,
                           record: "Record | None" = None) -> int:
        """Send to every device of `user_id` on every instance, except connection `exclude`, or
        to connection `only` alone. `message` may be encoded already (a str). `run_id`/`seq`:
        the frame is number `seq` of run `run_id`, for connections being replayed that run.
        `record`: a bus stream entry (a replay's) appended before any device is sent the frame,
        in the same step as the other instances are. Returns how many local devices it was
        queued for."""
        payload = message if isinstance(message, str) else dumps_text(message)
        bus = self.context.bus
        # Other instances are sent nothing when the one device meant is here, or every device is.
        elsewhere = self._shared and (only is None or only not in self._by_user.get(user_id, ())) \
            and not self.all_here(user_id)
        if record is not None:
            if elsewhere:
                await bus.fan_out(self._holders_prefix + user_id, self._delivery_prefix, self.instance_id,
                                  self._envelope(user_id, payload, exclude, only, run_id, seq), record=record)
                return self._deliver_local(user_id, payload, exclude, only, run_id, seq)
            await bus.stream_append(record[0], record[1], max_len=record[2])
        delivered = self._deliver_local(user_id, payload, exclude, only, run_id, seq)
        if elsewhere:  # after this instance's devices: they get it even when the bus is down
            await bus.fan_out(self._holders_prefix + user_id, self._delivery_prefix, self.instance_id,
                              self._envelope(user_id, payload, exclude, only, run_id, seq))
        return delivered

    def send_to_user_now(self, user_id: str, payload: str, *, run_id: str | None = None, seq: int = -1,
                         record: "Record | None" = None) -> int | None:
        """`send_to_user` to every device of the user without waiting, where nothing has to go
        through the bus (every device of the user on this instance) and the bus appends `record`
        without waiting: the frame is queued for the devices once `record` is in (at once on
        the in-process bus), so a device never sees a frame that a resume after it would not
        find, yet no round trip is waited for per frame. Returns how many local devices it is
        for; None, and nothing done, otherwise: call `send_to_user`. For the frames of a
        streamed reply, dozens a second per turn."""
        if self._shared and not self.all_here(user_id):
            return None
        if record is None:
            return self._deliver_local(user_id, payload, None, None, run_id, seq)
        if not self.context.bus.stream_append_nowait(record[0], record[1], max_len=record[2], then=partial(
                self._deliver_local, user_id, payload, None, None, run_id, seq)):
            return None
        return len(self._by_user.get(user_id, ()))

    def _envelope(self, user_id: str, payload: str, exclude: str | None, only: str | None, run_id: str | None,
                  seq: int) -> dict:
        return {"user_id": user_id, "payload": payload, "exclude": exclude, "only": only, ENVELOPE_RUN: run_id,
                "seq": seq}

    async def _on_remote(self, envelope: dict) -> None:
        """A delivery another instance sent this one (`Bus.fan_out` never sends one its own),
        or a holder's notice (hub_peers.py)."""
        if "kind" in envelope:
            await self._on_notice(envelope)
            return
        self._deliver_local(envelope["user_id"], envelope["payload"], envelope.get("exclude"), envelope.get("only"),
                            envelope.get(ENVELOPE_RUN), int(envelope.get("seq", -1)))
