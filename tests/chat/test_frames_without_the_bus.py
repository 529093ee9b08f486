"""Two real gateway instances sharing DATABASE_URL and REDIS_URL (as workers do): a reply's frames
for a person whose devices are all on the instance running the turn do not go through the bus
(gateway/hub.py, hub_peers.py), and yet a device that joins or resumes on the other instance in
the middle of the stream misses no frame and sees none twice, in order."""
from __future__ import annotations

import asyncio

from tests.chat.conftest import ADMIN, context_of, receive_until
from tests.chat.test_instances import two_instances, ws_path

USER = ADMIN.user_id


def streaming_slowly(provider, pieces: int = 120) -> None:
    """A long reply, a piece every few ms: frames keep flowing while devices come and go."""
    provider.reply = "".join(f"w{number} " for number in range(pieces))
    provider.pieces, provider.piece_delay = pieces, 0.01


def reply_frames(frames: list[dict]) -> list[dict]:
    return [frame for frame in frames if frame["type"] != "response"]


async def chunks(ws, count: int) -> list[dict]:
    """The next frames up to the `count`th stream_chunk."""
    frames: list[dict] = []
    while sum(frame["type"] == "stream_chunk" for frame in frames) < count:
        frames.append(await asyncio.wait_for(ws.receive_json(), 10))
    return frames


def assert_in_order_from(frames: list[dict], first: int) -> None:
    seqs = [frame["seq"] for frame in reply_frames(frames)]
    assert seqs == list(range(first, first + len(seqs))), seqs


async def test_devices_joining_the_other_instance_mid_stream_miss_no_frame(make_gateway, provider, redis_url,
                                                                          bus_prefix):
    first, second = await two_instances(make_gateway, redis_url, bus_prefix)
    streaming_slowly(provider)
    async with first.ws_connect(ws_path(first, session_id="join")) as phone:
        await phone.send_json({"type": "message", "content": "go"})
        seen = await chunks(phone, 3)
        assert context_of(first).hub.all_here(USER)  # the frames so far went without the bus
        for _ in range(4):  # each join races frames sent without the bus; each leave ends it
            async with second.ws_connect(ws_path(second, session_id="join")) as laptop:
                joined = await chunks(laptop, 6)
            assert_in_order_from(joined, 0)
            assert not context_of(first).hub.all_here(USER)  # told of the join: through the bus
            await asyncio.sleep(0.05)
        async with second.ws_connect(ws_path(second, session_id="join")) as laptop:
            rest = await receive_until(laptop, "stream_end")
        seen += await receive_until(phone, "stream_end")
    assert_in_order_from(rest, 0)
    assert_in_order_from(seen, 0)
    assert rest[-1]["text"] == provider.reply
    assert "".join(f["content"] for f in rest if f["type"] == "stream_chunk") == provider.reply


async def test_a_device_resuming_on_the_other_instance_mid_stream_gets_every_later_frame_once(
        make_gateway, provider, redis_url, bus_prefix):
    first, second = await two_instances(make_gateway, redis_url, bus_prefix)
    streaming_slowly(provider)
    async with first.ws_connect(ws_path(first, session_id="resume")) as phone:
        await phone.send_json({"type": "message", "content": "go"})
        seen = reply_frames(await chunks(phone, 5))
        assert context_of(first).hub.all_here(USER)
        last = seen[-1]
        after = f"{last['turn_id']}:{last['seq']}"
        async with second.ws_connect(ws_path(second, session_id="resume", after=after)) as tablet:
            rest = await receive_until(tablet, "stream_end")
        seen += await receive_until(phone, "stream_end")
    assert_in_order_from(rest, last["seq"] + 1)
    assert [f["seq"] for f in reply_frames(seen)][-1] == rest[-1]["seq"]
    assert rest[-1]["text"] == provider.reply


async def test_a_device_resuming_on_the_same_instance_reads_the_frames_sent_without_waiting(
        make_gateway, provider, redis_url, bus_prefix):
    first, second = await two_instances(make_gateway, redis_url, bus_prefix)
    streaming_slowly(provider)
    async with first.ws_connect(ws_path(first, session_id="here")) as phone:
        await phone.send_json({"type": "message", "content": "go"})
        seen = reply_frames(await chunks(phone, 8))
        last = seen[-1]
        after = f"{last['turn_id']}:{last['seq']}"
        async with first.ws_connect(ws_path(first, session_id="here", after=after)) as again:
            assert context_of(first).hub.all_here(USER)
            rest = await receive_until(again, "stream_end")
    assert_in_order_from(rest, last["seq"] + 1)
    assert rest[-1]["text"] == provider.reply
