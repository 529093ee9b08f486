"""How a turn of an idle session starts: the AI core is called before anything is written, the
user's other devices still see the echo before the reply, the lock is free again as soon as a
reply ends, and a re-sent message is refused even when the bus forgot it."""
from __future__ import annotations

import asyncio

from gateway.database import fetch_all
from tests.chat.conftest import context_of, eventually, receive_until
from tests.chat.test_channel import ws_path
from plugins.chat.contract import PRESENCE
from plugins.sessions.contract import CONVERSATIONS


async def queue_rows(gateway, session_id: str) -> list[tuple[str, str]]:
    rows = await fetch_all(context_of(gateway).db, "SELECT text, status FROM chat_turn_queue "
                                                   "WHERE session_id = %s ORDER BY id", (session_id,))
    return [(row["text"], row["status"]) for row in rows]


async def stored_user_texts(gateway, session_id: str) -> list[str]:
    conversations = context_of(gateway).contracts.require(CONVERSATIONS)
    return [m["content"] for m in await conversations.all_messages("admin", session_id) if m["role"] == "user"]


async def hold_second_turn(provider, phone, other=None) -> None:
    """A first turn (admitted by the database: the bus has not seen the session), then a second
    one started on the fast path and held by the model before its first token."""
    await phone.send_json({"type": "message", "content": "one", "client_msg_id": "m1"})
    await receive_until(phone, "stream_end")
    if other is not None:
        await receive_until(other, "stream_end")
    provider.hold_after, provider.pieces = 0, 2
    provider.gate.clear()
    provider.received.clear()
    await phone.send_json({"type": "message", "content": "two", "client_msg_id": "m2"})
    await asyncio.wait_for(provider.received.wait(), 10)


async def test_an_idle_sessions_turn_calls_the_ai_core_before_writing_and_echoes_first(make_gateway, provider):
    gateway = await make_gateway(settings={"store_after": 30})
    async with gateway.ws_connect(ws_path(gateway, session_id="quick")) as phone, \
            gateway.ws_connect(ws_path(gateway, session_id="quick")) as laptop:
        await hold_second_turn(provider, phone, laptop)
        # The model is asked; the turn's row and the message are not written yet.
        assert await queue_rows(gateway, "quick") == [("one", "done")]
        assert await stored_user_texts(gateway, "quick") == ["one"]
        assert (await phone.receive_json(timeout=5))["type"] == "stream_start"  # the sender already knows
        provider.gate.set()
        sent = await receive_until(phone, "stream_end")
        seen = await receive_until(laptop, "stream_end")

    # The other device saw the echo (with the stored id) before the reply, then every frame in order.
    assert seen[0]["type"] == "response" and seen[0]["content"] == "two" and seen[0]["message_id"]
    assert [frame["type"] for frame in seen[1:]] == ["stream_start"] + [frame["type"] for frame in sent]
    assert [frame["seq"] for frame in seen[1:]] == list(range(len(sent) + 1))
    assert await queue_rows(gateway, "quick") == [("one", "done"), ("two", "done")]
    assert await stored_user_texts(gateway, "quick") == ["one", "two"]
    # The history the AI core got for the second turn held the first (from the instance's copy).
    assert [m["content"] for m in provider.requests[-1]["messages"] if m["role"] == "user"][-2:] == ["one", "two"]


async def test_in_a_burst_a_turns_writes_wait_for_the_other_turns_first_events(make_gateway, provider):
    """Turn A's model has not answered; turn B's has begun. B's writes (its row and message)
    wait, so that they do not take the CPU from A's first token; B still ends, stored, and the
    user's other device sees its echo before its frames."""
    gateway = await make_gateway(settings={"store_after": 30})
    first_token, rest_of_b = asyncio.Event(), asyncio.Event()
    async with gateway.ws_connect(ws_path(gateway, session_id="slow")) as slow, \
            gateway.ws_connect(ws_path(gateway, session_id="quick")) as quick:
        for ws, text in ((slow, "warm slow"), (quick, "warm quick")):  # the bus admits the next ones
            await ws.send_json({"type": "message", "content": text, "client_msg_id": text})
            await receive_until(ws, "stream_end")
            await receive_until(quick if ws is slow else slow, "stream_end")
        provider.holds = {"wait for me": (0, first_token), "go on": (1, rest_of_b)}
        provider.received.clear()
        await slow.send_json({"type": "message", "content": "wait for me", "client_msg_id": "a"})
        await asyncio.wait_for(provider.received.wait(), 10)
        await quick.send_json({"type": "message", "content": "go on", "client_msg_id": "b"})
        b_began = await receive_until(quick, "stream_chunk")
        assert [frame["type"] for frame in b_began][-2:] == ["stream_start", "stream_chunk"]
        await asyncio.sleep(0.3)
        assert await stored_user_texts(gateway, "quick") == ["warm quick"]  # A still waits for its first token
        first_token.set()
        rest_of_b.set()
        on_slow, on_quick = await both_replies(slow), b_began + await both_replies(quick)
    assert await stored_user_texts(gateway, "quick") == ["warm quick", "go on"]
    assert await stored_user_texts(gateway, "slow") == ["warm slow", "wait for me"]
    turns = {frame["session_id"]: frame["turn_id"] for frame in on_slow + on_quick if frame["type"] == "stream_end"}
    for sender, other, session in ((on_slow, on_quick, "slow"), (on_quick, on_slow, "quick")):
        sent = [frame for frame in sender if frame.get("turn_id") == turns[session]]
        seen = [frame for frame in other if frame.get("turn_id") == turns[session]
                or (frame["type"] == "response" and frame["session_id"] == session)]
        # The other device: the echo of the message (with its stored id), then the same frames in order.
        assert seen[0]["type"] == "response" and seen[0]["session_id"] == session and seen[0]["message_id"]
        assert [frame["seq"] for frame in seen[1:]] == [frame["seq"] for frame in sent] == list(range(len(sent)))


