"""The chat turn machine: one turn at a time per session, on every instance together.

A message becomes a row of `chat_turn_queue` (PostgreSQL, shared by all instances). Whoever
wins the session's turn lock on the bus (`SET NX` with a TTL, renewed while it works) drains
that session's queue oldest first; everyone else tells the sender `queued`. A turn runs in a
task of its own, not in the sender's connection, so it finishes and is stored even when every
device has gone. A sweeper picks up queues whose lock holder died (the lock expires, the rows
stay), and the holder re-checks the queue after releasing so no message is stranded.

One turn: store the user message, echo it to the user's other devices, relay the AI core's SSE
stream as `stream_start`, `stream_chunk`s, `thinking` / `tool_progress` / `system_info`, then
`review` and `stream_end`, and store the reply. Frames for all devices are appended to the
replay buffer first (see delivery.py)."""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from typing import TYPE_CHECKING, AsyncIterator

import aiohttp
import orjson
import yarl

from gateway.errors import ServiceUnavailable
from gateway.sse import sse_data
from gateway.text import loads_utf8_safe
from gateway.ws import error_frame
from plugins.sessions.contract import CONVERSATIONS

from . import store
from .attachments import resolve_attachments
from .delivery import Delivery, ReplayBuffer, Snapshot
from .review import review_reply, stored_role

if TYPE_CHECKING:
    from gateway.context import Context

log = logging.getLogger("plugins.chat.turns")


STORED_TYPES = {"chat", "action", "markdown", "code"}
_encode = json.JSONEncoder(ensure_ascii=False).encode
LIVE_SESSIONS = "chat:live-sessions"
LIVE_TTL = 60.0
# Sessions whose turns are being run: marked when a holder starts, unmarked when its turns all
# ended. A mark left behind by an instance that died (or was stopped mid-turn) tells the sweeper
# to end that turn's reply for the devices. As long as an unfinished replay is kept.
RUNNING_TURNS = "chat:running-turns"
RUNNING_TURNS_TTL = 3600.0


def now_ms() -> int:
    return int(time.time() * 1000)


def lock_key(session_id: str) -> str:
    return f"chat:turn-lock:{session_id}"


def activity_key(session_id: str) -> str:
    return f"chat:activity:{session_id}"


# A message id is remembered on the bus as long as the queue keeps finished rows (store.KEEP_FINISHED).
MESSAGE_ID_TTL = 86400.0


def message_key(session_id: str, client_msg_id: str) -> str:
    return f"chat:message-id:{session_id}:{client_msg_id}"


# The lock holder reads the database queue after a turn only while this mark says a message was
# queued; a holder outliving it is covered by its look at the queue after letting go.
QUEUED_MARK_TTL = 3600.0


def queued_key(session_id: str) -> str:
    return f"chat:queued:{session_id}"


def admitted_key(session_id: str) -> str:
    """Set while the bus holds the client_msg_id of every message admitted to the session."""
    return f"chat:admitted:{session_id}"


class TurnFailed(Exception):
    def __init__(self, error: str, error_type: str = "ai_core_failed"):
        super().__init__(error)
        self.error, self.error_type = error, error_type


class AiCoreClient:
    """The AI core's streaming chat call, read as typed SSE events."""

    def __init__(self, context: "Context", read_timeout: float):
        self.context = context
        self.timeout = aiohttp.ClientTimeout(total=None, connect=10, sock_read=read_timeout)
        self._target: tuple[yarl.URL, dict] | None = None

    def target(self) -> tuple[yarl.URL, dict]:
        """The URL, parsed once, and the headers of every call (the configuration does not change
        while the service runs): a turn's request goes out a little sooner."""
        if self._target is None:
            self._target = (yarl.URL(self.context.peer_url("ai_core") + "/api/v1/chat/stream"),
                            {**self.context.peer_headers(), "Accept": "text/event-stream",
                             "Content-Type": "application/json"})
        return self._target

    async def stream(self, body: dict) -> AsyncIterator[dict]:
        try:
            url, headers = self.target()
            async with self.context.http.post(url, data=_encode_body(body), headers=headers,
                                              timeout=self.timeout) as response:
                if response.status != 200:
                    text = (await response.text())[:500]
                    try:
                        text = json.loads(text).get("error") or text
                    except (ValueError, AttributeError):
                        pass
                    raise TurnFailed(f"the AI core answered {response.status}: {text}")
                async for data in sse_data(response.content, errors="replace"):
                    try:
                        event = loads_utf8_safe(data)
                    except ValueError:
                        raise TurnFailed("the AI core sent an unreadable event") from None
                    if isinstance(event, dict):
                        yield event
        except (aiohttp.ClientError, asyncio.TimeoutError, RuntimeError) as error:  # RuntimeError: aiohttp's
            # "Connection closed." when the AI core closes the response while it is read
            raise TurnFailed(f"the AI core cannot be reached or stopped answering ({error.__class__.__name__}"
                             f"{': ' + str(error) if str(error) else ''})", "ai_core_unreachable") from None
        except ValueError as error:  # a line of the stream that never ends
            raise TurnFailed(f"the AI core sent an unreadable stream: {error}") from None


