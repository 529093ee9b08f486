"""Discord through a bot's own interactions endpoint: Discord signs every interaction with the
application's Ed25519 key; a command is answered deferred (type 5) at once, and the answer is
edited in through the interaction's webhook, `PATCH <api>/webhooks/<application_id>/<token>/
messages/@original`, whatever the model's speed (Discord waits 3 seconds for the first answer)."""
from __future__ import annotations

import asyncio
import time

import aiohttp
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .replies import CollectedReply, DeliveryFailed

PING, APPLICATION_COMMAND = 1, 2
PONG, DEFERRED_CHANNEL_MESSAGE = 1, 5
MAX_CONTENT = 2000
SIGNATURE_MAX_AGE = 300  # seconds: a captured interaction replayed later is refused


def signature_problem(public_key_hex: str, signature: str, timestamp: str, body: bytes) -> str | None:
    """Why the interaction's signature is not Discord's (None when it is)."""
    try:
        key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_key_hex))
        key.verify(bytes.fromhex(signature), timestamp.encode("utf-8") + body)
        fresh = abs(time.time() - int(timestamp)) <= SIGNATURE_MAX_AGE
    except (ValueError, InvalidSignature):
        return "invalid_signature"
    return None if fresh else "stale_signature"


def command_text(interaction: dict) -> str:
    data = interaction.get("data")
    options = data.get("options") if isinstance(data, dict) else None
    return next((str(option.get("value")) for option in (options if isinstance(options, list) else [])
                 if isinstance(option, dict) and option.get("name") == "message" and option.get("value") is not None),
                "").strip()


def sender_of(interaction: dict) -> str:
    member = interaction.get("member")
    person = (member.get("user") if isinstance(member, dict) else None) or interaction.get("user") or {}
    return str(person.get("id") or "") if isinstance(person, dict) else ""


class DiscordReplier:
    """Edits the deferred answer into what the bridge says (the whole reply at its end)."""

    def __init__(self, http: aiohttp.ClientSession, api_url: str, application_id: str, token: str):
        self.http = http
        self.url = f"{api_url.rstrip('/')}/webhooks/{application_id}/{token}/messages/@original"

    async def say(self, text: str) -> None:
        content = text if len(text) <= MAX_CONTENT else text[:MAX_CONTENT - 1] + "…"
        try:
            async with asyncio.timeout(30):
                async with self.http.patch(self.url, json={"content": content or "…"}) as response:
                    if response.status >= 300:
                        raise DeliveryFailed(f"Discord answered {response.status} to the follow-up")
        except (TimeoutError, aiohttp.ClientError) as error:
            raise DeliveryFailed(f"Discord could not be reached ({type(error).__name__})") from None

    def streamer(self) -> CollectedReply:
        return CollectedReply(self.say)
