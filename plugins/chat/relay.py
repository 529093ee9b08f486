"""The relay of one turn: the session's history, the AI core's streamed reply sent on to every
device of the user (on every instance), the user's message and the reply stored, the echo.

Frames: `stream_start`, `stream_chunk`s, `thinking` / `tool_progress` / `system_info` as the AI
core sends them, frames of the reply taps (taps.py) as they come, then `review` and `stream_end`
(which waits for the taps to finish). Frames for all devices are appended to the replay buffer
first (replay.py)."""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Literal, cast

from gateway.errors import unavailable_error
from gateway.text import dumps_text
from plugins.ai_core.contract import AiCore, AiCoreError, ChatEvent, ChatRequest, DoneEvent, HistoryItem, StreamStop
from plugins.sessions.contract import CONVERSATIONS

from . import store
from .admission import Admission, Turn
from .contract import ReplyStream, ReplyTap, TurnFailed, TurnReply
from .frames import (ChunkFrames, echo_frame, error_frame, event_frame, failure_frames, now_ms, reply_id,
                     review_frame, stream_end_frame, stream_start_frame, turn_error_text, turn_error_type)
from .keys import ACTIVITY_TTL, SessionRef, activity_key
from .replay import Replay, Snapshot
from .review import review_reply, stored_role
from .taps import ReplyTapRegistry
from .taps import abort as abort_taps
from .taps import feed as feed_taps
from .taps import finish as finish_taps

if TYPE_CHECKING:
    from gateway.context import Context
    from gateway.hub import WebSocketHub

log = logging.getLogger("plugins.chat.relay")

STORED_TYPES = {"chat", "action", "markdown", "code"}


class TurnControl:
    """A turn this instance is running, as a stop request finds it (`Relay.request_stop`).
    A stop ends the AI core's stream (`StreamStop`): a read waiting for the next event returns
    at once and the stream simply ends. The relay also reads `stopped` before each read, so a
    stop while it sends an event ends the reply there. Nothing is cancelled: the turn ends in
    its own task, wherever that task is."""

    __slots__ = ("user_id", "session_id", "stream", "stopped")

    def __init__(self, user_id: str, session_id: str, stream: StreamStop):
        self.user_id, self.session_id, self.stream = user_id, session_id, stream
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True
        self.stream.request()


