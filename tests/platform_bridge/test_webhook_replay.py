"""The generic webhook's incoming messages cannot be replayed: the signature covers a timestamp
(`X-Bridge-Timestamp`) with the body, an old timestamp is refused, and within the window the
same signed request, or the same message_id sent again, is taken once and answered once."""
from __future__ import annotations

import asyncio
import json
import time

from tests.platform_bridge.conftest import stored_messages
from tests.platform_bridge.test_discord_and_webhook import ANSWER, SECRET, sign, signed, signed_receiver


async def test_a_replayed_or_resent_message_is_taken_once(make_bridge, aiohttp_server, gateway):
    server, received, _ = await signed_receiver(aiohttp_server)
    bridge = await make_bridge({"fetch.allow_hosts": [f"127.0.0.1:{server.port}"]})
    bot = await bridge.add_bot(platform="webhook", config={"outgoing_url": str(server.make_url("/replies")),
                                                           "signing_secret": SECRET},
                               users=[{"platform_user_id": "crm-7", "user_id": "carol"}])
    url = bot["endpoints"]["incoming"]

    async def post(raw: bytes, headers: dict) -> dict:
        response = await bridge.client.post(url, data=raw, headers=headers)
        assert response.status == 202, await response.text()
        return await response.json()

    first = signed({"user_id": "crm-7", "text": "status please", "message_id": "m1"})
    assert await post(*first) == {"accepted": True}
    assert await post(*first) == {"accepted": True, "duplicate": True}            # the very request again
    assert await post(*signed({"user_id": "crm-7", "text": "status please", "message_id": "m1"},
                              at=time.time() + 1)) == {"accepted": True, "duplicate": True}  # re-signed, same id
    no_id = signed({"user_id": "crm-7", "text": "no id here"})
    assert await post(*no_id) == {"accepted": True}
    assert await post(*no_id) == {"accepted": True, "duplicate": True}            # caught by its signature
    assert await post(*signed({"user_id": "crm-7", "text": "last", "message_id": "m2"})) == {"accepted": True}
    # Messages of one chat are answered in order: once the last is answered, a repeat taken
    # again would have been answered before it.
    messages = await stored_messages(gateway.conversations, "carol", f"{bot['id']}_crm-7_1", 6)
    assert [m["content"] for m in messages if m["role"] == "user"] == ["status please", "no id here", "last"]
    async with asyncio.timeout(10):
        while len(received) < 3:
            await asyncio.sleep(0.02)
    assert [json.loads(raw)["reply_to"] for raw, _ in received] == ["m1", None, "m2"]
    assert all(json.loads(raw)["text"] == ANSWER for raw, _ in received)


async def test_an_old_or_unstamped_signature_is_refused(make_bridge):
    bridge = await make_bridge()
    bot = await bridge.add_bot(platform="webhook", config={"outgoing_url": "https://example.org/replies",
                                                           "signing_secret": SECRET},
                               users=[{"platform_user_id": "crm-7", "user_id": "carol"}])
    url = bot["endpoints"]["incoming"]
    body = {"user_id": "crm-7", "text": "status please", "message_id": "m1"}
    raw, headers = signed(body, at=time.time() - 3600)  # captured an hour ago, signed correctly
    response = await bridge.client.post(url, data=raw, headers=headers)
    assert response.status == 401 and (await response.json())["errorType"] == "stale_signature"
    raw = json.dumps(body).encode()  # the body alone signed: no timestamp to judge it by
    for headers in ({"X-Bridge-Signature": sign(raw)},
                    {"X-Bridge-Signature": sign(raw), "X-Bridge-Timestamp": str(int(time.time()))}):
        response = await bridge.client.post(url, data=raw, headers=headers)
        answer = await response.json()
        assert response.status == 401 and answer["errorType"] == "invalid_signature"
        assert "X-Bridge-Timestamp" in answer["hint"]
