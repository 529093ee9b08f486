"""Discord's interactions endpoint answers a slow model deferred (type 5) and edits the answer in
through the interaction's follow-up webhook (a local server speaking Discord's API); the generic
webhook platform's messages and replies are signed with HMAC-SHA256."""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time

from aiohttp import web

from tests.platform_bridge.conftest import SERVICE
from tests.webhooks.conftest import WEBHOOK_KEY

ANSWER = "Hello from scripted."
SECRET = "a-signing-secret-of-enough-length"


def interaction(text: str, token: str = "interaction-token-1") -> dict:
    return {"type": 2, "id": "1", "application_id": "123456789012345678", "token": token,
            "channel_id": "41771983423143937", "member": {"user": {"id": "80351110224678912"}},
            "data": {"id": "3", "name": "chat", "type": 1, "options": [{"name": "message", "type": 3, "value": text}]}}


async def test_a_slow_reply_is_deferred_then_sent_through_the_follow_up_webhook(aiohttp_client, gateway, discord):
    client = await aiohttp_client(gateway)
    # The model takes about 0.45 s; this gateway defers after 0.2 s (Discord waits 3).
    response = await client.post("/api/v1/webhook/discord", json=interaction("are you there?"),
                                 headers={"X-Webhook-Key": WEBHOOK_KEY})
    assert response.status == 200, await response.text()
    assert await response.json() == {"type": 5}
    await asyncio.wait_for(discord.edited.wait(), 10)
    assert discord.edits == [("123456789012345678", "interaction-token-1", {"content": ANSWER})]
    stored = await gateway.conversations.list_messages("ext_discord_80351110224678912",
                                                       "discord_41771983423143937_80351110224678912")
    assert [m["content"] for m in stored] == ["are you there?", ANSWER]


async def signed_receiver(aiohttp_server):
    """The outside system: takes the bridge's signed replies."""
    received: list[tuple[bytes, str]] = []
    arrived = asyncio.Event()

    async def take(request: web.Request) -> web.Response:
        received.append((await request.read(), request.headers.get("X-Bridge-Signature", "")))
        arrived.set()
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_post("/replies", take)
    server = await aiohttp_server(app)
    return server, received, arrived


def sign(body: bytes) -> str:
    """How the bridge signs its replies: HMAC-SHA256 of the raw body."""
    return "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()


def signed(body: dict, at: float | None = None) -> tuple[bytes, dict]:
    """A message to the bridge, signed as docs/platform-bridge.md says: HMAC-SHA256 of
    `<timestamp>.<raw body>`, the timestamp (now, or `at`) in X-Bridge-Timestamp."""
    raw = json.dumps(body).encode()
    timestamp = str(int(time.time() if at is None else at))
    signature = hmac.new(SECRET.encode(), timestamp.encode() + b"." + raw, hashlib.sha256).hexdigest()
    return raw, {"X-Bridge-Timestamp": timestamp, "X-Bridge-Signature": f"sha256={signature}"}


async def test_the_generic_webhook_is_signed_both_ways(make_bridge, aiohttp_server, gateway):
    server, received, arrived = await signed_receiver(aiohttp_server)
    # The receiver listens on loopback: the operator allows it in the egress policy.
    bridge = await make_bridge({"fetch.allow_hosts": [f"127.0.0.1:{server.port}"]})
    bot = await bridge.add_bot(platform="webhook", config={"outgoing_url": str(server.make_url("/replies")),
                                                           "signing_secret": SECRET},
                               users=[{"platform_user_id": "crm-7", "user_id": "carol"}])
    assert bot["config"] == {"outgoing_url": str(server.make_url("/replies")), "signing_secret": "••••ngth"}
    url = bot["endpoints"]["incoming"]
    body, headers = signed({"user_id": "crm-7", "text": "status please", "message_id": "m1"})

    response = await bridge.client.post(url, data=body, headers={**headers, "X-Bridge-Signature": "sha256=" + "0" * 64})
    assert response.status == 401 and (await response.json())["errorType"] == "invalid_signature"
    response = await bridge.client.post(url, data=body, headers=headers)
    assert response.status == 202, await response.text()

    await asyncio.wait_for(arrived.wait(), 10)
    raw, signature = received[0]
    assert signature == sign(raw)
    assert json.loads(raw) == {"bot_id": bot["id"], "chat_id": "crm-7", "user_id": "crm-7", "text": ANSWER,
                               "reply_to": "m1"}
    assert await gateway.conversations.list_messages("carol", f"{bot['id']}_crm-7_1")


async def test_a_discord_bot_of_the_bridge_answers_deferred_as_the_linked_person(make_bridge, discord, gateway):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    key = Ed25519PrivateKey.generate()
    public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()
    bridge = await make_bridge(discord_api_url=discord.url)
    bot = await bridge.add_bot(platform="discord", config={"application_id": "123456789012345678",
                                                           "public_key": public, "bot_token": "d" * 40},
                               users=[{"platform_user_id": "80351110224678912", "user_id": "dave"}])
    assert bot["config"]["bot_token"] == "••••dddd" and bot["config"]["public_key"] == public
    url = bot["endpoints"]["interactions"]

    def signed(body: dict) -> tuple[bytes, dict]:
        raw, timestamp = json.dumps(body).encode(), str(int(__import__("time").time()))
        return raw, {"X-Signature-Ed25519": key.sign(timestamp.encode() + raw).hex(),
                     "X-Signature-Timestamp": timestamp, "Content-Type": "application/json"}

    raw, headers = signed({"type": 1})
    assert await (await bridge.client.post(url, data=raw, headers=headers)).json() == {"type": 1}
    raw, headers = signed(interaction("hi bridge"))
    response = await bridge.client.post(url, data=raw, headers={**headers, "X-Signature-Ed25519": "00" * 64})
    assert response.status == 401
    response = await bridge.client.post(url, data=raw, headers=headers)
    assert await response.json() == {"type": 5}
    await asyncio.wait_for(discord.edited.wait(), 10)
    assert discord.edits == [("123456789012345678", "interaction-token-1", {"content": ANSWER})]
    assert await gateway.conversations.list_messages("dave", f"{bot['id']}_41771983423143937_1")