class Relay:
    def __init__(self, context: "Context", *, admission: Admission, replay: Replay, ai: AiCore,
                 history_limit: int, store_after: float, max_reply_chars: int,
                 taps: ReplyTapRegistry | None = None):
        self.context, self.hub = context, context.hub
        self.taps = taps or ReplyTapRegistry()
        self.admission, self.replay, self.ai = admission, replay, ai
        self.history_limit, self.store_after = history_limit, store_after
        self.max_reply_chars = max_reply_chars
        self.records = store.TurnRecords(context)
        self.live: dict[str, TurnControl] = {}  # turn id → the turns this instance runs now
        # Turns of this instance waiting for the AI core's first event: while any waits, a turn
        # that got its own leaves its writes to the `store_after` timer (see run).
        self.awaiting_first_event = 0

    @property
    def conversations(self):
        return self.context.contracts.require(CONVERSATIONS)

    def request_stop(self, user_id: str, session_id: str, turn_id: str | None) -> bool:
        """Stop the user's turn `turn_id` (any turn of the session when None) if this instance
        runs it: it ends as a reply cut at its limit does, with `finish_reason` `stopped`.
        False when it does not run here (or is another user's, or already ended)."""
        if turn_id is not None:
            control = self.live.get(turn_id)
            found = [control] if control is not None else []
        else:
            found = list(self.live.values())
        stopped = False
        for control in found:
            if control.user_id == user_id and control.session_id == session_id:
                control.stop()
                stopped = True
        return stopped

    async def run(self, turn: Turn, watcher: ReplyTap | None = None,
                  on_start: Callable[[], Awaitable[None]] | None = None) -> tuple[str, TurnReply | TurnFailed]:
        """One turn; its final status ("done", "failed", "duplicate") and its reply or failure.
        `watcher`: a tap of the turn's own (its waiter's, see waiters.py) beside the plugins'.
        `on_start`: the caller's bookkeeping, run in the reply's set-up once the AI core's
        request is out (a task of its own would cost every turn of a burst a step).
        The AI core is called first; the turn's row (when the submitter did not write it yet)
        and the user's message are stored while it thinks. The sender sees the reply's frames
        as they come; the user's other devices see the echo of the message first (it carries the
        stored id), then the same frames (see EchoGate)."""
        session_id, user_id, turn_id = turn.session_id, turn.user_id, turn.turn_id
        session = turn.session.key  # the session's keys on the bus (replay, activity)
        try:
            if turn.reuse is None:
                history = await self.conversations.recent_history(user_id, session_id, self.history_limit)
            else:  # the stored message is answered again: the history before it
                history = await self.conversations.recent_history(user_id, session_id, self.history_limit + 1)
                if history and history[-1]["role"] == "user":
                    history = history[:-1]
                history = history[-self.history_limit:]
        except Exception as error:  # nothing sent or stored yet: tell the sender, allow a re-send
            log.error("reading the history of session %s failed: %r", session_id, error)
            await self.admission.forget_message_id(turn)
            error_type = _storage_error_type(error)
            failure = TurnFailed(turn_error_text(error_type), error_type)
            if turn.sender is not None:
                await self.hub.send_to_user(user_id, error_frame(
                    failure.error, errorType=failure.error_type, session_id=session_id, turn_id=turn_id,
                    response_mode=turn.mode, client_msg_id=turn.client_msg_id), only=turn.sender)
            return "failed", failure
        # The casts: the sessions contract types its history as plain dicts (they are {role,
        # content}); a turn's mode was checked where it came in, or the AI core refuses it.
        body: ChatRequest = {
            "user_id": user_id, "session_id": session_id, "text": model_text(turn.text, turn.attachments),
            "history": cast("list[HistoryItem]", history),
            "mode": cast('Literal["text", "voice_msg", "voice_assistant"]', turn.mode), "purpose": "chat",
            "attachments": [{"type": "image", "url": a["url"]} for a in turn.attachments if a.get("type") == "image"],
            "message_id": turn.client_msg_id}
        stream_stop = StreamStop()
        events = self.ai.stream_chat(body, stream_stop)
        control = self.live[turn_id] = TurnControl(user_id, session_id, stream_stop)
        gate = EchoGate(self.hub, user_id, turn.sender, turn_id)
        # The writes start once the first event went out and no other turn here still waits for
        # its own, or `store_after` seconds passed, or at once without a sender (see
        # _store_user_message). Their task is made then, not made to wait: a burst of turns
        # would step hundreds of waiting tasks on the way to their first tokens. A timer rather
        # than a wait with a timeout, for the same reason.
        writes: asyncio.Task | None = None

        def start_writes() -> asyncio.Task:
            nonlocal writes
            if writes is None:
                writes = asyncio.create_task(self._store_user_message(turn, gate))
            return writes

        if turn.sender is None:
            start_writes()
        else:
            asyncio.get_running_loop().call_later(self.store_after, start_writes)
        sequence = 0
        mode = turn.mode
        chunks = ChunkFrames(session_id, turn_id, mode)
        pieces: list[str] = []  # the reply's text the devices were sent
        # Frames are numbered and sent one at a time. Only a tap's own task can emit beside the
        # reply's, so a reply with taps takes a lock per frame and one without (text) does not.
        order: contextlib.AbstractAsyncContextManager = contextlib.nullcontext()
        locked = False
        taps: list[ReplyTap] = []
        append, record, deliver = self.replay.append, self.replay.record, self.hub.send_to_user
        deliver_now = self.hub.send_to_user_now
        # One instance: the bus appends a frame without waiting, and the hub sends it without
        # waiting, so a delta is sent with no coroutine between (send_now).
        in_process = not self.context.bus.shared

        async def emit(message: dict) -> None:
            async with order:
                message.update({"session_id": session_id, "turn_id": turn_id, "seq": sequence,
                                "response_mode": mode, "timestamp": now_ms()})
                await send(dumps_text(message))

        async def send(payload: str, content: str = "") -> None:
            """`content`: the reply's text the frame carries, counted once devices may see it."""
            nonlocal sequence
            if gate.opened:  # the usual case once the user's message is stored: straight to the hub
                await deliver(user_id, payload, turn_id=turn_id, seq=sequence,
                              record=record(session, turn_id, sequence, payload))
                if content:
                    pieces.append(content)
            else:
                await append(session, turn_id, sequence, payload)
                if content:
                    pieces.append(content)
                await gate.send(payload, sequence)
            sequence += 1

        def send_now(payload: str, content: str) -> bool:
            """`send` done before returning, where nothing has to wait; False, nothing sent,
            otherwise: then `send` it."""
            nonlocal sequence
            if not (in_process and gate.opened) or deliver_now(
                    user_id, payload, turn_id=turn_id, seq=sequence,
                    record=record(session, turn_id, sequence, payload)) is None:
                return False
            pieces.append(content)
            sequence += 1
            return True

        async def emit_end(message: dict) -> None:
            """The frame that ends a failed reply: it reaches this instance's devices even when
            the replay cannot record it or other instances cannot be told (the bus is down)."""
            async with order:
                message.update({"session_id": session_id, "turn_id": turn_id, "seq": sequence,
                                "response_mode": mode, "timestamp": now_ms()})
                payload = dumps_text(message)
                await _best_effort(self.replay.append(session, turn_id, sequence, payload),
                                   "recording the reply's end")
                await _best_effort(gate.send(payload, sequence), "sending the reply's end")

        async def writes_finished() -> None:
            """The writes start now if no first event let them, and are waited for."""
            task = start_writes()
            if not task.done():
                await asyncio.wait([task])
            # Read here: a failed turn ends without asking for the stored message (the success
            # path still raises it through _confirmation), and asyncio would log it as never read.
            _outcome_read(task)

        async def begin() -> None:
            """The reply's set-up, run while the AI core's request is out: the previous turn
            ended for the devices if its instance died mid-reply, `stream_start`, the taps."""
            nonlocal taps, order, locked
            if on_start is not None:
                await on_start()
            unfinished = await self.replay.begin(session, turn_id)
            if unfinished is not None and unfinished.frames:
                await self.end_dead_turn(turn.session, unfinished)
            await emit(stream_start_frame(turn_id))
            taps = self.taps.open(ReplyStream(user_id, session_id, turn_id, turn.mode, reply_id(turn_id), emit))
            if watcher is not None:
                taps.append(watcher)
            if taps:
                order, locked = asyncio.Lock(), True

        room, cut, stopped = self.max_reply_chars, False, False
        final: DoneEvent | None = None
        # The AI core's request goes out in this task's own step (the set-up waits its turn in a
        # task beside it): a burst of turns gets its requests out sooner. The events are read
        # straight from the AI core's stream, with no generator between: this runs per delta.
        set_up: asyncio.Task | None = asyncio.create_task(begin())
        event: ChatEvent | None
        self.awaiting_first_event += 1
        awaiting = True

        def first_event_came() -> None:
            nonlocal awaiting
            if awaiting:
                awaiting = False
                self.awaiting_first_event -= 1

        try:
            while True:
                if control.stopped:  # the person stopped the reply: what arrived is the reply
                    stopped = True
                    break
                try:
                    event = await events.__anext__()
                except StopAsyncIteration:
                    event, stopped = None, control.stopped  # stopped: the AI core stops the model
                except BaseException as error:
                    first_event_came()
                    if set_up is not None:  # stream_start is out (or failed) before the failure's frames
                        await _wait_out(set_up, cancel=isinstance(error, asyncio.CancelledError))
                        set_up = None
                    raise
                if set_up is not None:  # the first event: the set-up must have finished
                    first_event_came()
                    await set_up
                    set_up = None
                if event is None:
                    break
                if writes is not None and writes.done():
                    _confirmation(writes)  # raises when the message could not be stored
                kind = event.get("type")
                if kind == "delta":
                    content = str(event.get("content") or "")
                    if len(content) > room:  # the reply's limit: keep what fits, stop the AI core
                        content, cut = content[:room], True
                    if content:
                        room -= len(content)
                        if locked:
                            async with order:
                                await send(chunks.encode(sequence, content), content)
                            taps = feed_taps(taps, content)
                        elif not send_now(payload := chunks.encode(sequence, content), content):
                            await send(payload, content)
                    if cut:
                        break
                elif kind == "error":
                    error_type = turn_error_type(event.get("errorType"))
                    log.warning("the AI core ended turn %s with an error: %s (%s)", turn_id,
                                event.get("error"), event.get("errorType"))
                    raise TurnFailed(turn_error_text(error_type), error_type)
                elif kind == "done":
                    final = cast("DoneEvent", event)  # as its type says; its fields are still read with defaults
                    break
                elif (frame := event_frame(event, turn_id)) is not None:
                    await emit(frame)
                if writes is None and not self.awaiting_first_event:
                    # In a burst the writes (in this process and in PostgreSQL) would take the
                    # CPU from the first tokens still to come: they wait for the timer.
                    start_writes()
            if final is None and not cut and not stopped:
                raise TurnFailed(turn_error_text("ai_core_failed"), "ai_core_failed")
            await writes_finished()  # a reply that is only `done` relayed nothing first
            user_message = _confirmation(start_writes())
        except Exception as error:
            failure = _as_failure(error, turn)
            if set_up is not None:  # a failure of the set-up itself
                await _wait_out(set_up)
            await events.aclose()
            await writes_finished()
            await abort_taps(taps)
            await self._fail(turn, failure, "".join(pieces), emit_end, gate)
            return ("duplicate" if failure.error_type == "duplicate_message" else "failed"), failure
        except asyncio.CancelledError:
            await abort_taps(taps)
            raise
        finally:
            self.live.pop(turn_id, None)  # a stop from now on finds the turn ended
            first_event_came()
            if set_up is not None:
                await _wait_out(set_up, cancel=True)
            await events.aclose()
            await writes_finished()  # cancelled: the row and the message are written, or fail

        if final is None and stopped:  # stopped by the person: what arrived is the reply
            log.info("turn %s of session %s stopped by its user", turn_id, session_id)
            final = {"type": "done", "text": "".join(pieces), "model": "", "finish_reason": "stopped",
                     "fallbacks": [], "usage": None, "duration_ms": 0.0}
        elif final is None:  # cut at the reply's limit: what arrived is the reply, and devices are told
            log.warning("turn %s of session %s reached the reply limit of %d characters; cut there",
                        turn_id, session_id, self.max_reply_chars)
            final = {"type": "done", "text": "".join(pieces), "model": "", "finish_reason": "length",
                     "fallbacks": [], "usage": None, "duration_ms": 0.0}
            await emit(error_frame(f"The reply reached the limit of {self.max_reply_chars} characters "
                                   f"and was cut off there.", errorType="reply_too_large"))
        reply = str(final.get("text") if final.get("text") is not None else "".join(pieces))
        review = review_reply(reply)
        try:
            stored_ids = []
            for part in review:
                stored = await self.conversations.add_message(
                    session_id, user_id, stored_role(part["type"]), part["content"],
                    part["type"] if part["type"] in STORED_TYPES else "chat",
                    metadata={"turn_id": turn_id, **part["metadata"]})
                stored_ids.append(stored["id"])
            await _best_effort(self.context.bus.set(activity_key(session), str(now_ms()), ttl=ACTIVITY_TTL),
                               "recording the session's activity")
            # Closed before stream_end: the device that sees it may send its next message at once,
            # and this write would compete with that turn's start.
            await self.records.finish(turn_id, "done")
            await emit(review_frame(turn_id, review))
        except Exception as error:  # the database or the bus went away as the reply ended
            failure = _as_failure(error, turn)
            await abort_taps(taps)
            await self._fail(turn, failure, reply, emit_end, gate)
            return "failed", failure
        except asyncio.CancelledError:
            await abort_taps(taps)
            raise
        done = TurnReply(reply, final.get("model") or "", final.get("finish_reason") or "stop", stored_ids)
        try:
            tapped = await finish_taps(taps, reply) if taps else {}
        except asyncio.CancelledError:
            await abort_taps(taps)
            raise
        await emit_end(stream_end_frame(turn_id, reply, done.finish_reason, model=done.model,
                                        stored_message_ids=stored_ids, user_message_id=user_message["id"],
                                        **tapped))
        await _best_effort(self.replay.finish(session, turn_id), "recording the reply's end")
        return "done", done

    async def _store_user_message(self, turn: Turn, gate: "EchoGate") -> dict:
        """Write the turn's queue row if the submitter did not, and the user's message; then
        echo it to the user's other devices and let the reply's frames follow.

        When the sender sees the reply without waiting for this, the writes start once the
        AI core's first event was sent on (or `store_after` seconds passed): their work in this
        process and in PostgreSQL would otherwise compete with the first token for the CPU
        (`run` starts this then)."""
        session_id = turn.session_id
        metadata: dict[str, Any] = dict(turn.metadata) if turn.metadata is not None else {"mode": turn.mode}
        if turn.attachments:
            metadata["attachments"] = [{k: v for k, v in a.items() if k != "url"} for a in turn.attachments]
        store_message = self.conversations.add_message(session_id, turn.user_id, "user", turn.text, "chat",
                                                       metadata=metadata, client_msg_id=turn.client_msg_id) \
            if turn.reuse is None else _stored(turn.reuse)
        try:
            if turn.recorded:  # claimed from the queue, or written at admission
                recorded, stored = True, await store_message
            else:  # both writes at once, each batched with other turns'
                recording = self.records.running(turn.columns())
                try:
                    stored = await store_message
                except BaseException:
                    recording.add_done_callback(_outcome_read)  # it is written anyway
                    raise
                recorded = await recording
            if not recorded and not stored.get("duplicate"):
                # The queue already had this id (a row from before a restart whose turn never
                # stored its message): the message is new to the session, so the turn goes on.
                log.warning("turn %s of session %s runs without its own queue row", turn.turn_id, session_id)
            if stored.get("duplicate"):
                raise TurnFailed(f"this message was already received (client_msg_id {turn.client_msg_id})",
                                 "duplicate_message")
        except BaseException as error:
            await gate.open(None)
            if not isinstance(error, TurnFailed):  # nothing stored: let a re-send through
                await self.admission.forget_message_id(turn)
            raise
        await gate.open(echo_frame(session_id, stored, turn.text, metadata.get("attachments", []),
                                   turn.client_msg_id, turn.client) if turn.reuse is None else None)
        await self.context.bus.set(activity_key(turn.session.key), str(now_ms()), ttl=ACTIVITY_TTL)
        return stored

    async def end_dead_turn(self, session: SessionRef, dead: Snapshot, latest: bool = False) -> None:
        """The previous turn's reply stopped mid-stream (its instance died): every device gets
        its stream_end, with what arrived of the text, before the next turn's stream_start.
        `latest`: no turn began since, so the replay keeps the dead turn and takes the frame too."""
        frames = [json.loads(payload) for _, payload in dead.frames]
        if frames[-1].get("type") == "stream_end":  # it had ended; its instance stopped before recording that
            return
        text = "".join(str(frame.get("content") or "") for frame in frames if frame.get("type") == "stream_chunk")
        seq = max(seq for seq, _ in dead.frames) + 1
        user_id, session_id = session.user_id, session.session_id
        log.warning("turn %s of session %s never ended (its instance stopped); ending it", dead.turn_id, session_id)
        # The dead turn's mode, as its frames carried it.
        mode = str(frames[0].get("response_mode") or "text")
        payload = dumps_text(stream_end_frame(dead.turn_id, text, "error", session_id=session_id, seq=seq,
                                              response_mode=mode, timestamp=now_ms()))
        if latest:
            await self.replay.append(session.key, dead.turn_id, seq, payload)
        await self.hub.send_to_user(user_id, payload, turn_id=dead.turn_id, seq=seq)

    async def _fail(self, turn: Turn, failure: TurnFailed, partial: str, emit_end, gate: "EchoGate") -> None:
        """Tell the devices, each step on its own: when the bus is down, what can still reach
        this instance's devices does."""
        log.warning("chat turn %s of session %s failed: %s", turn.turn_id, turn.session_id, failure.error)
        await _best_effort(gate.open(None), "releasing the reply's frames")
        for frame in failure_frames(turn.session_id, turn.turn_id, failure.error, failure.error_type, turn.mode):
            await _best_effort(self.hub.send_to_user(turn.user_id, frame, only=turn.sender or None),
                               "sending the failure")
        # Every device saw stream_start: end the stream for all of them.
        await emit_end(stream_end_frame(turn.turn_id, partial, "error"))
        await _best_effort(self.replay.finish(turn.session.key, turn.turn_id), "recording the reply's end")


