"""Telegram through its Bot API (a local server speaking it): long polling with an offset that
survives a restart, a reply streamed by sendMessage then editMessageText, 429 retry_after,
senders not allowed, linking by code, /new, and webhook mode's secret token."""
from __future__ import annotations

import asyncio

from tests.platform_bridge.conftest import SERVICE, stored_messages

ANSWER = "Hello from scripted."
ALICE = 4242


async def test_a_streamed_answer_is_edited_into_place_and_stored_in_the_persons_session(make_bridge, telegram,
                                                                                          gateway):
    bridge = await make_bridge()
    bot = await bridge.add_bot(users=[{"platform_user_id": str(ALICE), "user_id": "alice"}])
    telegram.say(ALICE, "hi there")
    texts = await telegram.wait_for_texts(ALICE, 1, final=ANSWER)
    assert texts == [ANSWER]
    message = telegram.chats[str(ALICE)][0]
    # Sent with the first words, then edited in place as the rest arrived.
    assert len(message.versions) >= 2 and message.versions[-1] == ANSWER
    assert all(ANSWER.startswith(version) for version in message.versions)
    assert [name for name, _ in telegram.calls].count("sendMessage") == 1
    # Edits of one chat keep Telegram's pace (edit_interval, 0.1 s here).
    times = [at for at, chat, _, _ in telegram.edits if chat == str(ALICE)]
    assert all(later - earlier >= 0.09 for earlier, later in zip(times, times[1:]))

    # The exchange is alice's own session in the gateway, like a device's.
    session_id = f"{bot['id']}_{ALICE}_1"
    stored = await stored_messages(gateway.conversations, "alice", session_id, 2)
    assert [(m["role"], m["content"]) for m in stored] == [("user", "hi there"), ("assistant", ANSWER)]
    session = await gateway.conversations.get_session("alice", session_id)
    assert session["title"] == "Telegram · Family"

    # ...and the bot's log has both directions, newest first, with the answer's latency.
    await asyncio.sleep(0.1)
    entries = await bridge.log(bot["id"])
    assert [(e["direction"], e["text"]) for e in entries] == [("out", ANSWER), ("in", "hi there")]
    assert entries[0]["latency_ms"] > 0 and entries[0]["error"] is None
    assert entries[0]["user_id"] == "alice" and entries[0]["session_id"] == session_id


async def test_new_starts_another_session(make_bridge, telegram, gateway):
    bridge = await make_bridge()
    bot = await bridge.add_bot(users=[{"platform_user_id": str(ALICE), "user_id": "alice"}])
    telegram.say(ALICE, "first")
    await telegram.wait_for_texts(ALICE, 1, final=ANSWER)
    telegram.say(ALICE, "/new")
    await telegram.wait_for_texts(ALICE, 2, final="Started a new conversation.")
    telegram.say(ALICE, "second")
    await telegram.wait_for_texts(ALICE, 3, final=ANSWER)
    first = await stored_messages(gateway.conversations, "alice", f"{bot['id']}_{ALICE}_1", 2)
    second = await stored_messages(gateway.conversations, "alice", f"{bot['id']}_{ALICE}_2", 2)
    assert [m["content"] for m in first] == ["first", ANSWER]
    assert [m["content"] for m in second] == ["second", ANSWER]


async def test_a_sender_not_allowed_is_refused_politely(make_bridge, telegram, gateway, provider):
    bridge = await make_bridge()
    bot = await bridge.add_bot(users=[{"platform_user_id": str(ALICE), "user_id": "alice"}])
    asked = len(provider.requests)
    telegram.say(777, "let me in")
    texts = await telegram.wait_for_texts(777, 1)
    assert texts[0].startswith("Sorry, I only talk to people I know.")
    assert len(provider.requests) == asked  # the assistant never saw it
    await asyncio.sleep(0.1)
    entries = await bridge.log(bot["id"])
    assert entries[0]["direction"] == "out" and entries[0]["error"] == "sender_not_allowed"
    assert entries[1]["direction"] == "in" and entries[1]["user_id"] is None


async def test_linking_by_a_one_time_code(make_bridge, telegram, gateway):
    bridge = await make_bridge()
    bot = await bridge.add_bot()
    response = await bridge.client.post(f"/api/v1/bots/{bot['id']}/link-codes", headers=SERVICE,
                                        json={"user_id": "bob"})
    assert response.status == 201, await response.text()
    code = (await response.json())["code"]
    assert len(code) == 6 and code.isdigit()

    telegram.say(555, "/link 000000" if code != "000000" else "/link 111111")
    await telegram.wait_for_texts(555, 1)
    assert "not valid" in telegram.texts(555)[0]
    telegram.say(555, f"/link {code}")
    await telegram.wait_for_texts(555, 2)
    assert telegram.texts(555)[1] == "Linked: you are talking to the assistant as bob."
    telegram.say(555, "hello")
    await telegram.wait_for_texts(555, 3, final=ANSWER)
    assert await stored_messages(gateway.conversations, "bob", f"{bot['id']}_555_1", 2)

    # The code worked once; the link shows on the bot, and the code never reached the log.
    listed = await (await bridge.client.get(f"/api/v1/bots/{bot['id']}", headers=SERVICE)).json()
    assert {"platform_user_id": "555", "user_id": "bob", "linked_by": "code"} in listed["users"]
    assert code not in str(await bridge.log(bot["id"]))
    telegram.say(556, f"/link {code}")
    await telegram.wait_for_texts(556, 1)
    assert "not valid" in telegram.texts(556)[0]


