"""Link codes cannot be guessed: six digits, so wrong `/link` codes are limited per sender (a
count on the bus, over a window) and per code (burnt after so many wrong codes sent to its bot
while it lives). The right code still links a sender not over the limit."""
from __future__ import annotations

import asyncio
import json

from tests.platform_bridge.conftest import SERVICE

LINKED_BOB = "Linked: you are talking to the assistant as bob."


async def new_code(bridge, bot_id: str, user_id: str) -> str:
    response = await bridge.client.post(f"/api/v1/bots/{bot_id}/link-codes", headers=SERVICE, json={"user_id": user_id})
    assert response.status == 201, await response.text()
    return (await response.json())["code"]


def wrong_codes(code: str, count: int) -> list[str]:
    return [guess for guess in (f"{n:06d}" for n in range(count + 1)) if guess != code][:count]


async def test_guessing_is_stopped_per_sender_and_the_right_code_still_links_another(make_bridge, telegram):
    bridge = await make_bridge()  # at most 5 wrong codes per sender (the default)
    bot = await bridge.add_bot()
    code = await new_code(bridge, bot["id"], "bob")
    for guess in wrong_codes(code, 40):
        telegram.say(555, f"/link {guess}")
    texts = await telegram.wait_for_texts(555, 40)
    assert all("not valid" in text for text in texts[:5]), texts[:6]
    assert all(text.startswith("Too many wrong link codes.") for text in texts[5:]), texts[5:7]
    # Over the limit, even the right code is not tried (nor used up)...
    telegram.say(555, f"/link {code}")
    assert (await telegram.wait_for_texts(555, 41))[-1].startswith("Too many wrong link codes.")
    # ...and a sender not over it links with it: five wrong codes did not burn it.
    telegram.say(556, f"/link {code}")
    assert (await telegram.wait_for_texts(556, 1)) == [LINKED_BOB]
    listed = await (await bridge.client.get(f"/api/v1/bots/{bot['id']}", headers=SERVICE)).json()
    assert [user["platform_user_id"] for user in listed["users"]] == ["556"]
    await asyncio.sleep(0.1)
    errors = [entry["error"] for entry in await bridge.log(bot["id"], limit=200) if entry["direction"] == "out"]
    assert errors.count("invalid_link_code") == 5 and errors.count("link_rate_limited") == 36


async def test_a_code_guessed_at_too_often_is_burnt(make_bridge, telegram):
    bridge = await make_bridge(link_failures_per_code=8)
    bot = await bridge.add_bot()
    code = await new_code(bridge, bot["id"], "bob")
    # Two senders, each under their own limit, together send the code's share of wrong codes.
    for sender in (601, 602):
        for guess in wrong_codes(code, 4):
            telegram.say(sender, f"/link {guess}")
        await telegram.wait_for_texts(sender, 4)
    telegram.say(603, f"/link {code}")
    assert "not valid" in (await telegram.wait_for_texts(603, 1))[0]  # burnt: bob asks again
    telegram.say(603, f"/link {await new_code(bridge, bot['id'], 'bob')}")
    assert (await telegram.wait_for_texts(603, 2))[-1] == LINKED_BOB


async def test_the_sender_limit_holds_across_instances(make_bridge, aiohttp_server, redis_url, bus_prefix):
    """Two bridge processes on one database and one Redis: a sender's wrong codes count together
    whichever of them answers (the generic webhook, so each message picks its instance)."""
    from tests.platform_bridge.test_discord_and_webhook import SECRET, signed, signed_receiver

    server, received, _ = await signed_receiver(aiohttp_server)
    shared = {"fetch.allow_hosts": [f"127.0.0.1:{server.port}"], "bus.redis_url": redis_url,
              "bus.prefix": bus_prefix}
    first, second = await make_bridge(shared), await make_bridge(shared)
    bot = await first.add_bot(platform="webhook", config={"outgoing_url": str(server.make_url("/replies")),
                                                          "signing_secret": SECRET})
    code = await new_code(first, bot["id"], "bob")
    sent = 0

    async def say(bridge, text: str) -> str:
        nonlocal sent
        sent += 1
        raw, headers = signed({"user_id": "crm-9", "text": text, "message_id": f"m{sent}"})
        response = await bridge.client.post(bot["endpoints"]["incoming"], data=raw, headers=headers)
        assert response.status == 202, await response.text()
        async with asyncio.timeout(10):
            while len(received) < sent:
                await asyncio.sleep(0.02)
        return json.loads(received[-1][0])["text"]

    guesses = wrong_codes(code, 6)
    for index, guess in enumerate(guesses[:5]):
        assert "not valid" in await say((first, second)[index % 2], f"/link {guess}")
    assert (await say(second, f"/link {guesses[5]}")).startswith("Too many wrong link codes.")
    assert (await say(first, f"/link {code}")).startswith("Too many wrong link codes.")
