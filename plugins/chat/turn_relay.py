"""One turn's relay (`TurnRelay`): the AI core's streamed reply sent on to every device of the
user (on every instance), the user's message (user_message.py) and the reply stored. `Relay.run`
(relay.py) reads the history and hands the turn to one of these.

Frames: `stream_start`, `stream_chunk`s, `thinking` / `tool_progress` / `system_info` as the AI
core sends them, frames of the reply taps (taps.py) as they come, then `review` and `stream_end`
(which waits for the taps to finish). Frames for all devices are appended to the replay buffer
first (replay.py).

The turn's state is this object's: its methods share it where closures over one long function
did. A delta's path (`_relay_events`, `_send_now`) reads it from slots, and stays in one
coroutine: no step of its own per delta."""
from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import AsyncGenerator, Literal, cast

from gateway.text import dumps_text
from plugins.ai_core.contract import ChatEvent, ChatRequest, DoneEvent, HistoryItem, StreamStop

from .admission import Turn
from .contract import ReplyStream, ReplyTap, TurnFailed, TurnReply
from .echo_gate import EchoGate
from .frames import (ChunkFrames, error_frame, event_frame, failure_frames, now_ms, reply_id, review_frame,
                     stream_end_frame, stream_start_frame, turn_error_text, turn_error_type)
from .keys import ACTIVITY_TTL, activity_key
from .outcomes import as_failure, best_effort, confirmation, outcome_read, wait_out
from .relay_state import RelayState, TurnControl
from .review import review_reply, stored_role
from .taps import abort as abort_taps
from .taps import feed as feed_taps
from .taps import finish as finish_taps
from .user_message import model_text, store_user_message

log = logging.getLogger("plugins.chat.relay")  # the relay's log (docs/chat.md)

STORED_TYPES = {"chat", "action", "markdown", "code"}