def _encode_body(body: dict) -> bytes:
    """The request body; orjson writes a turn's history several times faster than json, which
    counts on the way to the first token. orjson refuses a lone surrogate (a client may send
    one escaped in JSON); json writes it escaped, as before."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body).encode()


class TurnMachine:
    def __init__(self, context: "Context", settings: dict):
        self.context = context
        self.lock_ttl: float = settings["lock_ttl"]
        self.history_limit: int = settings["history_limit"]
        self.attachment_url_ttl: int = settings["attachment_url_ttl"]
        self.stop_timeout: float = settings["stop_timeout"]
        self.store_after: float = settings["store_after"]
        self.ai = AiCoreClient(context, settings["ai_read_timeout"])
        self.delivery: Delivery | None = None
        self.replay: ReplayBuffer | None = None
        # Sessions whose lock this instance holds: the draining task (None for the moment between
        # taking the lock and starting it).
        self._draining: dict[str, asyncio.Task | None] = {}
        self._bookkeeping: set[asyncio.Task] = set()
        self._stopping = False

    @property
    def owner(self) -> str:
        return self.context.hub.instance_id

    @property
    def conversations(self):
        return self.context.contracts.require(CONVERSATIONS)

    # ------------------------------------------------------------------ submitting

    async def submit(self, *, user_id: str, session_id: str, text: str, mode: str = "text",
                     attachments: list[dict] | None = None, client_msg_id: str | None = None,
                     sender: str | None = None, session_known: bool = False) -> dict:
        """Queue one turn; start it when the session is idle. Raises ApiError for a bad request.
        `session_known`: the caller already ensured this user's session (the WebSocket did at connect)."""
        if not session_known:
            await self.conversations.ensure_session(user_id, session_id)
        resolved = await resolve_attachments(self.context, user_id, attachments or [], self.attachment_url_ttl)
        turn = {"turn_id": secrets.token_hex(8), "session_id": session_id, "user_id": user_id,
                "text": text or "", "mode": mode, "attachments": resolved, "client_msg_id": client_msg_id,
                "sender_connection": sender}
        if not await self._lock(session_id):
            return await self._queue(turn)
        try:
            admitted = await self._admit_on_bus(session_id, client_msg_id)
            if admitted is False and await self._reclaim_message_id(session_id, client_msg_id):
                admitted = True
            if admitted:
                # The fast way: the bus vouches that the message is new, so the AI core is called
                # at once; the queue row is written beside the turn (see run_turn).
                self._start_draining(session_id, first=turn)
                return {"status": "started", "turn_id": turn["turn_id"], "session_id": session_id}
            row = None
            if admitted is None:  # the bus cannot vouch: the database decides
                row = await store.enqueue(self.context.db, **turn, start=True)
                if row is None and await self._reclaim_message_id(session_id, client_msg_id):
                    row = await store.enqueue(self.context.db, **turn, start=True)
                if row is not None:
                    await self._admitted(session_id, client_msg_id)
        except BaseException:
            await self._unlock(session_id)
            raise
        if row is not None and row["status"] == "running":
            self._start_draining(session_id, first=row)
            return {"status": "started", "turn_id": row["turn_id"], "session_id": session_id}
        # A duplicate, or older turns wait (their holder died or just let go): drain in order.
        self._start_draining(session_id)
        if row is None:
            return {"status": "duplicate", "session_id": session_id, "client_msg_id": client_msg_id}
        return await self._tell_queued(row)

    async def _queue(self, turn: dict) -> dict:
        """The session is busy (here or on another instance): queue the turn behind it."""
        session_id = turn["session_id"]
        duplicate = {"status": "duplicate", "session_id": session_id, "client_msg_id": turn["client_msg_id"]}
        # The running turn may not have written its row yet: the bus knows its id.
        vouched = bool(await self.context.bus.get(admitted_key(session_id)))
        if vouched and not await self._take_message_id(session_id, turn["client_msg_id"]) \
                and not await self._taken_by_dead_turn(session_id, turn["client_msg_id"]):
            return duplicate
        # A new id, or one a dead turn took without storing its message: the queue decides (a row
        # the dead turn wrote keeps the id until the next holder releases it).
        row = await store.enqueue(self.context.db, **turn)
        if row is None:
            return duplicate
        # Set after the row is committed: whoever sees the mark finds the row.
        await self.context.bus.set(queued_key(session_id), "1", ttl=QUEUED_MARK_TTL)
        await self._admitted(session_id, turn["client_msg_id"])
        if await self.kick(turn["session_id"]):  # the holder let go meanwhile
            return {"status": "started", "turn_id": row["turn_id"], "session_id": turn["session_id"]}
        return await self._tell_queued(row)

    async def _tell_queued(self, row: dict) -> dict:
        session_id, sender = row["session_id"], row["sender_connection"]
        position = await store.queue_length(self.context.db, session_id)
        if sender is not None and self.delivery is not None:
            await self.delivery.send(row["user_id"], {
                "type": "queued", "session_id": session_id, "client_msg_id": row["client_msg_id"],
                "turn_id": row["turn_id"], "position": position, "msg_type": "system_info",
                "timestamp": now_ms()}, only=sender)
        return {"status": "queued", "turn_id": row["turn_id"], "session_id": session_id, "position": position}

    async def _admit_on_bus(self, session_id: str, client_msg_id: str | None) -> bool | None:
        """True: the message is new (its id is now taken on the bus) and no older turn waits;
        False: a re-send; None: the bus cannot tell — it does not hold this session's message
        ids (a restarted in-process bus, an expired mark), or turns may be waiting in the queue."""
        bus = self.context.bus
        if not await bus.get(admitted_key(session_id)) or await bus.get(queued_key(session_id)) is not None:
            return None
        return await self._take_message_id(session_id, client_msg_id)

    async def _reclaim_message_id(self, session_id: str, client_msg_id: str | None) -> bool:
        """A re-sent id is a duplicate while its message is stored or its turn may still run.
        Taken longer than a lock's lifetime ago, by a turn whose row is not waiting and whose
        message is not stored, it belongs to a turn that died before storing the message (its
        instance was killed between admitting the message and writing it); the caller holds the
        session's lock, so no turn of the session runs, and the id is given to this message.
        Younger ids are left alone: another instance may be between taking one and writing its row."""
        if not await self._taken_by_dead_turn(session_id, client_msg_id):
            return False
        if not await store.release_message_id(self.context.db, session_id, client_msg_id, self.lock_ttl):
            return False
        await self.context.bus.set(message_key(session_id, client_msg_id), "1", ttl=MESSAGE_ID_TTL)
        log.warning("message %s of session %s was taken by a turn that never stored it; it runs now",
                    client_msg_id, session_id)
        return True

    async def _taken_by_dead_turn(self, session_id: str, client_msg_id: str | None) -> bool:
        """Whether a taken id may belong to a turn that died before storing its message: it was
        not taken in the last lock lifetime (a live turn may be about to write it) and no
        message with it is stored. The queue's rows have the last word (see callers)."""
        if client_msg_id is None:
            return False
        taken = await self.context.bus.get(message_key(session_id, client_msg_id)) or ""
        if taken.isdigit() and len(taken) > 1 and now_ms() - int(taken) < self.lock_ttl * 1000:
            return False
        return not await self.conversations.has_client_message(session_id, client_msg_id)

    async def _take_message_id(self, session_id: str, client_msg_id: str | None) -> bool:
        if client_msg_id is None:
            return True
        # The value says when: a re-send may take the id over only from a turn long dead (_reclaim_message_id).
        return await self.context.bus.set(message_key(session_id, client_msg_id), str(now_ms()), ttl=MESSAGE_ID_TTL,
                                          only_if_absent=True)

    async def _admitted(self, session_id: str, client_msg_id: str | None) -> None:
        """A message went into the database queue: record its id on the bus and, the first
        time, every id the queue still remembers for the session, so that the mark saying the
        bus holds them all is true."""
        bus = self.context.bus
        if client_msg_id is not None:
            await bus.set(message_key(session_id, client_msg_id), "1", ttl=MESSAGE_ID_TTL)
        if await bus.get(admitted_key(session_id)):
            return
        for known in await store.message_ids(self.context.db, session_id):
            await bus.set(message_key(session_id, known), "1", ttl=MESSAGE_ID_TTL)
        await bus.set(admitted_key(session_id), "1", ttl=MESSAGE_ID_TTL)

    async def kick(self, session_id: str) -> bool:
        """Take the session's turn lock and drain its queue; False when someone already is."""
        if not await self._lock(session_id):
            return False
        self._start_draining(session_id)
        return True

    async def _lock(self, session_id: str) -> bool:
        """The session's turn lock, for this instance; False while anyone (here too) holds it."""
        if self._stopping or session_id in self._draining:
            return False
        if not await self.context.bus.set(lock_key(session_id), self.owner, ttl=self.lock_ttl, only_if_absent=True):
            return False
        self._draining[session_id] = None  # reserved until the task exists
        return True

    async def _unlock(self, session_id: str) -> None:
        self._draining.pop(session_id, None)
        with contextlib.suppress(Exception):
            await asyncio.shield(self._release(session_id))

    def _start_draining(self, session_id: str, first: dict | None = None) -> None:
        if self._stopping:  # stop() no longer waits for new turns: leave the work to the next holder
            self._background(self._unlock(session_id))
            if first is not None and "id" in first:
                self._background(store.requeue(self.context.db, first["turn_id"]))
            raise ServiceUnavailable("The gateway is stopping; send the message again in a moment.",
                                     error_type="stopping")
        self._draining[session_id] = asyncio.create_task(self._drain(session_id, first),
                                                         name=f"chat-turns-{session_id}")

    # ------------------------------------------------------------------ draining

    async def _drain(self, session_id: str, first: dict | None = None) -> None:
        """Run the session's turns oldest first while holding its lock. `first`: the turn the
        submitter admitted (a claimed row, or a turn whose row is still to be written).

        After a turn the queue is read only when the bus says a message was queued meanwhile,
        and the lock is let go before anything else: the device that saw `stream_end` often
        sends its next message at once, and it should find the session idle."""
        renewer = asyncio.create_task(self._renew(session_id))
        released = False
        try:
            row, look, claimed = first, first is None, False
            abandon_running = first is None
            while True:
                if row is None:
                    if not look:
                        break
                    if self._stopping:  # queued turns may be left: keep the mark for the next holder
                        await self.context.bus.set(queued_key(session_id), "1", ttl=QUEUED_MARK_TTL)
                        break
                    row = await store.claim_next(self.context.db, session_id, abandon_running=abandon_running)
                    abandon_running, claimed = False, row is not None
                    if row is None:
                        look = await self._queued_meanwhile(session_id)
                        continue
                status = "failed"
                try:
                    status = await self.run_turn(row)
                except asyncio.CancelledError:
                    status = "abandoned"
                    raise
                except Exception:
                    log.exception("chat turn %s of session %s failed", row["turn_id"], session_id)
                finally:
                    if status != "done":  # a finished turn's row was closed before its stream_end
                        self._background(store.finish(self.context.db, row["turn_id"], status))
                # After a turn taken from the queue look again (more may wait behind it); after
                # the submitter's own turn, only when a message was queued meanwhile.
                look = claimed or await self._queued_meanwhile(session_id)
                row = None
            released = True
            self._draining.pop(session_id, None)
            try:  # every turn ended: nothing for the sweeper to end
                await self.context.bus.unmark(RUNNING_TURNS, session_id)
            except Exception:
                log.exception("unmarking the turns of session %s failed", session_id)
            await self._release(session_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("draining the turn queue of session %s failed", session_id)
        finally:
            renewer.cancel()
            if not released:
                await self._unlock(session_id)
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
        # A message queued just as the lock was let go would otherwise wait for the sweeper.
        if not self._stopping and await self.context.bus.get(queued_key(session_id)) is not None \
                and await store.queue_length(self.context.db, session_id):
            await self.kick(session_id)

    async def _queued_meanwhile(self, session_id: str) -> bool:
        """Whether a message was queued since the last look. The mark is taken away before the
        queue is read again, and a submitter sets it only after its row is committed, so a row
        is never left behind without a mark."""
        bus = self.context.bus
        if await bus.get(queued_key(session_id)) is None:
            return False
        await bus.delete(queued_key(session_id))
        return True

    def _background(self, coroutine) -> None:
        """Bookkeeping nobody waits for; `stop` lets it finish."""
        task = asyncio.create_task(coroutine)
        self._bookkeeping.add(task)
        task.add_done_callback(self._bookkeeping.discard)
        task.add_done_callback(_log_failure)

    async def _renew(self, session_id: str) -> None:
        """Keep the session's lock and marks while its turns run. A lock found lost (it expired
        while this instance could not renew it, or was taken) stops the turns: another instance
        may hold the session now, and its sweeper ends the reply for the devices."""
        bus = self.context.bus
        await asyncio.sleep(0)  # the turn's request to the AI core goes out first
        while True:
            try:  # a failure to reach the bus once must not end the renewing (the lock would expire)
                await bus.mark(RUNNING_TURNS, session_id, RUNNING_TURNS_TTL)
                await bus.mark(LIVE_SESSIONS, session_id, LIVE_TTL)
            except Exception:
                log.exception("marking session %s live failed", session_id)
            await asyncio.sleep(self.lock_ttl / 3)
            try:
                renewed = await bus.renew_if(lock_key(session_id), self.owner, self.lock_ttl)
            except Exception:
                log.exception("renewing the turn lock of session %s failed", session_id)
                continue
            if not renewed:
                log.warning("the turn lock of session %s was lost (expired or taken); its turn stops", session_id)
                drain = self._draining.get(session_id)
                if drain is not None:
                    drain.cancel()
                return

    async def _release(self, session_id: str) -> None:
        await self.context.bus.delete_if(lock_key(session_id), self.owner)

    async def sweep(self) -> None:
        """Drain queues whose lock holder went away, and end the replies it left unfinished."""
        for session_id in await store.sessions_waiting(self.context.db):
            await self.kick(session_id)
        bus = self.context.bus
        marked = [session_id for session_id in await bus.members(RUNNING_TURNS) if session_id not in self._draining]
        holders = await bus.get_many([lock_key(session_id) for session_id in marked])
        for session_id, holder in zip(marked, holders):
            if holder is None:
                try:
                    await self._end_abandoned_turn(session_id)
                except Exception:  # the other sessions still get their turn
                    log.exception("ending the unfinished turn of session %s failed", session_id)

    async def _end_abandoned_turn(self, session_id: str) -> None:
        """The session's holder went away (its lock expired or was let go by a cancelled turn)
        with a reply unfinished, and no message came after it: every device gets the stream_end
        the next turn would have sent, and the replay records it. Then the queue is drained as
        by any new holder, which marks the dead turn's row abandoned."""
        if not await self._lock(session_id):
            return
        try:
            dead = await self.replay.read(session_id)
            if dead is not None and dead.running:
                session = await self.conversations.get_session(session_id)
                if dead.frames and session is not None:
                    await self._end_dead_turn(session["user_id"], session_id, dead, latest=True)
                await self.replay.finish(session_id, dead.turn_id)
        except BaseException:
            await self._unlock(session_id)
            raise
        self._start_draining(session_id)

    async def stop(self) -> None:
        """Let running turns finish for a while, then cancel them (their locks are released).
        A turn claimed just before the stop began still starts, so it is waited for too."""
        self._stopping = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.stop_timeout
        while self._draining:
            tasks = [task for task in self._draining.values() if task is not None]
            left = deadline - loop.time()
            if left <= 0:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                self._draining.clear()
                break
            if tasks:
                await asyncio.wait(tasks, timeout=min(left, 0.5))
            else:  # a lock taken, its task about to start
                await asyncio.sleep(0.01)
        if self._bookkeeping:  # writes the stopped turns started (their rows' final status)
            await asyncio.wait(list(self._bookkeeping), timeout=max(1.0, deadline - loop.time()))

    def running(self, session_id: str) -> bool:
        return session_id in self._draining

    # ------------------------------------------------------------------ one turn

    async def run_turn(self, row: dict) -> str:
        """One turn. The AI core is called first; the turn's row (when the submitter did not
        write it yet) and the user's message are stored while it thinks. The sender sees the
        reply's frames as they come; the user's other devices see the echo of the message first
        (it carries the stored id), then the same frames (see EchoGate)."""
        assert self.delivery is not None and self.replay is not None
        session_id, user_id, turn_id = row["session_id"], row["user_id"], row["turn_id"]
        sender = row["sender_connection"]
        text = row["text"]
        attachments = row["attachments"] if isinstance(row["attachments"], list) else json.loads(row["attachments"])
        try:
            history = await self.conversations.recent_history(session_id, self.history_limit)
        except Exception as error:  # nothing sent or stored yet: tell the sender, allow a re-send
            log.error("reading the history of session %s failed: %r", session_id, error)
            await self._forget_message_id(row)
            if sender is not None:
                await self.delivery.send(user_id, error_frame(
                    "the message could not be processed; please send it again", errorType="storage_failed",
                    session_id=session_id, turn_id=turn_id, client_msg_id=row["client_msg_id"]), only=sender)
            return "failed"
        body = {"user_id": user_id, "session_id": session_id, "text": text, "history": history,
                "mode": row["mode"], "purpose": "chat",
                "attachments": [{"type": "image", "url": a["url"]} for a in attachments]}
        events = self.ai.stream(body)
        first_event = asyncio.create_task(_first(events))
        await asyncio.sleep(0)  # the request goes out before the rest of the set-up
        gate = EchoGate(self.delivery, user_id, sender, turn_id)
        relayed = asyncio.get_running_loop().create_future()  # done once the first event went out
        confirmed = asyncio.create_task(self._store_user_message(row, attachments, gate, relayed))
        sequence = 0
        message_id = f"reply_{turn_id}"

        async def emit(message: dict) -> None:
            message.update({"session_id": session_id, "turn_id": turn_id, "seq": sequence,
                            "timestamp": now_ms()})
            await send(json.dumps(message, ensure_ascii=False))

        # The reply's deltas are most of a turn's frames: their constant part is encoded once.
        chunk_head = json.dumps({"type": "stream_chunk", "role": "assistant", "msg_type": "chat",
                                 "message_id": message_id, "session_id": session_id, "turn_id": turn_id},
                                ensure_ascii=False)[:-1]

        async def emit_chunk(content: str) -> None:
            await send(f'{chunk_head}, "seq": {sequence}, "timestamp": {now_ms()}, "content": {_encode(content)}}}')

        async def send(payload: str) -> None:
            nonlocal sequence
            await self.replay.append(session_id, turn_id, sequence, payload)
            await gate.send(payload, sequence)
            sequence += 1

        async def writes_finished() -> None:
            """The writes start now if no first event let them, and are waited for."""
            _set_once(relayed)
            if not confirmed.done():
                await asyncio.wait([confirmed])

        pieces: list[str] = []
        final: dict | None = None
        relay = _then(first_event, events)
        try:
            unfinished = await self.replay.begin(session_id, turn_id)
            if unfinished is not None and unfinished.frames:
                await self._end_dead_turn(user_id, session_id, unfinished)
            await emit({"type": "stream_start", "role": "assistant", "msg_type": "chat", "message_id": message_id})
            async for event in relay:
                if confirmed.done():
                    _confirmation(confirmed)  # raises when the message could not be stored
                kind = event.get("type")
                if kind == "delta":
                    content = str(event.get("content") or "")
                    if content:
                        pieces.append(content)
                        await emit_chunk(content)
                elif kind == "thinking":
                    await emit({"type": "thinking", "role": "assistant", "msg_type": "thinking",
                                "message_id": message_id, "thinking_status": event.get("status") or "thinking",
                                "thinking_content": event.get("content") or ""})
                elif kind == "tool_progress":
                    await emit({"type": "tool_progress", "role": "assistant", "msg_type": "tool_progress",
                                "message_id": message_id, "tool_progress": {
                                    "tool_name": event.get("tool_name") or "", "status": event.get("status") or "running",
                                    "progress": event.get("progress") or 0, "message": event.get("message") or ""}})
                elif kind == "system_info":
                    await emit({"type": "system_info", "role": "system", "msg_type": "system_info",
                                "system_info": {"level": event.get("level") or "info",
                                                "message": event.get("message") or "",
                                                "action": event.get("action") or ""}})
                elif kind == "error":
                    raise TurnFailed(str(event.get("error") or "the AI core failed"),
                                     str(event.get("errorType") or "ai_core_failed"))
                elif kind == "done":
                    final = event
                    break
                _set_once(relayed)
            if final is None:
                raise TurnFailed("the AI core ended the stream before the reply was complete")
            await writes_finished()  # a reply that is only `done` relayed nothing first
            _confirmation(confirmed)
        except Exception as error:
            if isinstance(error, TurnFailed):
                failure = error
            else:  # a defect here, not the AI core's doing: every device's stream still ends
                log.exception("chat turn %s of session %s failed", turn_id, session_id)
                failure = TurnFailed("the server failed while relaying the reply", "internal_error")
            await relay.aclose()
            await _abandon(first_event, events)
            await writes_finished()
            await self._fail(user_id, session_id, sender, turn_id, failure, "".join(pieces), emit, gate)
            return "duplicate" if failure.error_type == "duplicate_message" else "failed"
        finally:
            await relay.aclose()
            await _abandon(first_event, events)
            await writes_finished()  # cancelled: the row and the message are written, or fail

        reply = str(final.get("text") if final.get("text") is not None else "".join(pieces))
        review = review_reply(reply)
        stored_ids = []
        for part in review:
            stored = await self.conversations.add_message(
                session_id, user_id, stored_role(part["type"]), part["content"],
                part["type"] if part["type"] in STORED_TYPES else "chat",
                metadata={"turn_id": turn_id, **part["metadata"]})
            stored_ids.append(stored["id"])
        await self.context.bus.set(activity_key(session_id), str(now_ms()), ttl=86400)
        # Closed before stream_end: the device that sees it may send its next message at once,
        # and this write would compete with that turn's start.
        await store.finish(self.context.db, turn_id, "done")
        await emit({"type": "review", "role": "assistant", "msg_type": "chat", "message_id": message_id,
                    "review_messages": review})
        await emit(stream_end_frame(turn_id, reply, final.get("finish_reason") or "stop",
                                    model=final.get("model") or "", stored_message_ids=stored_ids))
        await self.replay.finish(session_id, turn_id)
        return "done"

    async def _store_user_message(self, row: dict, attachments: list[dict], gate: "EchoGate",
                                  relayed: "asyncio.Future") -> dict:
        """Write the turn's queue row if the submitter did not, and the user's message; then
        echo it to the user's other devices and let the reply's frames follow.

        When the sender sees the reply without waiting for this, the writes start once the
        AI core's first event was sent on (or `store_after` seconds passed): their work in this
        process and in PostgreSQL would otherwise compete with the first token for the CPU."""
        if gate.sender is not None:
            await asyncio.wait([relayed], timeout=self.store_after)
        session_id, user_id = row["session_id"], row["user_id"]
        metadata = {"mode": row["mode"]}
        if attachments:
            metadata["attachments"] = [{k: v for k, v in a.items() if k != "url"} for a in attachments]
        store_message = self.conversations.add_message(session_id, user_id, "user", row["text"], "chat",
                                                       metadata=metadata, client_msg_id=row["client_msg_id"])
        try:
            if "id" in row:  # claimed from the queue: the row exists
                recorded, stored = row, await store_message
            else:
                recorded, stored = await asyncio.gather(
                    store.enqueue(self.context.db, **{key: row[key] for key in TURN_FIELDS}, running=True),
                    store_message)
            if recorded is None and not stored.get("duplicate"):
                # The queue already had this id (a row from before a restart whose turn never
                # stored its message): the message is new to the session, so the turn goes on.
                log.warning("turn %s of session %s runs without its own queue row", row["turn_id"], session_id)
            if stored.get("duplicate"):
                raise TurnFailed(f"this message was already received (client_msg_id {row['client_msg_id']})",
                                 "duplicate_message")
        except BaseException as error:
            await gate.open(None)
            if not isinstance(error, TurnFailed):  # nothing stored: let a re-send through
                await self._forget_message_id(row)
            raise
        await gate.open({
            "type": "response", "role": "user", "msg_type": "chat", "session_id": session_id,
            "message_id": str(stored["id"]), "content": row["text"], "text": row["text"],
            "attachments": metadata.get("attachments", []), "client_msg_id": row["client_msg_id"],
            "timestamp": stored.get("created_at") or now_ms()})
        await self.context.bus.set(activity_key(session_id), str(now_ms()), ttl=86400)
        return stored

    async def _end_dead_turn(self, user_id: str, session_id: str, dead: "Snapshot", latest: bool = False) -> None:
        """The previous turn's reply stopped mid-stream (its instance died): every device gets
        its stream_end, with what arrived of the text, before the next turn's stream_start.
        `latest`: no turn began since, so the replay keeps the dead turn and takes the frame too."""
        frames = [json.loads(payload) for _, payload in dead.frames]
        if frames[-1].get("type") == "stream_end":  # it had ended; its instance stopped before recording that
            return
        text = "".join(str(frame.get("content") or "") for frame in frames if frame.get("type") == "stream_chunk")
        seq = max(seq for seq, _ in dead.frames) + 1
        log.warning("turn %s of session %s never ended (its instance stopped); ending it", dead.turn_id, session_id)
        payload = json.dumps(stream_end_frame(dead.turn_id, text, "error", session_id=session_id, seq=seq,
                                              timestamp=now_ms()), ensure_ascii=False)
        if latest:
            await self.replay.append(session_id, dead.turn_id, seq, payload)
        await self.delivery.send_payload(user_id, payload, turn_id=dead.turn_id, seq=seq)

    async def _forget_message_id(self, row: dict) -> None:
        if row["client_msg_id"] is not None:
            with contextlib.suppress(Exception):
                await self.context.bus.delete(message_key(row["session_id"], row["client_msg_id"]))

    async def _fail(self, user_id: str, session_id: str, sender: str | None, turn_id: str,
                    failure: TurnFailed, partial: str, emit, gate: "EchoGate") -> None:
        log.warning("chat turn %s of session %s failed: %s", turn_id, session_id, failure.error)
        await gate.open(None)
        target = {"only": sender} if sender else {}
        await self.delivery.send(user_id, {
            "type": "error", "error": failure.error, "errorType": failure.error_type, "msg_type": "system_info",
            "session_id": session_id, "turn_id": turn_id, "timestamp": now_ms()}, **target)
        if failure.error_type != "duplicate_message":  # nothing to try again
            await self.delivery.send(user_id, {
                "type": "system_info", "role": "system", "msg_type": "system_info", "session_id": session_id,
                "turn_id": turn_id, "timestamp": now_ms(),
                "system_info": {"level": "error", "action": "retry",
                                "message": "The assistant could not answer this message. Please try again."}},
                **target)
        # Every device saw stream_start: end the stream for all of them.
        await emit(stream_end_frame(turn_id, partial, "error"))
        await self.replay.finish(session_id, turn_id)


TURN_FIELDS = ("turn_id", "session_id", "user_id", "text", "mode", "attachments", "client_msg_id",
               "sender_connection")


class EchoGate:
    """Delivery of one turn's frames. The sender gets each frame at once. The user's other
    devices must see the echo of the user's message before the reply, and the echo waits for
    the message to be stored: their frames are held until `open`, then sent in order."""

    def __init__(self, delivery: Delivery, user_id: str, sender: str | None, turn_id: str):
        self.delivery, self.user_id, self.sender, self.turn_id = delivery, user_id, sender, turn_id
        self._held: list[tuple[str, int]] | None = []

    async def send(self, payload: str, seq: int) -> None:
        if self._held is None:
            await self.delivery.send_payload(self.user_id, payload, turn_id=self.turn_id, seq=seq)
            return
        self._held.append((payload, seq))
        if self.sender is not None:
            await self.delivery.send_payload(self.user_id, payload, only=self.sender, turn_id=self.turn_id, seq=seq)

    async def open(self, echo: dict | None) -> None:
        """Send `echo` (if any) to every device but the sender, then what was held; idempotent."""
        if self._held is None:
            return
        if echo is not None:
            await self.delivery.send(self.user_id, echo, exclude=self.sender)
        while self._held:  # frames sent meanwhile join the end of the list
            payload, seq = self._held.pop(0)
            await self.delivery.send_payload(self.user_id, payload, exclude=self.sender, turn_id=self.turn_id,
                                             seq=seq)
        self._held = None


def stream_end_frame(turn_id: str, text: str, finish_reason: str, **extra) -> dict:
    """The frame that ends a turn's reply, whichever way it ended."""
    return {"type": "stream_end", "role": "assistant", "msg_type": "chat", "message_id": f"reply_{turn_id}",
            "turn_id": turn_id, "text": text, "content": text, "finish_reason": finish_reason, **extra}


def _set_once(future: "asyncio.Future") -> None:
    if not future.done():
        future.set_result(None)


def _log_failure(task: "asyncio.Task") -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("chat bookkeeping failed: %r", task.exception())


def _confirmation(task: "asyncio.Task") -> dict:
    """The stored user message, or TurnFailed when it could not be stored."""
    try:
        return task.result()
    except TurnFailed:
        raise
    except Exception as error:
        log.error("storing the user's message failed: %r", error)
        raise TurnFailed("the message could not be stored; please send it again", "storage_failed") from None


_END = object()


async def _first(events: AsyncIterator[dict]):
    return await anext(events, _END)


async def _then(first: "asyncio.Task", events: AsyncIterator[dict]) -> AsyncIterator[dict]:
    """The event `first` fetched ahead, then the rest of the stream."""
    event = await first
    if event is _END:
        return
    yield event
    async for event in events:
        yield event


async def _abandon(first: "asyncio.Task", events) -> None:
    """Stop a stream that is no longer wanted (or is finished) and release its connection."""
    if not first.done():
        first.cancel()
    with contextlib.suppress(BaseException):
        await first
    await events.aclose()