class EchoGate:
    """Delivery of one turn's frames. The sender gets each frame at once. The user's other
    devices must see the echo of the user's message before the reply, and the echo waits for
    the message to be stored: their frames are held until `open`, then sent in order."""

    def __init__(self, hub: "WebSocketHub", user_id: str, sender: str | None, turn_id: str):
        self.hub, self.user_id, self.sender, self.turn_id = hub, user_id, sender, turn_id
        self._held: list[tuple[str, int]] | None = []
        self.opened = False  # every frame from now on goes to every device (read per frame)

    async def _sender_alone(self) -> bool:
        """Whether nobody but the sender could receive the echo and the held frames: no other
        device of the user is connected here, nor on another instance (a device that connects
        after this is replayed the frames, as one that connects after the echo)."""
        if self.sender is None or any(connection.id != self.sender
                                      for connection in self.hub.connections(self.user_id)):
            return False
        return not await self.hub.held_elsewhere(self.user_id)

    async def send(self, payload: str, seq: int) -> None:
        if self._held is None:
            await self.hub.send_to_user(self.user_id, payload, turn_id=self.turn_id, seq=seq)
            return
        self._held.append((payload, seq))
        if self.sender is not None:
            await self.hub.send_to_user(self.user_id, payload, only=self.sender, turn_id=self.turn_id, seq=seq)

    async def open(self, echo: dict | None) -> None:
        """Send `echo` (if any) to every device but the sender, then what was held; idempotent.
        A frame other instances could not be sent (the bus is down) does not hold back the
        rest from this instance's devices; the failure is raised once all went."""
        if self._held is None:
            return
        if await self._sender_alone():  # the usual device on its own: nothing to send twice
            self._held, self.opened = None, True
            return
        failure = None
        if echo is not None:
            failure = await _best_effort(self.hub.send_to_user(self.user_id, echo, exclude=self.sender), "the echo")
        while self._held:  # frames sent meanwhile join the end of the list
            payload, seq = self._held.pop(0)
            failure = await _best_effort(self.hub.send_to_user(
                self.user_id, payload, exclude=self.sender, turn_id=self.turn_id, seq=seq), "a held frame") or failure
        self._held, self.opened = None, True
        if failure is not None:
            raise failure


