"""The one rule of who may chat (docs/chat.md, "Who may chat") at the bridge's door: with chat
limited to the administrator, a person who asks for their own link code and links their
platform account gets a short plain answer that chat is not enabled for them, and no turn; the
administrator, linked the same way, chats."""
from __future__ import annotations

import asyncio

import pytest

from gateway.identity import Identity
from plugins.auth.tokens import JwtTokens
from plugins.platform_bridge.messages import CHAT_NOT_ENABLED
from tests.platform_bridge.conftest import SERVICE, stored_messages

ANSWER = "Hello from scripted."


def bob_token() -> str:
    """Issued when the test runs: an access token lives 15 minutes, shorter than the suite."""
    token, _ = JwtTokens(secret="test-jwt-secret-" + "x" * 32).issue_access(Identity("user_bob", "bob"))
    return token


@pytest.fixture
def chat_for_all_users() -> bool:
    return False  # the default: chat is the administrator's


async def link(bridge, telegram, bot_id: str, sender: int, headers: dict, body: dict) -> None:
    response = await bridge.client.post(f"/api/v1/bots/{bot_id}/link-codes", headers=headers, json=body)
    assert response.status == 201, await response.text()
    telegram.say(sender, f"/link {(await response.json())['code']}")
    await telegram.wait_for_texts(sender, 1)
    assert telegram.texts(sender)[0].startswith("Linked:")


async def test_a_linked_person_who_may_not_chat_is_told_so_and_gets_no_turn(make_bridge, telegram, gateway,
                                                                            provider):
    bridge = await make_bridge()
    bot = await bridge.add_bot()
    await link(bridge, telegram, bot["id"], 555, {"Authorization": f"Bearer {bob_token()}"}, {})
    asked = len(provider.requests)
    telegram.say(555, "hello")
    await telegram.wait_for_texts(555, 2)
    assert telegram.texts(555)[1] == CHAT_NOT_ENABLED
    assert len(provider.requests) == asked  # the assistant never saw it
    assert await gateway.conversations.get_session("user_bob", f"{bot['id']}_555_1") is None
    async with asyncio.timeout(5):
        while not (entries := await bridge.log(bot["id"])) or entries[0]["direction"] != "out":
            await asyncio.sleep(0.02)
    assert (entries[0]["text"], entries[0]["error"], entries[0]["user_id"]) == \
        (CHAT_NOT_ENABLED, "chat_not_allowed", "user_bob")

    # The administrator, linked the same way, talks to the assistant.
    await link(bridge, telegram, bot["id"], 556, SERVICE, {"user_id": "admin"})
    telegram.say(556, "hello")
    await telegram.wait_for_texts(556, 2, final=ANSWER)
    assert await stored_messages(gateway.conversations, "admin", f"{bot['id']}_556_1", 2)