async def both_replies(ws) -> list[dict]:
    """Every frame up to the second `stream_end`."""
    frames = await receive_until(ws, "stream_end")
    return frames + await receive_until(ws, "stream_end")


async def test_a_reply_with_no_text_is_stored_and_ended_without_waiting(make_gateway, provider):
    """The writes wait for the first event to be sent on; a reply that is only `done` has none."""
    gateway = await make_gateway(settings={"store_after": 30})
    provider.reply = ""
    async with gateway.ws_connect(ws_path(gateway, session_id="empty")) as phone, \
            gateway.ws_connect(ws_path(gateway, session_id="empty")) as laptop:
        await phone.send_json({"type": "message", "content": "say nothing", "client_msg_id": "e1"})
        sent = await receive_until(phone, "stream_end", timeout=5)
        seen = await receive_until(laptop, "stream_end", timeout=5)
    assert sent[-1]["finish_reason"] == "stop" and sent[-1]["text"] == ""
    assert seen[0]["type"] == "response" and seen[0]["content"] == "say nothing"
    assert await stored_user_texts(gateway, "empty") == ["say nothing"]


async def test_a_message_sent_as_a_reply_ends_starts_at_once(gateway, provider):
    async with gateway.ws_connect(ws_path(gateway, session_id="chain")) as ws:
        for index in range(3):
            await ws.send_json({"type": "message", "content": f"turn {index}", "client_msg_id": f"c{index}"})
            frames = await receive_until(ws, "stream_end")
            assert "queued" not in [frame["type"] for frame in frames]
            assert frames[0]["type"] == "stream_start"
    assert await queue_rows(gateway, "chain") == [(f"turn {i}", "done") for i in range(3)]


async def test_a_resend_is_refused_after_a_restart_though_the_bus_was_empty(make_gateway, provider):
    first = await make_gateway()
    async with first.ws_connect(ws_path(first, session_id="restart")) as ws:
        await ws.send_json({"type": "message", "content": "once", "client_msg_id": "r1"})
        await receive_until(ws, "stream_end")
    await first.close()

    # A new instance with a new in-process bus: it has not seen "r1".
    second = await make_gateway()

    async def idle():  # the session's turn lock is free again
        return not (await context_of(second).contracts.require(PRESENCE).session_state("restart"))["turn_running"]

    async def refused(ws) -> None:
        await ws.send_json({"type": "message", "content": "once", "client_msg_id": "r1"})
        await ws.send_json({"type": "ping"})
        assert (await ws.receive_json(timeout=5))["type"] == "pong"
        await eventually(idle)

    async with second.ws_connect(ws_path(second, session_id="restart")) as ws:
        await refused(ws)  # the bus cannot vouch for the session: the database refuses it
        assert len(provider.requests) == 1
        await ws.send_json({"type": "message", "content": "new", "client_msg_id": "r2"})
        await receive_until(ws, "stream_end")
        await eventually(idle)
        # The bus now vouches for the session, and holds the ids the queue remembered: still refused.
        await refused(ws)
        assert len(provider.requests) == 2
    assert await stored_user_texts(second, "restart") == ["once", "new"]


async def test_a_resend_while_the_turn_starts_is_answered_once(make_gateway, provider):
    gateway = await make_gateway(settings={"store_after": 30})
    async with gateway.ws_connect(ws_path(gateway, session_id="race")) as phone, \
            gateway.ws_connect(ws_path(gateway, session_id="race")) as again:
        await hold_second_turn(provider, phone, again)  # started; its row is not written yet
        await again.send_json({"type": "message", "content": "two", "client_msg_id": "m2"})  # a re-send
        await again.send_json({"type": "ping"})
        assert (await receive_until(again, "pong"))[-1]["type"] == "pong"
        provider.gate.set()
        frames = await receive_until(phone, "stream_end")
    assert not [frame for frame in frames if frame["type"] == "error"]
    assert len(provider.requests) == 2
    conversations = context_of(gateway).contracts.require(CONVERSATIONS)
    assert [m["role"] for m in await conversations.all_messages("admin", "race")] == ["user", "assistant"] * 2


async def test_stopping_ends_a_running_turn_and_records_it(make_gateway, provider):
    gateway = await make_gateway(settings={"stop_timeout": 0.3})
    async with gateway.ws_connect(ws_path(gateway, session_id="stop")) as phone:
        await hold_second_turn(provider, phone)
        await asyncio.sleep(0.2)
    await gateway.close()  # the turn outlives its device; stopping cuts it after stop_timeout
    provider.gate.set()
    # Written before the stop returned: read through another instance.
    assert await queue_rows(await make_gateway(), "stop") == [("one", "done"), ("two", "abandoned")]