def model_text(text: str, attachments: list[dict]) -> str:
    """What the AI core reads of the person's words. A message that only carries documents
    (they went into the conversation's knowledge base, which the assistant searches) says so in
    words: the AI core takes no turn without text or an image."""
    if text.strip() or any(a.get("type") == "image" for a in attachments):
        return text
    names = [str(a.get("filename") or "a document") for a in attachments if a.get("type") == "document"]
    return f"I attached {', '.join(names)}." if names else text


def _as_failure(error: Exception, turn: Turn) -> TurnFailed:
    if isinstance(error, TurnFailed):
        return error
    if isinstance(error, AiCoreError):
        # Devices see whether the AI core could be reached, or sent more than a reply may hold;
        # what it answered, and where it runs, stay in the log.
        log.warning("the AI core failed turn %s: %s (%s)", turn.turn_id, error.error, error.error_type)
        error_type = error.error_type if error.error_type in ("ai_core_unreachable", "reply_too_large") \
            else "ai_core_failed"
        return TurnFailed(turn_error_text(error_type), error_type)
    if unavailable_error(error) is not None:  # the database or the bus went away
        error_type = _storage_error_type(error)
        return TurnFailed(turn_error_text(error_type), error_type)
    # A defect here, not the AI core's doing: every device's stream still ends.
    log.exception("chat turn %s of session %s failed", turn.turn_id, turn.session_id, exc_info=error)
    return TurnFailed(turn_error_text("internal_error"), "internal_error")


