"""The chat channel: `GET /ws/chat`, the per-session turn machine that relays the AI core's
streamed replies to every device of the user on every gateway instance, reply review, resumable
replies, and the `chat.submit_turn` and `presence` services.

See docs/chat.md."""
from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from typing import AsyncIterator

from aiohttp import web

from gateway.context import Context
from gateway.hub import DEFAULT_MAX_PENDING
from gateway.plugins import Plugin, Registrar

from . import store
from .channel import handle_connect, register_frames
from .delivery import Delivery, create_replay
from .presence import Presence
from .review import review_reply
from .turns import TurnMachine

__all__ = ["ChatPlugin", "ChatService", "plugin", "review_reply"]

log = logging.getLogger("plugins.chat")

DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024


class ChatService:
    """Everything one app's chat channel holds; settings come from `[plugins.chat]`."""

    def __init__(self, context: Context, settings: dict):
        self.context = context
        self.allow_users = bool(settings.get("allow_users", False))
        self.allowed_origins = [str(origin) for origin in settings.get("allowed_origins") or []]
        self.max_frame_bytes = int(settings.get("max_frame_bytes") or DEFAULT_MAX_FRAME_BYTES)
        self.max_pending = int(settings.get("max_pending") or DEFAULT_MAX_PENDING)
        self.heartbeat = float(settings.get("heartbeat") or 30)
        # permessage-deflate when the client offers it (browsers do): fewer bytes per frame, but a
        # compressor per connection (about 100 KB once a frame was sent) and CPU for every frame.
        self.compress = bool(settings.get("compress", True))
        self.max_message_chars = int(settings.get("max_message_chars") or 32000)
        self.sweep_interval = float(settings.get("sweep_interval") or 5)
        self.replay_ttl = float(settings.get("replay_ttl") or 120)
        self.replay_max_frames = int(settings.get("replay_max_frames") or 20000)
        self.turns = TurnMachine(context, settings)
        self.delivery = Delivery(context)
        self.presence = Presence(context)

    @property
    def conversations(self):
        return self.context.services.require("conversations")

    async def submit_turn(self, user_id: str, session_id: str, text: str, mode: str = "text",
                          attachments: list[dict] | None = None, exclude_connection_id: str | None = None) -> dict:
        """The one way other plugins (voice) hand text in as a turn; queued like a `message`.
        `exclude_connection_id` is the device the text came from: it gets no echo, and it alone
        gets `queued` and errors."""
        return await self.turns.submit(user_id=user_id, session_id=session_id, text=text, mode=mode,
                                       attachments=attachments, sender=exclude_connection_id)

    async def lifespan(self, context: Context) -> AsyncIterator[None]:
        self.turns.delivery = self.delivery
        self.turns.replay = create_replay(context, self.replay_ttl, self.replay_max_frames)
        await self.delivery.start()
        housekeeping = asyncio.create_task(self._housekeeping(), name="chat-housekeeping")
        try:
            yield
        finally:
            housekeeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await housekeeping
            await self.turns.stop()
            await self.delivery.stop()

    async def _housekeeping(self) -> None:
        """Renew live presence, pick up queues whose instance died, forget old finished turns."""
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


class ChatPlugin(Plugin):
    name = "chat"
    depends = ("auth_tokens", "sessions")
    uses = ("database",)
    description = "The WebSocket chat channel, per-session turns and reply review"

    def setup(self, registrar: Registrar) -> None:
        chat = ChatService(registrar.context, registrar.settings)
        registrar.migrations("plugins.chat")
        routes = web.RouteTableDef()

        # A partial, not a wrapping coroutine: its frame would stay suspended for as long as
        # each connection lives (bench/chat measures memory per idle connection).
        routes.get("/ws/chat", name="chat.ws", allow_head=False)(functools.partial(handle_connect, chat=chat))

        registrar.routes(routes)
        register_frames(registrar, chat)
        registrar.lifespan(chat.lifespan)
        registrar.provide("chat.submit_turn", chat.submit_turn)
        registrar.provide("presence", chat.presence)


plugin = ChatPlugin()
