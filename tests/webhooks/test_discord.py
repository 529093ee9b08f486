"""POST /webhook/discord: PING, the chat command, other types, and Discord's Ed25519 request
signature checked with a key pair generated here."""
import json
import time

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from gateway.plugins import PluginError
from tests.webhooks.conftest import WEBHOOK_KEY

URL = "/api/v1/webhook/discord"
PUBLIC_KEY = "plugins.webhooks.discord_public_key"  # DISCORD_PUBLIC_KEY


@pytest.fixture
def signing_key():
    return Ed25519PrivateKey.generate()


def public_hex(private_key) -> str:
    return private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


def signed(private_key, interaction: dict, at: float | None = None) -> tuple[bytes, dict]:
    """The body and headers exactly as Discord sends them: signature over timestamp + body."""
    body = json.dumps(interaction).encode()
    timestamp = str(int(time.time() if at is None else at))
    signature = private_key.sign(timestamp.encode() + body).hex()
    return body, {"X-Signature-Ed25519": signature, "X-Signature-Timestamp": timestamp,
                  "Content-Type": "application/json"}


def command(text: str | None, user: str = "80351110224678912", channel: str = "41771983423143937") -> dict:
    options = [] if text is None else [{"name": "message", "type": 3, "value": text}]
    return {"type": 2, "id": "1", "application_id": "2", "token": "t", "channel_id": channel,
            "member": {"user": {"id": user, "username": "someone"}},
            "data": {"id": "3", "name": "chat", "type": 1, "options": options}}


async def test_signed_ping_and_chat_command(make_gateway, ai_core_url, signing_key):
    client, conversations = await make_gateway(ai_core_url, **{PUBLIC_KEY: public_hex(signing_key)})
    body, headers = signed(signing_key, {"type": 1})
    response = await client.post(URL, data=body, headers=headers)
    assert response.status == 200 and await response.json() == {"type": 1}

    body, headers = signed(signing_key, command("今天怎么样？"))
    response = await client.post(URL, data=body, headers=headers)
    assert response.status == 200, await response.text()
    assert await response.json() == {"type": 4, "data": {"content": "echo(0 earlier): 今天怎么样？"}}
    session = await conversations.get_session("ext_discord_80351110224678912", "discord_41771983423143937_80351110224678912")
    assert session["user_id"] == "ext_discord_80351110224678912"
    assert len(await conversations.list_messages(session["user_id"], session["id"])) == 2

    # Someone else in the same channel has a conversation of their own.
    body, headers = signed(signing_key, command("and me?", user="111"))
    response = await client.post(URL, data=body, headers=headers)
    assert response.status == 200, await response.text()
    assert await conversations.get_session("ext_discord_111", "discord_41771983423143937_111")


async def test_a_replayed_old_interaction_is_refused(make_gateway, ai_core_url, signing_key):
    client, _ = await make_gateway(ai_core_url, **{PUBLIC_KEY: public_hex(signing_key)})
    body, headers = signed(signing_key, command("hello"), at=time.time() - 3600)
    response = await client.post(URL, data=body, headers=headers)
    assert response.status == 401 and (await response.json())["errorType"] == "stale_signature"


async def test_bad_signatures_are_401(make_gateway, ai_core_url, signing_key):
    client, conversations = await make_gateway(ai_core_url, **{PUBLIC_KEY: public_hex(signing_key)})
    body, headers = signed(signing_key, command("hello"))
    tampered = body.replace(b"hello", b"hellO")
    other_key = Ed25519PrivateKey.generate()
    _, foreign_headers = signed(other_key, command("hello"))
    cases = [
        (tampered, headers),
        (body, {**headers, "X-Signature-Timestamp": str(int(headers["X-Signature-Timestamp"]) + 1)}),
        (body, {**headers, "X-Signature-Ed25519": foreign_headers["X-Signature-Ed25519"]}),
        (body, {**headers, "X-Signature-Ed25519": "not hex"}),
        (body, {"Content-Type": "application/json"}),
        # the webhook key does not replace a signature once a public key is configured
        (body, {"Content-Type": "application/json", "X-Webhook-Key": WEBHOOK_KEY}),
    ]
    for data, case_headers in cases:
        response = await client.post(URL, data=data, headers=case_headers)
        assert response.status == 401, case_headers
        assert (await response.json())["errorType"] == "invalid_signature"
    assert await conversations.get_session("ext_discord_80351110224678912", "discord_41771983423143937_80351110224678912") is None


async def test_without_a_public_key_the_webhook_key_is_required(make_gateway, ai_core_url):
    client, _ = await make_gateway(ai_core_url)
    assert (await client.post(URL, json={"type": 1})).status == 401
    response = await client.post(URL, json={"type": 1}, headers={"X-Webhook-Key": WEBHOOK_KEY})
    assert await response.json() == {"type": 1}


async def test_other_interactions_and_commands_without_a_message(make_gateway, ai_core_url, signing_key):
    client, _ = await make_gateway(ai_core_url, **{PUBLIC_KEY: public_hex(signing_key)})
    for interaction, error_type in (({"type": 3, "data": {"custom_id": "x"}}, "unsupported_interaction"),
                                    ({"type": 4}, "unsupported_interaction"),
                                    (command(None), "empty_message"),
                                    (command("   "), "empty_message")):
        body, headers = signed(signing_key, interaction)
        response = await client.post(URL, data=body, headers=headers)
        assert response.status == 400, interaction
        assert (await response.json())["errorType"] == error_type
        assert (await response.json())["hint"]


async def test_a_command_past_the_message_limit_is_413(make_gateway, ai_core_url, signing_key):
    client, _ = await make_gateway(ai_core_url, **{PUBLIC_KEY: public_hex(signing_key)})
    body, headers = signed(signing_key, command("x" * 100_000))
    response = await client.post(URL, data=body, headers=headers)
    assert response.status == 413 and (await response.json())["errorType"] == "message_too_long"


async def test_a_discord_command_while_the_ai_core_is_down_is_502(make_gateway, closed_port_url, signing_key):
    client, _ = await make_gateway(closed_port_url, **{PUBLIC_KEY: public_hex(signing_key)})
    body, headers = signed(signing_key, command("hi"))
    assert (await client.post(URL, data=body, headers=headers)).status == 502


async def test_a_malformed_public_key_stops_start_up(make_gateway, closed_port_url):
    with pytest.raises(PluginError, match="DISCORD_PUBLIC_KEY"):
        await make_gateway(closed_port_url, **{PUBLIC_KEY: "abc"})
