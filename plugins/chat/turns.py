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
import time
from typing import TYPE_CHECKING, AsyncIterator

import aiohttp

from gateway.sse import sse_data

from . import store
from .attachments import resolve_attachments
from .delivery import Delivery, ReplayBuffer
from .review import review_reply, stored_role

if TYPE_CHECKING:
    from gateway.context import Context

log = logging.getLogger("plugins.chat.turns")

STORED_TYPES = {"chat", "action", "markdown", "code"}
LIVE_SESSIONS = "chat:live-sessions"
LIVE_TTL = 60.0


def now_ms() -> int:
    return int(time.time() * 1000)


def lock_key(session_id: str) -> str:
    return f"chat:turn-lock:{session_id}"


def activity_key(session_id: str) -> str:
    return f"chat:activity:{session_id}"


class TurnFailed(Exception):
    def __init__(self, error: str, error_type: str = "ai_core_failed"):
        super().__init__(error)
        self.error, self.error_type = error, error_type


class AiCoreClient:
    """The AI core's streaming chat call, read as typed SSE events."""

    def __init__(self, context: "Context", read_timeout: float):
        self.context = context
        self.timeout = aiohttp.ClientTimeout(total=None, connect=10, sock_read=read_timeout)

    @property
    def url(self) -> str:
        return self.context.peer_url("ai_core") + "/api/v1/chat/stream"

    async def stream(self, body: dict) -> AsyncIterator[dict]:
        headers = {**self.context.service_headers(), "Accept": "text/event-stream"}
        try:
            async with self.context.http.post(self.url, json=body, headers=headers, timeout=self.timeout) as response:
                if response.status != 200:
                    text = (await response.text())[:500]
                    try:
                        text = json.loads(text).get("error") or text
                    except (ValueError, AttributeError):
                        pass
                    raise TurnFailed(f"the AI core answered {response.status}: {text}")
                async for data in sse_data(response.content, errors="replace"):
                    try:
                        event = json.loads(data)
                    except ValueError:
                        raise TurnFailed("the AI core sent an unreadable event") from None
                    if isinstance(event, dict):
                        yield event
        except (aiohttp.ClientError, asyncio.TimeoutError) as error:
            raise TurnFailed(f"the AI core cannot be reached or stopped answering ({error.__class__.__name__}"
                             f"{': ' + str(error) if str(error) else ''})", "ai_core_unreachable") from None


