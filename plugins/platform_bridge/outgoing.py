"""The generic webhook platform: replies posted to the bot's `outgoing_url` through the guarded
fetcher, signed with HMAC-SHA256 of the raw body, and incoming messages, signed with
HMAC-SHA256 of their timestamp and raw body (so an old one cannot be sent again). The webhook's
replier posts a whole answer."""
from __future__ import annotations

import hashlib
import hmac
import json

from gateway.context import Context
from gateway.fetch import FetchError, GuardedFetcher

from .replies import CollectedReply, DeliveryFailed, Streamer

SIGNATURE_HEADER = "X-Bridge-Signature"
TIMESTAMP_HEADER = "X-Bridge-Timestamp"


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def signed_content(timestamp: str, body: bytes) -> bytes:
    """What an incoming message's signature covers: `<timestamp>.<raw body>`."""
    return timestamp.encode("utf-8") + b"." + body


def signature_matches(secret: str, body: bytes, given: str) -> bool:
    return bool(secret) and hmac.compare_digest(sign(secret, body).encode("ascii"), given.strip().encode("utf-8"))


async def post_reply(fetcher: GuardedFetcher, url: str, secret: str, payload: dict) -> str | None:
    """Post one reply; None when the receiver took it, else why not."""
    body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    try:
        result = await fetcher.fetch(url, method="POST", data=body, headers={
            "Content-Type": "application/json", SIGNATURE_HEADER: sign(secret, body)})
    except FetchError as error:
        return f"the outgoing URL could not be reached: {error}"
    return None if result.ok else f"the outgoing URL answered {result.status}"


class WebhookReplier:
    """Posts the whole answer, signed, to the bot's outgoing URL."""

    def __init__(self, context: Context, bot: dict, chat_id: str, platform_user_id: str, reply_to: str | None):
        self.context, self.bot, self.chat_id = context, bot, chat_id
        self.platform_user_id, self.reply_to = platform_user_id, reply_to

    async def say(self, text: str) -> None:
        fetcher = GuardedFetcher.for_context(self.context)
        payload = {"bot_id": self.bot["id"], "chat_id": self.chat_id, "user_id": self.platform_user_id,
                   "text": text, "reply_to": self.reply_to}
        problem = await post_reply(fetcher, str(self.bot["config"]["outgoing_url"]),
                                   str(self.bot["config"]["signing_secret"]), payload)
        if problem:
            raise DeliveryFailed(problem)

    def streamer(self) -> Streamer:
        return CollectedReply(self.say)