async def test_a_restart_mid_poll_answers_no_update_twice_and_loses_none(make_bridge, telegram, gateway):
    bridge = await make_bridge()
    bot = await bridge.add_bot(users=[{"platform_user_id": str(ALICE), "user_id": "alice"}])
    telegram.say(ALICE, "one")
    await telegram.wait_for_texts(ALICE, 1, final=ANSWER)
    async with asyncio.timeout(5):
        while len(await bridge.log(bot["id"])) < 2:     # the answer is finished and logged
            await asyncio.sleep(0.02)
    await asyncio.wait_for(telegram.polling.wait(), 5)  # the bridge waits in a long poll
    await bridge.client.close()                           # ...and stops there
    calls_before = len(telegram.calls)

    telegram.say(ALICE, "two")                            # sent while the bridge was down
    bridge = await make_bridge()
    await telegram.wait_for_texts(ALICE, 2, final=ANSWER)
    await asyncio.sleep(0.5)  # time to answer anything twice, if it would
    assert telegram.texts(ALICE) == [ANSWER, ANSWER]
    stored = await stored_messages(gateway.conversations, "alice", f"{bot['id']}_{ALICE}_1", 4)
    assert [m["content"] for m in stored if m["role"] == "user"] == ["one", "two"]
    # The restarted poller asked from the stored offset: past "one" (1000), at "two" (1001).
    first_poll = next(body for name, body in telegram.calls[calls_before:] if name == "getUpdates")
    assert first_poll["offset"] == 1001


async def test_429_retry_after_is_honoured(make_bridge, telegram, gateway):
    bridge = await make_bridge()
    await bridge.add_bot(users=[{"platform_user_id": str(ALICE), "user_id": "alice"}])
    telegram.fail("sendMessage", 429, retry_after=1)
    telegram.fail("editMessageText", 429, retry_after=0.2)  # an edit refused: the next one carries its text
    loop = asyncio.get_running_loop()
    started = loop.time()
    telegram.say(ALICE, "hi")
    await telegram.wait_for_texts(ALICE, 1, final=ANSWER)
    sends = [name for name, _ in telegram.calls if name == "sendMessage"]
    assert sends == ["sendMessage", "sendMessage"]        # refused once, sent after waiting
    assert loop.time() - started >= 1.0
    assert telegram.chats[str(ALICE)][0].versions[-1] == ANSWER


async def test_a_wrong_token_stops_the_bot_with_the_reason(make_bridge, telegram):
    bridge = await make_bridge()
    bot = await bridge.add_bot(config={"bot_token": "999999:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"})
    async with asyncio.timeout(5):
        while True:
            shown = await (await bridge.client.get(f"/api/v1/bots/{bot['id']}", headers=SERVICE)).json()
            if shown["status"]["state"] == "error":
                break
            await asyncio.sleep(0.05)
    assert "401" in shown["status"]["error"] and "AAAAAAAA" not in str(shown)


async def test_webhook_mode_checks_the_secret_token(make_bridge, telegram, gateway):
    bridge = await make_bridge()
    bot = await bridge.add_bot(config={"bot_token": telegram.token, "mode": "webhook", "webhook_secret": "hook-secret"},
                               users=[{"platform_user_id": str(ALICE), "user_id": "alice"}])
    url = bot["endpoints"]["telegram_webhook"]
    update = telegram.update(ALICE, "via webhook")
    response = await bridge.client.post(url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "wrong"})
    assert response.status == 401 and (await response.json())["errorType"] == "invalid_secret_token"
    headers = {"X-Telegram-Bot-Api-Secret-Token": "hook-secret"}
    assert (await bridge.client.post(url, json=update, headers=headers)).status == 200
    assert (await bridge.client.post(url, json=update, headers=headers)).status == 200  # Telegram's retry
    await telegram.wait_for_texts(ALICE, 1, final=ANSWER)
    await asyncio.sleep(0.3)
    assert telegram.texts(ALICE) == [ANSWER]
    assert not [name for name, _ in telegram.calls if name == "getUpdates"]


async def test_an_answer_cut_by_a_restart_is_not_sent_again(make_bridge, telegram, gateway, provider):
    provider.slow_delay = 0.6  # slow enough to stop the bridge halfway through the answer
    bridge = await make_bridge(stop_timeout=0.1)
    bot = await bridge.add_bot(users=[{"platform_user_id": str(ALICE), "user_id": "alice"}])
    telegram.say(ALICE, "long question")
    await telegram.wait_for_texts(ALICE, 1)               # the first words are out
    await bridge.client.close()
    sends = sum(1 for name, _ in telegram.calls if name == "sendMessage")

    bridge = await make_bridge()
    await asyncio.wait_for(telegram.polling.wait(), 5)    # back to polling, past the cut update
    await asyncio.sleep(0.3)
    assert sum(1 for name, _ in telegram.calls if name == "sendMessage") == sends
    entries = await bridge.log(bot["id"])
    assert [(e["direction"], e["text"]) for e in entries] == [("in", "long question")]
