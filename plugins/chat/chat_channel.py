"""`ChatChannel`: everything one app's chat channel holds, and the one way other plugins hand
text in as a turn (the `CHAT_TURNS` contract): submitting turns, stopping them on any
instance, posting the assistant's messages, and the housekeeping of turns and presence. The
WebSocket endpoint (channel.py) reaches it under `CHAT_CHANNEL`; the plugin (`__init__.py`)
builds it."""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, AsyncIterator, Callable, cast

from gateway.context import Context
from plugins.ai_core.contract import AI_CORE, message_too_long
from plugins.sessions.contract import CONVERSATIONS, Conversations

from . import store
from .admission import Admission, Turn
from .contract import TurnReply, chat_refused, may_chat
from .frames import client_info, echo_frame, history_changed_frame, multi_message_frame
from .presence import SESSION_KEY, Presence
from .relay import Relay
from .replay import Replay
from .taps import ReplyTapRegistry
from .turns import TurnMachine
from .waiters import TurnWaiters
from .settings import ChatSettings

if TYPE_CHECKING:
    from gateway.connection import Connection

log = logging.getLogger("plugins.chat")

# Where a `stop` is asked of every instance (the one running the turn stops it).
STOP_CHANNEL = "chat.stop"


class ChatChannel:
    """Everything one app's chat channel holds; settings come from `[plugins.chat]`. The turn
    machine and the replay buffer stand on the bus, so they are built when the service starts
    (`lifespan`); nothing uses them before (no connection, no turn)."""

    turns: TurnMachine
    replay: Replay

    def __init__(self, context: Context, settings: ChatSettings):
        self.context = context
        self.settings = settings
        self.allowed_origins: list[str] = settings.allowed_origins
        self.max_frame_bytes: int = settings.max_frame_bytes
        self.max_pending: int = settings.max_pending
        self.heartbeat: float = settings.heartbeat
        # permessage-deflate when the client offers it (browsers do): fewer bytes per frame, but a
        # compressor per connection (about 100 KB once a frame was sent) and CPU for every frame.
        self.compress: bool = settings.compress
        self.max_message_chars: int = settings.max_message_chars
        self.sweep_interval: float = settings.sweep_interval
        self.presence = Presence(context)
        self.reply_taps = ReplyTapRegistry()

    @property
    def conversations(self) -> Conversations:
        return self.context.contracts.require(CONVERSATIONS)

    async def submit_turn(self, user_id: str, session_id: str, text: str, mode: str = "text",
                          attachments: list[dict] | None = None, exclude_connection_id: str | None = None,
                          client_msg_id: str | None = None) -> dict:
        """The one way other plugins (voice) hand text in as a turn; queued like a `message`.
        `exclude_connection_id` is the device the text came from: it gets no echo, and it alone
        gets `queued` and errors, and its echo names it (`client_info`)."""
        self._check_may_chat(user_id)
        self.check_length(text or "")
        sender = next((connection for connection in self.context.hub.connections(user_id)
                       if connection.id == exclude_connection_id), None) if exclude_connection_id else None
        client = client_info(sender.client_id, sender.device_name, sender.user_agent) if sender is not None else None
        return await self.turns.submit(Turn(session_id=session_id, user_id=user_id, text=text or "", mode=mode,
                                            attachments=list(attachments or []), sender=exclude_connection_id,
                                            client_msg_id=client_msg_id, client=client))

    def _check_may_chat(self, user_id: str) -> None:
        """The rule the chat channel's handshake asks, asked again for every turn another plugin
        hands in (voice, automation, the bridge): no door of theirs can widen it."""
        if not may_chat(self.context.config, user_id):
            raise chat_refused()

    def session_of(self, connection: "Connection") -> str:
        return cast(str, connection.data[SESSION_KEY])

    async def submit_and_wait(self, user_id: str, session_id: str, text: str, mode: str = "text", *,
                              metadata: dict | None = None, timeout: float | None = None,
                              on_piece: Callable[[str], None] | None = None, external: bool = False) -> TurnReply:
        if not external:
            self._check_may_chat(user_id)
        self.check_length(text or "")
        turn = Turn(session_id=session_id, user_id=user_id, text=text or "", mode=mode, metadata=metadata)
        return await self.turns.submit_and_wait(turn, timeout, on_piece)

    def check_length(self, text: str) -> None:
        """Every way in (a device, voice, webhooks, the bridge, automation) has the same bound."""
        if len(text) > self.max_message_chars:
            raise message_too_long(len(text), self.max_message_chars, "[plugins.chat] max_message_chars")

    async def request_stop(self, user_id: str, session_id: str, turn_id: str | None) -> None:
        """Stop the user's running turn of the session: here when this instance runs it, else
        asked of every instance over the bus. A turn that ended, or is not the user's, is left."""
        if self.turns.stop_turn(user_id, session_id, turn_id) or not self.context.bus.shared:
            return
        await self.context.bus.publish(STOP_CHANNEL, {"user_id": user_id, "session_id": session_id,
                                                      "turn_id": turn_id})

    async def _on_stop(self, message: dict) -> None:
        if isinstance(message, dict) and isinstance(message.get("user_id"), str) \
                and isinstance(message.get("session_id"), str):
            turn_id = message.get("turn_id")
            self.turns.stop_turn(message["user_id"], message["session_id"],
                                 turn_id if isinstance(turn_id, str) else None)

    async def truncate(self, user_id: str, session_id: str, from_message_id: int, reason: str) -> None:
        """Delete the session's messages from `from_message_id` on, and tell every device of
        the user (`history_changed`) so pages drop them."""
        await self.conversations.delete_messages_from(user_id, session_id, from_message_id)
        await self.context.hub.send_to_user(user_id, history_changed_frame(session_id, from_message_id, reason))

    async def post_message(self, user_id: str, session_id: str, text: str, *, metadata: dict | None = None,
                           title: str | None = None) -> dict:
        conversations = self.conversations
        await conversations.ensure_session(user_id, session_id, title=title)
        stored = await conversations.add_message(session_id, user_id, "assistant", text, metadata=metadata)
        await self.context.hub.send_to_user(user_id, {**echo_frame(session_id, stored, text, [], None),
                                                      "role": "assistant"})
        return stored

    async def post_messages(self, user_id: str, session_id: str, texts: list[str], *, metadata: dict | None = None,
                            title: str | None = None) -> list[dict]:
        if len(texts) < 2:
            return [await self.post_message(user_id, session_id, text, metadata=metadata, title=title)
                    for text in texts]
        conversations = self.conversations
        await conversations.ensure_session(user_id, session_id, title=title)
        stored: list[dict] = []
        try:
            for text in texts:
                stored.append(await conversations.add_message(session_id, user_id, "assistant", text,
                                                              metadata=metadata))
        finally:  # the devices see what was stored, also when a later message could not be
            if len(stored) == 1:
                await self.context.hub.send_to_user(user_id, {**echo_frame(session_id, stored[0], texts[0], [], None),
                                                              "role": "assistant"})
            elif stored:
                await self.context.hub.send_to_user(user_id, multi_message_frame(session_id, stored))
        return stored

    async def lifespan(self, context: Context) -> AsyncIterator[None]:
        settings = self.settings
        self.replay = Replay(context.bus, settings.replay_ttl, settings.replay_max_frames)
        admission = Admission(context, settings.lock_ttl)
        relay = Relay(context, admission=admission, replay=self.replay,
                      ai=context.contracts.require(AI_CORE),
                      history_limit=settings.history_limit, store_after=settings.store_after,
                      max_reply_chars=settings.max_reply_chars, taps=self.reply_taps)
        waiters = TurnWaiters(context.bus)
        self.turns = TurnMachine(context, admission=admission, relay=relay, waiters=waiters,
                                 attachment_url_ttl=settings.attachment_url_ttl,
                                 stop_timeout=settings.stop_timeout,
                                 max_queued_turns=settings.max_queued_turns,
                                 max_messages_per_minute=settings.max_messages_per_minute)
        await waiters.start()
        # One instance alone stops its turns itself (request_stop): only a shared bus is listened to.
        stops = await context.bus.subscribe(STOP_CHANNEL, self._on_stop) if context.bus.shared else None
        try:
            yield
        finally:
            if stops is not None:
                await stops.close()
            await self.turns.stop()
            await waiters.stop()

    async def housekeeping(self, context: Context) -> None:
        """Renew live presence, pick up queues whose instance died, forget old finished turns (a
        job: it starts after the lifespan set the turn machine up, and stops before it ends)."""
        rounds = 0
        while True:
            await asyncio.sleep(self.sweep_interval)
            rounds += 1
            try:
                await self.turns.sweep()
                if rounds * self.sweep_interval >= 15:
                    rounds = 0
                    await self.presence.renew()
                    await store.purge_finished(self.context.db)
            except Exception:
                log.exception("chat housekeeping failed")
