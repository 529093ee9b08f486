"""Sessions and their stored messages: the `CONVERSATIONS` contract other plugins write
through (the chat channel, webhooks), the Sessions endpoints, message search and export.

See docs/sessions.md."""
from __future__ import annotations

from gateway.plugins import Plugin, Registrar

from . import person_data
from .api import SESSION_UPDATED, routes
from .contract import CONVERSATIONS
from .schemas import SessionUpdatedFrame
from .store import Conversations, generate_session_id, session_not_found
from .title_text import DEFAULT_TITLE, DEFAULT_TITLES, default_title

__all__ = ["Conversations", "DEFAULT_TITLE", "DEFAULT_TITLES", "SessionsPlugin", "default_title", "generate_session_id", "plugin",
           "session_not_found"]


class SessionsPlugin(Plugin):
    name = "sessions"
    depends = ("auth_tokens",)
    uses = ("database",)
    description = "Sessions, stored messages, message search and export"

    def setup(self, registrar: Registrar) -> None:
        registrar.migrations("plugins.sessions")
        conversations = Conversations(registrar.context)
        registrar.provide(CONVERSATIONS, conversations)
        person_data.register(registrar, conversations)
        registrar.routes(routes)
        registrar.ws_server_message(SESSION_UPDATED, SessionUpdatedFrame,
                                    "A session of the user was renamed (by them on any device, or given a title "
                                    "by the assistant after its first exchange): lists and headers show `title`.")


plugin = SessionsPlugin()