def _storage_error_type(error: Exception) -> str:
    """`database_unavailable` (or `bus_unavailable`) when that is why a write failed: the device
    may tell the person to try again in a moment."""
    unavailable = unavailable_error(error)
    return unavailable.error_type if unavailable is not None and unavailable.error_type else "storage_failed"


async def _best_effort(step: Awaitable[Any], what: str) -> Exception | None:
    """Await `step`; a failure is logged and returned rather than raised."""
    try:
        await step
    except Exception as error:
        log.warning("%s failed: %r", what, error)
        return error
    return None


async def _stored(message: dict) -> dict:
    return message


def _outcome_read(future: "asyncio.Future") -> None:
    """Read a future's outcome nobody waits for any more (asyncio logs an exception never read)."""
    if not future.cancelled():
        future.exception()


def _confirmation(task: "asyncio.Task") -> dict:
    """The stored user message, or TurnFailed when it could not be stored."""
    try:
        return task.result()
    except TurnFailed:
        raise
    except Exception as error:
        log.error("storing the user's message failed: %r", error)
        error_type = _storage_error_type(error)
        raise TurnFailed(turn_error_text(error_type), error_type) from None


async def _wait_out(task: "asyncio.Task", cancel: bool = False) -> None:
    """Wait for `task` to end (cancelled first with `cancel`), leaving its outcome unraised."""
    if cancel:
        task.cancel()
    await asyncio.wait([task])
    _outcome_read(task)
