"""The chat channel: `GET /ws/chat`, the per-session turn machine that relays the AI core's
streamed replies to every device of the user on every gateway instance, reply review, resumable
replies, and the `CHAT_TURNS` and `PRESENCE` contracts (contract.py).

See docs/chat.md."""
from __future__ import annotations

from gateway.plugins import Plugin, Registrar

from . import person_data
from .channel import CHAT_CHANNEL, register_frames, routes
from .chat_channel import ChatChannel
from .contract import CHAT_TURNS, PRESENCE, REPLY_TAPS
from .frame_schemas import register_frame_schemas
from .review import review_reply
from .settings import ChatSettings

__all__ = ["ChatChannel", "ChatPlugin", "plugin", "review_reply"]


class ChatPlugin(Plugin):
    name = "chat"
    depends = ("auth_tokens", "sessions", "ai_core_client")
    # Attachments by file_id need the FILES contract; without files they are refused.
    optional_depends = ("files",)
    uses = ("database",)
    description = "The WebSocket chat channel, per-session turns and reply review"
    settings_class = ChatSettings

    def setup(self, registrar: Registrar[ChatSettings]) -> None:
        chat = ChatChannel(registrar.context, registrar.settings)
        registrar.migrations("plugins.chat")
        registrar.app_state(CHAT_CHANNEL, chat)
        registrar.routes(routes)
        register_frames(registrar, chat)
        register_frame_schemas(registrar)
        registrar.lifespan(chat.lifespan)
        registrar.job("housekeeping", chat.housekeeping)
        registrar.provide(CHAT_TURNS, chat)
        registrar.provide(PRESENCE, chat.presence)
        registrar.provide(REPLY_TAPS, chat.reply_taps)
        person_data.register(registrar)


plugin = ChatPlugin()