class TurnRelay:
    """One turn, relayed once (`run`). See the module docstring."""

    __slots__ = ("relay", "turn", "history", "watcher", "user_id", "session_id", "turn_id",
                 "session", "mode", "events", "control", "gate", "writes", "sequence", "chunks", "pieces",
                 "order", "locked", "taps", "record", "deliver", "deliver_now", "set_up",
                 "awaiting", "final", "cut", "stopped")

    def __init__(self, relay: RelayState, turn: Turn, history: list[dict], watcher: ReplyTap | None):
        self.relay, self.turn, self.history, self.watcher = relay, turn, history, watcher
        self.user_id, self.session_id, self.turn_id = turn.user_id, turn.session_id, turn.turn_id
        self.session = turn.session.key  # the session's keys on the bus (replay, activity)
        self.mode = turn.mode
        self.writes: asyncio.Task | None = None  # the user's message stored (user_message.py)
        self.sequence = 0
        self.chunks = ChunkFrames(self.session_id, self.turn_id, self.mode)
        self.pieces: list[str] = []  # the reply's text the devices were sent
        # Frames are numbered and sent one at a time. Only a tap's own task can emit beside the
        # reply's, so a reply with taps takes a lock per frame and one without (text) does not.
        self.order: contextlib.AbstractAsyncContextManager = contextlib.nullcontext()
        self.locked = False
        self.taps: list[ReplyTap] = []
        self.record, self.deliver = relay.replay.record, relay.hub.send_to_user
        # Where every device of the user is on this instance (or there is one instance), the
        # bus appends a frame without the turn waiting, and the hub sends it once the append is
        # in: a delta is sent with no coroutine between (_send_now), and no round trip waited for.
        self.deliver_now = relay.hub.send_to_user_now
        self.set_up: asyncio.Task | None = None
        self.awaiting = False  # counted in the relay's `awaiting_first_event`
        self.final: DoneEvent | None = None
        self.cut = self.stopped = False

    async def run(self) -> tuple[str, TurnReply | TurnFailed]:
        """The turn's final status ("done", "failed", "duplicate") and its reply or failure."""
        self._start()
        try:
            await self._relay_events()
            await self.relay.replay.appended(self.session)  # the frames sent without waiting
            await self._writes_finished()  # a reply that is only `done` relayed nothing first
            user_message = confirmation(self._start_writes())
        except Exception as error:
            return await self._failed(error)
        except asyncio.CancelledError:
            await abort_taps(self.taps)
            raise
        finally:
            await self._wind_down()
        return await self._finish(user_message)

    def _start(self) -> None:
        """The AI core's request, and the writes and the reply's set-up started beside it."""
        turn, relay = self.turn, self.relay
        # The casts: the sessions contract types its history as plain dicts (they are {role,
        # content}); a turn's mode was checked where it came in, or the AI core refuses it.
        body: ChatRequest = {
            "user_id": self.user_id, "session_id": self.session_id,
            "text": model_text(turn.text, turn.attachments),
            "history": cast("list[HistoryItem]", self.history),
            "mode": cast('Literal["text", "voice_msg", "voice_assistant"]', turn.mode), "purpose": "chat",
            "attachments": [{"type": "image", "url": a["url"]} for a in turn.attachments if a.get("type") == "image"],
            "message_id": turn.client_msg_id}
        stream_stop = StreamStop()
        self.events: AsyncGenerator[ChatEvent, None] = relay.ai.stream_chat(body, stream_stop)
        self.control = relay.live[self.turn_id] = TurnControl(self.user_id, self.session_id, stream_stop)
        self.gate = EchoGate(relay.hub, self.user_id, turn.sender, self.turn_id)
        # The writes start once the first event went out and no other turn here still waits for
        # its own, or `store_after` seconds passed, or at once without a sender (see
        # user_message.py). Their task is made then, not made to wait: a burst of turns
        # would step hundreds of waiting tasks on the way to their first tokens. A timer rather
        # than a wait with a timeout, for the same reason.
        if turn.sender is None:
            self._start_writes()
        else:
            asyncio.get_running_loop().call_later(relay.store_after, self._start_writes)
        # The AI core's request goes out in this task's own step (the set-up waits its turn in a
        # task beside it): a burst of turns gets its requests out sooner.
        self.set_up = asyncio.create_task(self._begin())
        relay.awaiting_first_event += 1
        self.awaiting = True

    async def _relay_events(self) -> None:
        """Send the AI core's events on until the reply is done, cut at its limit or stopped.
        The events are read straight from the AI core's stream, with no generator between: this
        runs per delta."""
        events, control, chunks, relay = self.events, self.control, self.chunks, self.relay
        room, cut = relay.max_reply_chars, False
        event: ChatEvent | None
        while True:
            if control.stopped:  # the person stopped the reply: what arrived is the reply
                self.stopped = True
                break
            try:
                event = await events.__anext__()
            except StopAsyncIteration:
                event, self.stopped = None, control.stopped  # stopped: the AI core stops the model
            except BaseException as error:
                self._first_event_came()
                if self.set_up is not None:  # stream_start is out (or failed) before the failure's frames
                    await wait_out(self.set_up, cancel=isinstance(error, asyncio.CancelledError))
                    self.set_up = None
                raise
            if self.set_up is not None:  # the first event: the set-up must have finished
                self._first_event_came()
                await self.set_up
                self.set_up = None
            if event is None:
                break
            writes = self.writes
            if writes is not None and writes.done():
                confirmation(writes)  # raises when the message could not be stored
            kind = event.get("type")
            if kind == "delta":
                content = str(event.get("content") or "")
                if len(content) > room:  # the reply's limit: keep what fits, stop the AI core
                    content, cut = content[:room], True
                if content:
                    room -= len(content)
                    if self.locked:
                        async with self.order:
                            await self._send(chunks.encode(self.sequence, content), content)
                        self.taps = feed_taps(self.taps, content)
                    elif not self._send_now(payload := chunks.encode(self.sequence, content), content):
                        await self._send(payload, content)
                if cut:
                    self.cut = True
                    break
            elif kind == "done":
                # As its type says; its fields are still read with defaults.
                self.final = cast("DoneEvent", event)
                break
            else:
                await self._relay_other(event)
            if self.writes is None and not relay.awaiting_first_event:
                # In a burst the writes (in this process and in PostgreSQL) would take the
                # CPU from the first tokens still to come: they wait for the timer.
                self._start_writes()
        if self.final is None and not self.cut and not self.stopped:
            raise TurnFailed(turn_error_text("ai_core_failed"), "ai_core_failed")

    async def _relay_other(self, event: ChatEvent) -> None:
        """An event that is neither a delta nor `done`: an error ends the turn, the others
        (thinking, tool progress...) become frames of their own."""
        if event.get("type") == "error":
            error_type = turn_error_type(event.get("errorType"))
            log.warning("the AI core ended turn %s with an error: %s (%s)", self.turn_id,
                        event.get("error"), event.get("errorType"))
            raise TurnFailed(turn_error_text(error_type), error_type)
        if (frame := event_frame(event, self.turn_id)) is not None:
            await self.emit(frame)

    def _first_event_came(self) -> None:
        if self.awaiting:
            self.awaiting = False
            self.relay.awaiting_first_event -= 1

    async def _begin(self) -> None:
        """The reply's set-up, run while the AI core's request is out: the previous turn
        ended for the devices if its instance died mid-reply, `stream_start`, the taps."""
        relay, turn = self.relay, self.turn
        unfinished = await relay.replay.begin(self.session, self.turn_id)
        if unfinished is not None and unfinished.frames:
            await relay.end_dead_turn(turn.session, unfinished)
        await self.emit(stream_start_frame(self.turn_id))
        taps = relay.taps.open(ReplyStream(self.user_id, self.session_id, self.turn_id, turn.mode,
                                           reply_id(self.turn_id), self.emit))
        if self.watcher is not None:
            taps.append(self.watcher)
        self.taps = taps
        if taps:
            self.order, self.locked = asyncio.Lock(), True

    # -- sending frames

    async def emit(self, message: dict) -> None:
        """Send `message` as the reply's next frame (the taps' `ReplyStream.emit`)."""
        async with self.order:
            message.update({"session_id": self.session_id, "turn_id": self.turn_id, "seq": self.sequence,
                            "response_mode": self.mode, "timestamp": now_ms()})
            await self._send(dumps_text(message))

    async def _send(self, payload: str, content: str = "") -> None:
        """`content`: the reply's text the frame carries, counted once devices may see it."""
        sequence = self.sequence
        if self.gate.opened:  # the usual case once the user's message is stored: straight to the hub
            await self.deliver(self.user_id, payload, run_id=self.turn_id, seq=sequence,
                               record=self.record(self.session, self.turn_id, sequence, payload))
            if content:
                self.pieces.append(content)
        else:
            await self.relay.replay.append(self.session, self.turn_id, sequence, payload)
            if content:
                self.pieces.append(content)
            await self.gate.send(payload, sequence)
        self.sequence += 1

    def _send_now(self, payload: str, content: str) -> bool:
        """`_send` done before returning, where nothing has to wait; False, nothing sent,
        otherwise: then `_send` it."""
        sequence = self.sequence
        if not self.gate.opened or self.deliver_now(
                self.user_id, payload, run_id=self.turn_id, seq=sequence,
                record=self.record(self.session, self.turn_id, sequence, payload)) is None:
            return False
        self.pieces.append(content)
        self.sequence = sequence + 1
        return True

    async def _emit_end(self, message: dict) -> None:
        """The frame that ends a failed reply: it reaches this instance's devices even when
        the replay cannot record it or other instances cannot be told (the bus is down)."""
        async with self.order:
            message.update({"session_id": self.session_id, "turn_id": self.turn_id, "seq": self.sequence,
                            "response_mode": self.mode, "timestamp": now_ms()})
            payload = dumps_text(message)
            await best_effort(self.relay.replay.append(self.session, self.turn_id, self.sequence, payload),
                              "recording the reply's end")
            await best_effort(self.gate.send(payload, self.sequence), "sending the reply's end")

    # -- the user's message

    def _start_writes(self) -> asyncio.Task:
        if self.writes is None:
            self.writes = asyncio.create_task(store_user_message(self.relay, self.turn, self.gate))
        return self.writes

    async def _writes_finished(self) -> None:
        """The writes start now if no first event let them, and are waited for."""
        task = self._start_writes()
        if not task.done():
            await asyncio.wait([task])
        # Read here: a failed turn ends without asking for the stored message (the success
        # path still raises it through `confirmation`), and asyncio would log it as never read.
        outcome_read(task)

    # -- the end of the turn

    async def _wind_down(self) -> None:
        """Whatever the outcome: the turn leaves the live ones, its set-up, stream and writes end."""
        self.relay.live.pop(self.turn_id, None)  # a stop from now on finds the turn ended
        self._first_event_came()
        if self.set_up is not None:
            await wait_out(self.set_up, cancel=True)
        await self.events.aclose()
        await self._writes_finished()  # cancelled: the row and the message are written, or fail

    async def _failed(self, error: Exception) -> tuple[str, TurnFailed]:
        failure = as_failure(error, self.turn)
        if self.set_up is not None:  # a failure of the set-up itself
            await wait_out(self.set_up)
        await self.events.aclose()
        await self._writes_finished()
        await abort_taps(self.taps)
        await self._fail(failure, "".join(self.pieces))
        return ("duplicate" if failure.error_type == "duplicate_message" else "failed"), failure

    async def _fail(self, failure: TurnFailed, partial: str) -> None:
        """Tell the devices, each step on its own: when the bus is down, what can still reach
        this instance's devices does."""
        turn, relay = self.turn, self.relay
        log.warning("chat turn %s of session %s failed: %s", turn.turn_id, turn.session_id, failure.error)
        await best_effort(self.gate.open(None), "releasing the reply's frames")
        for frame in failure_frames(turn.session_id, turn.turn_id, failure.error, failure.error_type, turn.mode):
            await best_effort(relay.hub.send_to_user(turn.user_id, frame, only=turn.sender or None),
                              "sending the failure")
        # Every device saw stream_start: end the stream for all of them.
        await self._emit_end(stream_end_frame(turn.turn_id, partial, "error"))
        await best_effort(relay.replay.finish(turn.session.key, turn.turn_id), "recording the reply's end")

    async def _cut_short(self) -> DoneEvent:
        """The `done` of a reply that has none: stopped by the person, or cut at the reply's
        limit; what arrived is the reply either way, and devices are told of a cut."""
        text = "".join(self.pieces)
        if self.stopped:
            log.info("turn %s of session %s stopped by its user", self.turn_id, self.session_id)
            return {"type": "done", "text": text, "model": "", "finish_reason": "stopped",
                    "fallbacks": [], "usage": None, "duration_ms": 0.0}
        limit = self.relay.max_reply_chars
        log.warning("turn %s of session %s reached the reply limit of %d characters; cut there",
                    self.turn_id, self.session_id, limit)
        await self.emit(error_frame(f"The reply reached the limit of {limit} characters "
                                    f"and was cut off there.", errorType="reply_too_large"))
        return {"type": "done", "text": text, "model": "", "finish_reason": "length",
                "fallbacks": [], "usage": None, "duration_ms": 0.0}

    async def _store_reply(self, review: list[dict]) -> list:
        """The reply stored, the turn closed, `review` sent; the stored messages' ids."""
        relay, turn_id = self.relay, self.turn_id
        stored_ids = []
        for part in review:
            message = await relay.conversations.add_message(
                self.session_id, self.user_id, stored_role(part["type"]), part["content"],
                part["type"] if part["type"] in STORED_TYPES else "chat",
                metadata={"turn_id": turn_id, **part["metadata"]})
            stored_ids.append(message["id"])
        await best_effort(relay.context.bus.set(activity_key(self.session), str(now_ms()), ttl=ACTIVITY_TTL),
                          "recording the session's activity")
        # Closed before stream_end: the device that sees it may send its next message at once,
        # and this write would compete with that turn's start.
        await relay.records.finish(turn_id, "done")
        await self.emit(review_frame(turn_id, review))
        return stored_ids

    async def _finish(self, user_message: dict) -> tuple[str, TurnReply | TurnFailed]:
        """The reply stored and the stream ended for every device."""
        final = self.final if self.final is not None else await self._cut_short()
        reply = str(final.get("text") if final.get("text") is not None else "".join(self.pieces))
        review = review_reply(reply)
        try:
            stored_ids = await self._store_reply(review)
        except Exception as error:  # the database or the bus went away as the reply ended
            failure = as_failure(error, self.turn)
            await abort_taps(self.taps)
            await self._fail(failure, reply)
            return "failed", failure
        except asyncio.CancelledError:
            await abort_taps(self.taps)
            raise
        done = TurnReply(reply, final.get("model") or "", final.get("finish_reason") or "stop", stored_ids)
        try:
            tapped = await finish_taps(self.taps, reply) if self.taps else {}
        except asyncio.CancelledError:
            await abort_taps(self.taps)
            raise
        await self._emit_end(stream_end_frame(self.turn_id, reply, done.finish_reason, model=done.model,
                                              stored_message_ids=stored_ids, user_message_id=user_message["id"],
                                              **tapped))
        await best_effort(self.relay.replay.finish(self.session, self.turn_id), "recording the reply's end")
        return "done", done
