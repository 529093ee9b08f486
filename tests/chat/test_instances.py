"""Two real gateway instances sharing DATABASE_URL and REDIS_URL: replies, queueing and replays
reach the user's devices on either instance with the broadcast rules intact."""
from __future__ import annotations

from tests.chat.conftest import ADMIN, receive_until, token_for


def ws_path(client, **query) -> str:
    params = {"token": token_for(client, ADMIN), **query}
    return "/ws/chat?" + "&".join(f"{key}={value}" for key, value in params.items())


async def two_instances(make_gateway, redis_url, bus_prefix):
    shared = {"bus.redis_url": redis_url, "bus.prefix": bus_prefix}
    return await make_gateway(overrides=shared), await make_gateway(overrides=shared)


async def test_a_reply_streamed_by_one_instance_reaches_devices_on_the_other(make_gateway, provider, redis_url,
                                                                               bus_prefix):
    first, second = await two_instances(make_gateway, redis_url, bus_prefix)
    async with first.ws_connect(ws_path(first, session_id="shared")) as phone, \
            second.ws_connect(ws_path(second, session_id="shared")) as laptop:
        await phone.send_json({"type": "message", "content": "across"})
        sent = await receive_until(phone, "stream_end")
        seen = await receive_until(laptop, "stream_end")
    assert seen[0]["type"] == "response" and seen[0]["role"] == "user"
    assert "response" not in [frame["type"] for frame in sent]
    assert [frame["seq"] for frame in seen[1:]] == [frame["seq"] for frame in sent]
    assert seen[-1]["text"] == provider.reply


async def test_turns_of_one_session_never_overlap_across_instances(make_gateway, provider, redis_url, bus_prefix):
    first, second = await two_instances(make_gateway, redis_url, bus_prefix)
    provider.gate.clear()
    async with first.ws_connect(ws_path(first, session_id="one")) as phone, \
            second.ws_connect(ws_path(second, session_id="one")) as laptop:
        await phone.send_json({"type": "message", "content": "first"})
        assert (await phone.receive_json(timeout=5))["type"] == "stream_start"
        await laptop.send_json({"type": "message", "content": "second", "client_msg_id": "l1"})
        queued = await receive_until(laptop, "queued")
        assert queued[-1]["client_msg_id"] == "l1"
        provider.gate.set()
        frames = queued + await receive_until(laptop, "stream_end")
        frames += await receive_until(laptop, "stream_end")
    assert provider.max_active == 1
    assert [request["messages"][-1]["content"] for request in provider.requests] == ["first", "second"]
    # The second turn's echo went to the phone, not back to the laptop that sent it.
    assert [f["content"] for f in frames if f["type"] == "response"] == ["first"]


async def test_a_device_reconnecting_to_the_other_instance_resumes_the_reply(make_gateway, provider, redis_url,
                                                                             bus_prefix):
    first, second = await two_instances(make_gateway, redis_url, bus_prefix)
    provider.reply, provider.pieces, provider.hold_after = "alpha beta gamma delta", 4, 2
    provider.gate.clear()
    async with first.ws_connect(ws_path(first, session_id="move")) as ws:
        await ws.send_json({"type": "message", "content": "go"})
        seen = [await ws.receive_json(timeout=5) for _ in range(3)]
    last = seen[-1]
    async with second.ws_connect(ws_path(second, session_id="move", after=f"{last['turn_id']}:{last['seq']}")) as ws:
        await ws.send_json({"type": "ping"})
        # Nothing of the reply was missed yet. The echo of the message may come first: it goes to
        # the user's devices once the message is stored, which can be after this one reconnected.
        before_pong = await receive_until(ws, "pong")
        assert [(f["type"], f.get("role")) for f in before_pong[:-1]] in ([], [("response", "user")])
        provider.gate.set()
        rest = [f for f in await receive_until(ws, "stream_end") if f["type"] != "response"]
    assert [frame["seq"] for frame in rest] == list(range(last["seq"] + 1, rest[-1]["seq"] + 1))
    text = "".join(f["content"] for f in seen + rest if f["type"] == "stream_chunk")
    assert text == provider.reply
