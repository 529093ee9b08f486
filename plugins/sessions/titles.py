"""A better title for a new conversation, made by a language model (the `session_titles` plugin
of the ai-core service; docs/sessions.md, "Titles from the first message").

A session is titled at once from its first message (title_text.py, `title_from`). After the first
exchange of a session (a chat turn with no history before it), a listener of the AI core's
`TURN_FINISHED` asks a model of the routing purpose `title` (`MODELS`; without a route or model
tagged `title`, the chat models) for a short title, and sets it through the gateway's sessions
API with the service credential, over the core's peer transport (gateway/peers.py) — only while the session still has the title made from its
first message (`if_title`), so a name the person gave meanwhile stays. The gateway then tells the
person's devices (`session_updated`). Without a model nothing is asked or changed: the offline
agent does not title. It runs after the answer went out and never delays or fails a turn."""
from __future__ import annotations

import asyncio
import logging
import re
from urllib.parse import quote

from gateway.context import Context
from gateway.peers import PeerClient, PeerFailed, PeerTimeout
from gateway.plugins import Plugin, Registrar
from plugins.ai_core.contract import MODELS, TURN_FINISHED, FinishedTurn, Models

from .title_text import TITLE_CHARS, title_from

log = logging.getLogger("plugins.sessions.titles")

PURPOSE = "title"
LISTENER = "session_titles"
MAX_TOKENS = 60               # a title is a few words; room for a model that thinks aloud first
CONCURRENCY = 4               # title requests at once per ai-core instance; a burst queues
EXCHANGE_CHARS = 1000         # what the model reads of the person's words, and of the reply
GATEWAY_TIMEOUT = 15.0         # seconds for the gateway to set the title

SYSTEM_PROMPT = """You name conversations for a chat assistant's list of conversations.
Give the conversation you are shown a short title of 3 to 6 words that names its subject,
in the language the user wrote in (Chinese: at most 12 characters).
Answer with the title only: no quotes, no "Title:", no full stop at the end."""

_THINKING = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_LABEL = re.compile(r"^\s*(?:\*\*)?(?:title|标题|題名|标题是)\s*(?:\*\*)?\s*[:：]\s*", re.IGNORECASE)
_QUOTES = "\"'`“”‘’«»「」『』《》*_#"
_END_PUNCTUATION = " .。!！?？,，;；:：、…"


def clean_title(answer: str | None) -> str | None:
    """The title in a model's answer: its first line of words without a label ("Title:"),
    quotes or closing punctuation, at most TITLE_CHARS characters; None when nothing is left."""
    text = _THINKING.sub("", answer or "")
    line = next((" ".join(line.split()) for line in text.splitlines() if line.strip()), "")
    line = _LABEL.sub("", line).strip().strip(_QUOTES).strip()
    line = line.rstrip(_END_PUNCTUATION).strip(_QUOTES).strip()
    if len(line) > TITLE_CHARS:
        cut = line[:TITLE_CHARS]
        space = cut.rfind(" ")
        line = (cut[:space] if space > TITLE_CHARS // 2 else cut).rstrip(_END_PUNCTUATION)
    return line or None


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit].rstrip() + "…"


def title_messages(turn: FinishedTurn) -> list[dict]:
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"user: {_clip(turn.user_text, EXCHANGE_CHARS)}\n"
                                        f"assistant: {_clip(turn.reply_text, EXCHANGE_CHARS)}\n\nThe title:"}]


class SessionTitles:
    """The TURN_FINISHED listener."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.gateway = PeerClient(context, "gateway", service="gateway",
                                  timeout=PeerTimeout.from_config(context.config, total=GATEWAY_TIMEOUT))
        self.running = asyncio.Semaphore(CONCURRENCY)

    async def __call__(self, turn: FinishedTurn) -> None:
        await self.retitle(turn)

    async def retitle(self, turn: FinishedTurn) -> str | None:
        """The title set on the session, or None when none was (not a first exchange, no model,
        no usable answer, or the session's title changed meanwhile)."""
        first_title = title_from(turn.user_text)
        if not turn.user_id or not turn.session_id or turn.history or first_title is None:
            return None
        models: Models | None = self.context.contracts.get(MODELS)
        if models is None or not self.context.peer_url("gateway"):
            return None
        async with self.running:
            title = clean_title(await models.complete(PURPOSE, title_messages(turn), max_tokens=MAX_TOKENS,
                                                      temperature=0.2))
        if title is None or title == first_title:
            return None
        return title if await self.set_title(turn, title, first_title) else None

    async def set_title(self, turn: FinishedTurn, title: str, expected: str) -> bool:
        assert turn.session_id is not None
        try:
            await self.gateway.call("PATCH", f"/api/v1/sessions/{quote(turn.session_id, safe='')}", quoted=True,
                                    params={"user_id": turn.user_id}, json_body={"title": title, "if_title": expected})
            return True
        except PeerFailed as error:
            if error.error_type in ("title_changed", "session_not_found"):
                log.info("title of session %s not set: %s", turn.session_id, error.error_type)
            else:
                log.warning("title of session %s not set: %s (%s)", turn.session_id, error.error, error.error_type)
            return False


class SessionTitlesPlugin(Plugin):
    name = "session_titles"
    depends = ("ai_core",)
    description = "a model's title for a conversation after its first exchange (ai-core service)"

    def setup(self, registrar: Registrar) -> None:
        registrar.context.contracts.require(TURN_FINISHED).add(LISTENER, SessionTitles(registrar.context))


plugin = SessionTitlesPlugin()