class TurnMachine:
    def __init__(self, context: "Context", settings: dict):
        self.context = context
        self.lock_ttl = float(settings.get("lock_ttl") or 30)
        self.history_limit = int(settings.get("history_limit") or 20)
        self.attachment_url_ttl = int(settings.get("attachment_url_ttl") or 900)
        self.stop_timeout = float(settings.get("stop_timeout") or 10)
        self.ai = AiCoreClient(context, float(settings.get("ai_read_timeout") or 120))
        self.delivery: Delivery | None = None
        self.replay: ReplayBuffer | None = None
        self._draining: dict[str, asyncio.Task] = {}
        self._stopping = False

    @property
    def owner(self) -> str:
        return self.context.hub.instance_id

    @property
    def conversations(self):
        return self.context.services.require("conversations")

    # ------------------------------------------------------------------ submitting

    async def submit(self, *, user_id: str, session_id: str, text: str, mode: str = "text",
                     attachments: list[dict] | None = None, client_msg_id: str | None = None,
                     sender: str | None = None, session_known: bool = False) -> dict:
        """Queue one turn; start it when the session is idle. Raises ApiError for a bad request.
        `session_known`: the caller already ensured this user's session (the WebSocket did at connect)."""
        if not session_known:
            await self.conversations.ensure_session(user_id, session_id)
        resolved = await resolve_attachments(self.context, user_id, attachments or [], self.attachment_url_ttl)
        turn_id = await store.enqueue(self.context.db, session_id=session_id, user_id=user_id, text=text or "",
                                      mode=mode, attachments=resolved, client_msg_id=client_msg_id,
                                      sender_connection=sender)
        if turn_id is None:
            return {"status": "duplicate", "session_id": session_id, "client_msg_id": client_msg_id}
        await self.context.bus.set(activity_key(session_id), str(now_ms()), ttl=86400)
        if await self.kick(session_id):
            return {"status": "started", "turn_id": str(turn_id), "session_id": session_id}
        position = await store.queue_length(self.context.db, session_id)
        if sender is not None and self.delivery is not None:
            await self.delivery.send(user_id, {
                "type": "queued", "session_id": session_id, "client_msg_id": client_msg_id,
                "turn_id": str(turn_id), "position": position, "msg_type": "system_info",
                "timestamp": now_ms()}, only=sender)
        return {"status": "queued", "turn_id": str(turn_id), "session_id": session_id, "position": position}

    async def kick(self, session_id: str) -> bool:
        """Take the session's turn lock and drain its queue; False when someone already is."""
        if self._stopping or session_id in self._draining:
            return False
        if not await self.context.bus.set(lock_key(session_id), self.owner, ttl=self.lock_ttl, only_if_absent=True):
            return False
        self._draining[session_id] = asyncio.create_task(self._drain(session_id), name=f"chat-turns-{session_id}")
        return True

    # ------------------------------------------------------------------ draining

    async def _drain(self, session_id: str) -> None:
        renewer = asyncio.create_task(self._renew(session_id))
        try:
            first = True
            while not self._stopping:
                row = await store.claim_next(self.context.db, session_id, abandon_running=first)
                first = False
                if row is None:
                    break
                status = "failed"
                try:
                    status = await self.run_turn(row)
                except asyncio.CancelledError:
                    status = "abandoned"
                    raise
                except Exception:
                    log.exception("chat turn %s of session %s failed", row["id"], session_id)
                finally:
                    with contextlib.suppress(Exception):
                        await asyncio.shield(store.finish(self.context.db, row["id"], status))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("draining the turn queue of session %s failed", session_id)
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
            with contextlib.suppress(Exception):
                await asyncio.shield(self._release(session_id))
            self._draining.pop(session_id, None)
        # A message queued while the lock was being released would otherwise wait for the sweeper.
        if not self._stopping and await store.queue_length(self.context.db, session_id):
            await self.kick(session_id)

    async def _renew(self, session_id: str) -> None:
        bus = self.context.bus
        while True:
            await bus.mark(LIVE_SESSIONS, session_id, LIVE_TTL)
            await asyncio.sleep(self.lock_ttl / 3)
            try:
                if await bus.get(lock_key(session_id)) == self.owner:
                    await bus.set(lock_key(session_id), self.owner, ttl=self.lock_ttl)
                else:
                    log.warning("the turn lock of session %s was lost (expired or taken)", session_id)
            except Exception:
                log.exception("renewing the turn lock of session %s failed", session_id)

    async def _release(self, session_id: str) -> None:
        if await self.context.bus.get(lock_key(session_id)) == self.owner:
            await self.context.bus.delete(lock_key(session_id))

    async def sweep(self) -> None:
        """Drain queues whose lock holder went away."""
        for session_id in await store.sessions_waiting(self.context.db):
            await self.kick(session_id)

    async def stop(self) -> None:
        """Let running turns finish for a while, then cancel them (their locks are released)."""
        self._stopping = True
        tasks = list(self._draining.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self.stop_timeout)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    def running(self, session_id: str) -> bool:
        return session_id in self._draining

    # ------------------------------------------------------------------ one turn

    async def run_turn(self, row: dict) -> str:
        assert self.delivery is not None and self.replay is not None
        session_id, user_id = row["session_id"], row["user_id"]
        sender = row["sender_connection"]
        turn_id = str(row["id"])
        text = row["text"]
        attachments = row["attachments"] if isinstance(row["attachments"], list) else json.loads(row["attachments"])
        conversations = self.conversations
        history = await conversations.recent_history(session_id, self.history_limit)
        metadata = {"mode": row["mode"]}
        if attachments:
            metadata["attachments"] = [{k: v for k, v in a.items() if k != "url"} for a in attachments]
        body = {"user_id": user_id, "session_id": session_id, "text": text, "history": history,
                "mode": row["mode"], "purpose": "chat",
                "attachments": [{"type": "image", "url": a["url"]} for a in attachments]}
        # The AI core is asked first; the user's message is stored and echoed while it thinks,
        # so those round trips are not on the way to the first token.
        events = self.ai.stream(body)
        first_event = asyncio.create_task(_first(events))
        try:
            stored_user = await conversations.add_message(session_id, user_id, "user", text, "chat",
                                                          metadata=metadata, client_msg_id=row["client_msg_id"])
        except BaseException:
            await _abandon(first_event, events)
            raise
        if stored_user.get("duplicate"):
            await _abandon(first_event, events)
            return "duplicate"
        await self.replay.begin(session_id, turn_id)
        await self.delivery.send(user_id, {
            "type": "response", "role": "user", "msg_type": "chat", "session_id": session_id,
            "message_id": str(stored_user["id"]), "content": text, "text": text,
            "attachments": metadata.get("attachments", []), "client_msg_id": row["client_msg_id"],
            "timestamp": stored_user.get("created_at") or now_ms()}, exclude=sender)

        sequence = 0
        message_id = f"reply_{turn_id}"

        async def emit(message: dict) -> None:
            nonlocal sequence
            message.update({"session_id": session_id, "turn_id": turn_id, "seq": sequence,
                            "timestamp": now_ms()})
            payload = json.dumps(message, ensure_ascii=False)
            await self.replay.append(session_id, turn_id, sequence, payload)
            await self.delivery.send_payload(user_id, payload, turn_id=turn_id, seq=sequence)
            sequence += 1

        await emit({"type": "stream_start", "role": "assistant", "msg_type": "chat", "message_id": message_id})
        pieces: list[str] = []
        final: dict | None = None
        relay = _then(first_event, events)
        try:
            async for event in relay:
                kind = event.get("type")
                if kind == "delta":
                    content = str(event.get("content") or "")
                    if content:
                        pieces.append(content)
                        await emit({"type": "stream_chunk", "role": "assistant", "msg_type": "chat",
                                    "message_id": message_id, "content": content})
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
            if final is None:
                raise TurnFailed("the AI core ended the stream before the reply was complete")
        except TurnFailed as failure:
            await self._fail(user_id, session_id, sender, turn_id, failure, "".join(pieces), emit)
            return "failed"
        finally:
            await relay.aclose()
            await _abandon(first_event, events)

        reply = str(final.get("text") if final.get("text") is not None else "".join(pieces))
        review = review_reply(reply)
        stored_ids = []
        for part in review:
            stored = await conversations.add_message(
                session_id, user_id, stored_role(part["type"]), part["content"],
                part["type"] if part["type"] in STORED_TYPES else "chat",
                metadata={"turn_id": turn_id, **part["metadata"]})
            stored_ids.append(stored["id"])
        await emit({"type": "review", "role": "assistant", "msg_type": "chat", "message_id": message_id,
                    "review_messages": review})
        await emit({"type": "stream_end", "role": "assistant", "msg_type": "chat", "message_id": message_id,
                    "text": reply, "content": reply, "model": final.get("model") or "",
                    "finish_reason": final.get("finish_reason") or "stop", "stored_message_ids": stored_ids})
        await self.replay.finish(session_id, turn_id)
        await self.context.bus.set(activity_key(session_id), str(now_ms()), ttl=86400)
        return "done"

    async def _fail(self, user_id: str, session_id: str, sender: str | None, turn_id: str,
                    failure: TurnFailed, partial: str, emit) -> None:
        log.warning("chat turn %s of session %s failed: %s", turn_id, session_id, failure.error)
        target = {"only": sender} if sender else {}
        await self.delivery.send(user_id, {
            "type": "error", "error": failure.error, "errorType": failure.error_type, "msg_type": "system_info",
            "session_id": session_id, "turn_id": turn_id, "timestamp": now_ms()}, **target)
        await self.delivery.send(user_id, {
            "type": "system_info", "role": "system", "msg_type": "system_info", "session_id": session_id,
            "turn_id": turn_id, "timestamp": now_ms(),
            "system_info": {"level": "error", "action": "retry",
                            "message": "The assistant could not answer this message. Please try again."}},
            **target)
        # Every device saw stream_start: end the stream for all of them.
        await emit({"type": "stream_end", "role": "assistant", "msg_type": "chat", "message_id": f"reply_{turn_id}",
                    "text": partial, "content": partial, "finish_reason": "error"})
        await self.replay.finish(session_id, turn_id)


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
