"""Two real gateway instances sharing DATABASE_URL and REDIS_URL (as workers do): a reply's frames
for a person whose devices are all on the instance running the turn do not go through the bus
(gateway/hub.py, hub_peers.py), and yet a device that joins or resumes on the other instance in
the middle of the stream misses no frame and sees none twice, in order."""
from __future__ import annotations

import asyncio
import contextlib
import json

import aiohttp
import pytest
import redis.asyncio

from gateway.hub import HOLDERS
from gateway.hub_peers import ACK_BOUND
from plugins.chat.keys import replay_key, session_key
from tests.chat.conftest import ADMIN, context_of, receive_until, token_for
from tests.chat.test_instances import two_instances, ws_path
from tests.chat.test_workers import bystander, devices, start_workers  # noqa: F401 (fixtures)
from tests.core.test_bus import restartable_redis  # noqa: F401 (fixture)

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


async def test_a_device_is_sent_a_frame_only_once_its_replay_entry_is_in(make_gateway, provider, restartable_redis,
                                                                         bus_prefix):
    """The frames skip the bus, but not the replay: while Redis holds its writes (CLIENT PAUSE
    WRITE) the phone is sent no frame the replay lacks. A worker killed then loses the appends
    still out; had its phone seen their frames, the dead reply's end (numbered after the
    replay's last frame) would be one a resume after them filters out, and it never ends."""
    gateway = await make_gateway(overrides={"bus.redis_url": restartable_redis.url, "bus.prefix": bus_prefix})
    streaming_slowly(provider)
    stream = bus_prefix + replay_key(session_key(USER, "paused"))
    loop = asyncio.get_running_loop()
    async with redis.asyncio.from_url(restartable_redis.url, decode_responses=True) as admin, \
            gateway.ws_connect(ws_path(gateway, session_id="paused")) as phone:
        await phone.send_json({"type": "message", "content": "go"})
        seen = await chunks(phone, 3)
        assert context_of(gateway).hub.all_here(USER)
        await admin.execute_command("CLIENT", "PAUSE", 800, "WRITE")
        paused_until = loop.time() + 0.6
        while (left := paused_until - loop.time()) > 0:
            try:
                frame = await asyncio.wait_for(phone.receive_json(), left)
            except asyncio.TimeoutError:
                break
            in_replay = {int(values["seq"]) for _, values in await admin.xrange(stream) if "seq" in values}
            assert frame["seq"] in in_replay, (frame["seq"], max(in_replay))
            seen.append(frame)
        seen += await receive_until(phone, "stream_end")
    assert_in_order_from(seen, 0)
    assert seen[-1]["text"] == provider.reply


async def test_a_holder_that_died_delays_a_join_by_the_ack_bound_at_most_and_its_user_uses_the_bus(
        make_gateway, provider, redis_url, bus_prefix):
    """An instance killed while holding the user's devices leaves its holder mark for up to its
    ttl: it never acks, so a device joining waits `ACK_BOUND` at most, and frames for that user
    go through the bus (it may be alive after all) while that device stays."""
    first, _ = await two_instances(make_gateway, redis_url, bus_prefix)
    hub = context_of(first).hub
    await context_of(first).bus.mark(f"{HOLDERS}:{context_of(first).service_id}:{USER}", "dead-instance", 60)
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with first.ws_connect(ws_path(first, session_id="dead")) as phone:
        await phone.send_json({"type": "ping"})
        await receive_until(phone, "pong")
        assert loop.time() - started < ACK_BOUND + 2.0
        assert not hub.all_here(USER)
        await phone.send_json({"type": "message", "content": "go"})
        frames = await receive_until(phone, "stream_end")
    assert_in_order_from(frames, 0)
    assert frames[-1]["text"] == provider.reply


@pytest.mark.slow
@pytest.mark.parametrize("writes_held", [False, True], ids=["now", "while-redis-holds-writes"])
async def test_a_worker_killed_mid_reply_left_every_frame_its_device_saw_for_the_resume(start_workers, bystander,
                                                                                       provider, writes_held):
    """The phone alone on worker 0: its reply's frames go without the bus, each appended to the
    replay without waiting. Worker 0 is killed mid-reply; the phone resumes on worker 1 from the
    last frame it saw: nothing is sent twice, and the dead reply's end carries all it saw.
    `writes_held`: killed while the bus holds its writes (CLIENT PAUSE WRITE; a loaded machine
    may hold them a while too), so appends are still out: the phone must not have seen their
    frames, or the end the sweeper numbers after the replay's last frame is filtered out of its
    resume and never comes."""
    token = token_for(bystander, ADMIN)
    gateway = await start_workers(settings={"lock_ttl": 1.5, "sweep_interval": 0.2})
    streaming_slowly(provider)
    async with devices() as http:
        phone = await gateway.connect(http, token, 0, session_id="killed")
        await phone.send_json({"type": "message", "content": "go"})
        seen = await chunks(phone, 10)
        if writes_held:
            await hold_writes(gateway.data_dir / "run" / "gateway-bus.sock", 1.5)
            with contextlib.suppress(asyncio.TimeoutError):
                async with asyncio.timeout(0.3):  # unheld, a frame every 10 ms would come
                    while True:
                        seen.append(await phone.receive_json())
        gateway.workers()[0].kill()
        while (message := await phone.receive(timeout=5)).type == aiohttp.WSMsgType.TEXT:
            seen.append(json.loads(message.data))
        seen = reply_frames(seen)
        last = seen[-1]
        phone = await gateway.connect(http, token, 1, session_id="killed", after=f"{last['turn_id']}:{last['seq']}")
        rest = reply_frames(await receive_until(phone, "stream_end", timeout=20))
    assert_in_order_from(seen, 0)
    assert all(frame["seq"] > last["seq"] for frame in rest), rest
    assert rest[-1]["finish_reason"] == "error"
    assert rest[-1]["text"].startswith("".join(f["content"] for f in seen if f["type"] == "stream_chunk"))


async def hold_writes(bus_socket, seconds: float) -> None:
    """The workers' embedded Redis runs no write command for `seconds` (reads still answer)."""
    async with redis.asyncio.Redis(unix_socket_path=str(bus_socket)) as admin:
        await admin.execute_command("CLIENT", "PAUSE", int(seconds * 1000), "WRITE")
