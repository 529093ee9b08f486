"""The same tests on both bus implementations, plus what only a shared bus can do."""
import asyncio
import functools
import json
import shutil
import subprocess
import tempfile

import pytest
import redis.asyncio

from gateway.memory_bus import InProcessBus
from gateway.redis_bus import NOWAIT_BACKLOG, RedisBus, redis_exceptions, unavailable
from tests.support.servers import NO_REDIS_SERVER, free_port, redis_answers


@pytest.fixture(params=["in-process", "redis"])
async def bus(request, bus_prefix):
    if request.param == "in-process":
        instance = InProcessBus(bus_prefix)
    else:
        instance = RedisBus(request.getfixturevalue("redis_url"), bus_prefix)
    yield instance
    await instance.close()


async def collect(bus, channel):
    received = []
    arrived = asyncio.Event()

    async def handler(message):
        received.append(message)
        arrived.set()

    subscription = await bus.subscribe(channel, handler)
    return received, arrived, subscription


async def subscribers(url: str, channel: str) -> int:
    """How many connections Redis has subscribed to `channel` (PUBSUB NUMSUB)."""
    client = redis.asyncio.from_url(url)
    try:
        return int(dict(await client.pubsub_numsub(channel)).get(channel.encode(), 0))
    finally:
        await client.aclose()


async def wait_for(condition, timeout=3.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_published_messages_arrive_in_order(bus):
    received, _, _ = await collect(bus, "news")
    for number in range(20):
        await bus.publish("news", {"n": number, "text": "你好"})
    await wait_for(lambda: len(received) == 20)
    assert [m["n"] for m in received] == list(range(20)) and received[0]["text"] == "你好"


async def test_closed_subscription_receives_nothing(bus):
    received, _, subscription = await collect(bus, "gone")
    other, _, _ = await collect(bus, "gone")
    await subscription.close()
    await bus.publish("gone", {"x": 1})
    await wait_for(lambda: len(other) == 1)
    assert received == []


async def test_a_failing_handler_does_not_stop_the_others(bus):
    async def broken(message):
        raise RuntimeError("handler bug")

    await bus.subscribe("mixed", broken)
    received, _, _ = await collect(bus, "mixed")
    await bus.publish("mixed", {"ok": True})
    await wait_for(lambda: received == [{"ok": True}])


async def test_counter_counts_and_expires(bus):
    assert (await bus.incr("hits", ttl=0.3))[0] == 1
    count, remaining = await bus.incr("hits", ttl=0.3)
    assert count == 2 and 0 < remaining <= 0.3
    await asyncio.sleep(0.4)
    assert (await bus.incr("hits", ttl=0.3))[0] == 1


async def test_keys_with_expiry_and_only_if_absent(bus):
    assert await bus.set("lock", "a", ttl=0.3, only_if_absent=True)
    assert not await bus.set("lock", "b", ttl=0.3, only_if_absent=True)
    assert await bus.get("lock") == "a"
    await asyncio.sleep(0.4)
    assert await bus.get("lock") is None
    await bus.set("plain", "v")
    await bus.delete("plain")
    assert await bus.get("plain") is None


async def test_many_keys_are_read_in_order_in_one_call(bus):
    await bus.set("one", "1")
    await bus.set("gone", "x", ttl=0.1)
    await bus.set("three", "3")
    await asyncio.sleep(0.2)
    assert await bus.get_many(["one", "gone", "missing", "three"]) == ["1", None, None, "3"]
    assert await bus.get_many([]) == []


async def test_a_lock_is_let_go_and_renewed_only_by_its_owner(bus):
    assert await bus.set("turn-lock", "first", ttl=0.3, only_if_absent=True)
    assert not await bus.renew_if("turn-lock", "second", 5)
    assert not await bus.delete_if("turn-lock", "second")
    assert await bus.renew_if("turn-lock", "first", 5)
    await asyncio.sleep(0.4)  # past the first ttl: the renewal holds it
    assert await bus.get("turn-lock") == "first"
    assert await bus.delete_if("turn-lock", "first")
    assert await bus.get("turn-lock") is None
    # Expired and taken by someone else: the old owner neither renews nor deletes it.
    assert await bus.set("turn-lock", "first", ttl=0.1, only_if_absent=True)
    await asyncio.sleep(0.2)
    assert await bus.set("turn-lock", "second", ttl=5, only_if_absent=True)
    assert not await bus.delete_if("turn-lock", "first")
    assert not await bus.renew_if("turn-lock", "first", 5)
    assert await bus.get("turn-lock") == "second"
    assert not await bus.delete_if("missing", "first")


async def test_a_lock_is_acquired_with_its_conditions_and_claim_in_one_step(bus):
    await bus.set("admitted", "1")
    claim = ("message-id", "now", 5)
    taken = await bus.acquire("lock", "first", 5, present=["admitted"], absent=["queued"], then=claim)
    assert taken == (True, True)
    assert await bus.get("lock") == "first" and await bus.get("message-id") == "now"
    # Held: nothing else is looked at or claimed.
    assert await bus.acquire("lock", "second", 5, then=("other", "x", 5)) == (False, None)
    assert await bus.get("other") is None
    await bus.delete("lock")
    assert await bus.acquire("lock", "first", 5, present=["admitted"], then=claim) == (True, False)
    await bus.delete("lock")
    await bus.set("queued", "1")
    assert await bus.acquire("lock", "first", 5, present=["admitted"], absent=["queued"],
                             then=("new-id", "x", 5)) == (True, None)
    assert await bus.get("new-id") is None
    await bus.delete("lock")
    taken = await bus.acquire("lock", "first", 5, marks=[("running", "m", 5)], present=["admitted"],
                              absent=["queued"], then=("new-id", "x", 5))
    assert taken == (True, None) and await bus.members("running") == {"m"}
    await bus.delete("lock")
    await bus.delete("running")
    assert await bus.acquire("lock", "first", 5, present=["missing"]) == (True, None)
    await bus.delete("lock")
    marks = [("running", "a", 0.1), ("live", "b", 5)]
    assert await bus.acquire("lock", "first", 0.1, marks=marks) == (True, True)
    assert await bus.members("running") == {"a"} and await bus.members("live") == {"b"}
    assert await bus.acquire("lock", "second", 5, marks=[("running", "c", 5)]) == (False, None)
    await asyncio.sleep(0.2)
    assert await bus.get("lock") is None and await bus.members("running") == set()
    assert await bus.members("live") == {"b"}


async def test_a_lock_is_let_go_unless_marked_and_only_by_its_owner(bus):
    await bus.set("lock", "first", ttl=5)
    await bus.mark("running", "session", 30)
    await bus.set("queued", "1")
    # Marked: the mark goes, the lock and the member stay.
    assert not await bus.release_unless("lock", "first", "queued", unmark=("running", "session"))
    assert await bus.get("queued") is None and await bus.get("lock") == "first"
    assert await bus.members("running") == {"session"}
    assert await bus.release_unless("lock", "first", "queued", unmark=("running", "session"))
    assert await bus.get("lock") is None and await bus.members("running") == set()
    await bus.set("lock", "second", ttl=5)
    assert await bus.release_unless("lock", "first", "queued")
    assert await bus.get("lock") == "second"


async def test_redis_bus_is_shared_between_instances(redis_url, bus_prefix):
    first, second = RedisBus(redis_url, bus_prefix), RedisBus(redis_url, bus_prefix)
    try:
        received, _, _ = await collect(second, "fanout")
        await first.publish("fanout", {"from": "first"})
        await wait_for(lambda: received == [{"from": "first"}])
        await first.incr("shared-counter", ttl=10)
        assert (await second.incr("shared-counter", ttl=10))[0] == 2
    finally:
        await first.close()
        await second.close()


async def test_in_process_buses_are_not_shared(bus_prefix):
    first, second = InProcessBus(bus_prefix), InProcessBus(bus_prefix)
    await first.incr("c", ttl=10)
    assert (await second.incr("c", ttl=10))[0] == 1
    assert not first.shared
    await first.close()
    await second.close()


async def test_expiring_set_members_leave_by_themselves(bus):
    await bus.mark("online", "alice", ttl=0.3)
    await bus.mark("online", "bob", ttl=5)
    assert await bus.members("online") == {"alice", "bob"}
    await bus.unmark("online", "bob")
    await asyncio.sleep(0.4)
    assert await bus.members("online") == set()
    await bus.mark("online", "carol", ttl=0.3)
    await asyncio.sleep(0.2)
    await bus.mark("online", "carol", ttl=0.3)  # renewed before it expired
    await asyncio.sleep(0.2)
    assert await bus.members("online") == {"carol"}


async def test_streams_append_read_trim_and_expire(bus):
    assert await bus.stream_read("log") == []
    for number in range(5):
        await bus.stream_append("log", {"n": str(number), "text": "你好"})
    assert [entry["n"] for entry in await bus.stream_read("log")] == ["0", "1", "2", "3", "4"]
    assert (await bus.stream_read("log"))[0] == {"n": "0", "text": "你好"}
    for number in range(5, 300):
        await bus.stream_append("log", {"n": str(number)}, max_len=10)
    kept = [int(entry["n"]) for entry in await bus.stream_read("log")]
    assert kept[-10:] == list(range(290, 300)) and len(kept) < 300  # Redis trims approximately
    await bus.stream_append("log", {"n": "last"}, ttl=0.2)
    assert (await bus.stream_read("log"))[-1] == {"n": "last"}
    await asyncio.sleep(0.3)
    assert await bus.stream_read("log") == []
    await bus.stream_append("other", {"n": "1"})
    await bus.delete("other")
    assert await bus.stream_read("other") == []


async def test_a_stream_entry_is_appended_without_waiting_only_where_the_bus_can(bus):
    """The relay appends each frame with `stream_append_nowait` and falls back to the coroutine
    when it says False: then nothing may have been appended. On Redis the appends are sent
    without waiting, before any later command: a read that follows finds them, in order. Each
    one's `then` (the hub's delivery of the frame) runs once it is in, in order."""
    done: list[int] = []
    appended = [bus.stream_append_nowait("nowait", {"n": str(number)}, max_len=3,
                                         then=functools.partial(done.append, number)) for number in range(5)]
    assert appended == [True] * 5
    if bus.shared:  # submitted in order; trimmed approximately (at least 3 stay)
        assert done == []  # Redis has not answered yet
        numbers = [entry["n"] for entry in await bus.stream_read("nowait")]
        assert len(numbers) >= 3 and numbers == [str(n) for n in range(5 - len(numbers), 5)]
        assert done == [0, 1, 2, 3, 4]
    else:
        assert done == [0, 1, 2, 3, 4]  # in before returning
        assert [entry["n"] for entry in await bus.stream_read("nowait")] == ["2", "3", "4"]
        await bus.stream_append("nowait", {"n": "last"}, ttl=0.2)  # the coroutine keeps its ttl
        await asyncio.sleep(0.3)
        assert await bus.stream_read("nowait") == []


async def test_appends_without_waiting_are_declined_while_redis_is_behind_and_fail_later_appends(
        restartable_redis, bus_prefix):
    """A burst's frames may not pile up unawaited ahead of every other command: past
    NOWAIT_BACKLOG waiting commands the caller is told to wait. An append that failed with
    nobody waiting is raised by `stream_appended` (a reply then fails as a frame that waited);
    its `then` still runs (the devices on this instance see what the reply's end will cover:
    with Redis away no resume reads the replay)."""
    bus = RedisBus(restartable_redis.url, bus_prefix)
    try:
        answers = [bus.stream_append_nowait("many", {"n": str(n)}) for n in range(NOWAIT_BACKLOG + 5)]
        assert answers == [True] * NOWAIT_BACKLOG + [False] * 5
        assert [entry["n"] for entry in await bus.stream_read("many")] == [str(n) for n in range(NOWAIT_BACKLOG)]
        await bus.stream_appended("many")  # all in: nothing to raise
        restartable_redis.kill()
        delivered: list[str] = []
        assert bus.stream_append_nowait("lost", {"n": "1"}, then=functools.partial(delivered.append, "lost"))
        with pytest.raises(redis_exceptions().ConnectionError):
            await bus.stream_appended("lost")
        await asyncio.sleep(0)
        assert delivered == ["lost"]
    finally:
        await bus.close()


async def test_a_restarted_stream_returns_its_old_entries_only_when_unfinished(bus):
    finished = ("kind", "end")
    assert await bus.stream_restart("turn", {"kind": "begin", "turn": "t1"}, 60, finished=finished) == []
    await bus.stream_append("turn", {"kind": "frame", "turn": "t1"})
    await bus.stream_append("turn", {"kind": "end", "turn": "t1"})
    assert await bus.stream_restart("turn", {"kind": "begin", "turn": "t2"}, 60, finished=finished) == []
    assert await bus.stream_read("turn") == [{"kind": "begin", "turn": "t2"}]
    await bus.stream_append("turn", {"kind": "frame", "turn": "t2"})
    old = await bus.stream_restart("turn", {"kind": "begin", "turn": "t3"}, 0.2, finished=finished)
    assert old == [{"kind": "begin", "turn": "t2"}, {"kind": "frame", "turn": "t2"}]
    assert await bus.stream_read("turn") == [{"kind": "begin", "turn": "t3"}]
    await asyncio.sleep(0.3)
    assert await bus.stream_read("turn") == []


async def test_streams_are_shared_through_redis(redis_url, bus_prefix):
    first, second = RedisBus(redis_url, bus_prefix), RedisBus(redis_url, bus_prefix)
    try:
        await first.stream_append("shared-stream", {"from": "first"}, ttl=10)
        assert await second.stream_read("shared-stream") == [{"from": "first"}]
    finally:
        await first.close()
        await second.close()


class RestartableRedis:
    """A redis-server of this test's own (the one tests/support/servers.py starts the shared
    one from), killed and started again on the same port."""

    def __init__(self):
        self.port = free_port()
        self.directory = ""
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    async def start(self) -> None:
        from gateway.embedded_bus import redis_server_binary

        server = redis_server_binary()
        if server is None:
            pytest.skip(f"a Redis to kill and start again: {NO_REDIS_SERVER}")
        self.directory = self.directory or tempfile.mkdtemp(prefix="gateway-test-redis-")
        self.process = subprocess.Popen(
            [server, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.directory], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while not await loop.run_in_executor(None, redis_answers, self.url):
            assert loop.time() < deadline and self.process.poll() is None, "redis-server did not start"
            await asyncio.sleep(0.05)

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(5)

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.kill()
        if self.directory:
            shutil.rmtree(self.directory, ignore_errors=True)


@pytest.fixture
async def restartable_redis():
    server = RestartableRedis()
    await server.start()
    yield server
    server.close()


@pytest.mark.slow
async def test_a_redis_that_goes_away_is_an_outage_and_subscriptions_resume_when_it_returns(
        restartable_redis, bus_prefix, caplog):
    bus = RedisBus(restartable_redis.url, bus_prefix)
    try:
        received, _, _ = await collect(bus, "news")
        await bus.publish("news", {"n": 1})
        await wait_for(lambda: len(received) == 1)

        restartable_redis.kill()
        with pytest.raises(Exception) as refused:
            await bus.set("key", "value")
        assert unavailable(refused.value)  # what the error middleware answers as 503 bus_unavailable
        await asyncio.sleep(1.0)  # the subscription's reader finds it gone and retries
        assert len([r for r in caplog.records if "lost the Redis subscription" in r.getMessage()]) == 1

        await restartable_redis.start()
        assert await bus.set("key", "value")  # commands reconnect by themselves

        async def delivered() -> bool:
            await bus.publish("news", {"n": 2})
            await asyncio.sleep(0.1)
            return bool(received[1:])

        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5  # RESUBSCRIBE_MAX_DELAY and a margin
        while not await delivered():
            assert loop.time() < deadline, "the subscription never resumed"
        assert received[1]["n"] == 2
    finally:
        await bus.close()


@pytest.mark.slow
async def test_a_subscription_closed_while_redis_is_away_closes_and_stays_closed(restartable_redis, bus_prefix):
    """A hub closing at shutdown (or a connection leaving) while Redis is down must not fail
    for it (a teardown that raised took a whole test run down), nor be subscribed again when
    Redis returns."""
    bus, sender = RedisBus(restartable_redis.url, bus_prefix), RedisBus(restartable_redis.url, bus_prefix)
    try:
        gone, _, subscription = await collect(bus, "inbox:gone")
        kept, _, _ = await collect(bus, "inbox:kept")
        restartable_redis.kill()
        await subscription.close()
        await restartable_redis.start()
        await bus.ensure_listening()
        await sender.publish("inbox:kept", {"n": 1})
        await wait_for(lambda: len(kept) == 1)
        assert bus.prefix + "inbox:gone" not in {
            name if isinstance(name, str) else name.decode() for name in bus._pubsub.channels}
        await sender.publish("inbox:gone", {"n": 1})
        await asyncio.sleep(0.2)
        assert gone == []
    finally:
        await bus.close()
        await sender.close()


async def test_fan_out_reaches_the_other_holders_only_after_appending_its_record(bus):
    """Instances mark themselves holders (of a user's devices); a message fanned out goes to
    every live holder's channel but the sender's, and its record is in the stream first."""
    mine, _, _ = await collect(bus, "inbox:me")
    theirs, _, _ = await collect(bus, "inbox:them")
    gone, _, _ = await collect(bus, "inbox:gone")
    await bus.mark("holders:u", "me", 10)
    await bus.mark("holders:u", "them", 10)
    await bus.mark("holders:u", "gone", 0.05)  # an instance that died: its mark expires
    await asyncio.sleep(0.1)
    await bus.fan_out("holders:u", "inbox:", "me", {"frame": 1}, record=("replay:u", {"seq": "1"}, 100))
    await bus.fan_out("holders:u", "inbox:", "me", {"frame": 2})
    await wait_for(lambda: len(theirs) == 2)
    assert [message["frame"] for message in theirs] == [1, 2]
    assert await bus.stream_read("replay:u") == [{"seq": "1"}]
    await asyncio.sleep(0.1)
    assert mine == [] and gone == []
    # Nobody else holds the user: nothing is published, the record is still kept.
    await bus.fan_out("holders:nobody", "inbox:", "me", {"frame": 3}, record=("replay:u", {"seq": "2"}, 100))
    assert await bus.stream_read("replay:u") == [{"seq": "1"}, {"seq": "2"}]


async def test_a_holder_joining_or_leaving_tells_the_other_live_holders_and_learns_who_they_are(bus):
    """The hub's holders tell each other (gateway/hub_peers.py): the mark and the notice are
    one step, and the answer names the holders told (not the one itself, not an expired one)."""
    theirs, _, _ = await collect(bus, "inbox:them")
    gone, _, _ = await collect(bus, "inbox:gone")
    await bus.mark("holders:u", "them", 10)
    await bus.mark("holders:u", "gone", 0.05)
    await asyncio.sleep(0.1)
    assert await bus.hold_and_tell("holders:u", "me", 10, "inbox:", {"kind": "join"}) == {"them"}
    assert await bus.members("holders:u") == {"me", "them"}
    assert await bus.hold_and_tell("holders:u", "me", 10, "inbox:", {"kind": "join"}) == {"them"}
    assert await bus.hold_and_tell("holders:u", "me", None, "inbox:", {"kind": "left"}) == {"them"}
    assert await bus.members("holders:u") == {"them"}
    await wait_for(lambda: len(theirs) == 3)
    assert [message["kind"] for message in theirs] == ["join", "join", "left"] and gone == []
    assert await bus.hold_and_tell("holders:nobody", "me", 10, "inbox:", {"kind": "join"}) == set()


@pytest.mark.slow
async def test_a_bus_that_returns_is_listened_to_at_once_when_asked_and_its_listeners_told(
        restartable_redis, bus_prefix):
    """A hub about to mark itself a holder asks the bus to listen again first (the reader alone
    retries only every RESUBSCRIBE_MAX_DELAY); the marks Redis lost are made again by the
    listeners of `on_restored`."""
    bus, sender = RedisBus(restartable_redis.url, bus_prefix), RedisBus(restartable_redis.url, bus_prefix)
    restored = asyncio.Event()

    async def mark_again() -> None:
        restored.set()

    bus.on_restored(mark_again)
    try:
        received, _, _ = await collect(bus, "inbox:me")
        restartable_redis.kill()
        await asyncio.sleep(1.5)  # the reader finds Redis gone and backs off
        await restartable_redis.start()
        await bus.ensure_listening()
        # Subscribed again when ensure_listening returns, not at the reader's next try.
        assert await subscribers(restartable_redis.url, bus_prefix + "inbox:me") == 1
        await asyncio.wait_for(restored.wait(), 5)
        await bus.mark("holders:u", "me", 10)
        await sender.fan_out("holders:u", "inbox:", "them", {"frame": 1})
        await wait_for(lambda: len(received) == 1, timeout=5.0)
    finally:
        await bus.close()
        await sender.close()


class RecordingRedisBus(RedisBus):
    """A RedisBus that keeps what it sent: each batch with its results, each pipeline, and
    each command run alone (a batch of one, or again after Redis forgot its script)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batches, self.pipelines, self.alone = [], [], []

    async def _run_many(self, commands):
        results = await super()._run_many(commands)
        self.batches.append((list(commands), results))
        return results

    async def _pipeline(self, commands):
        self.pipelines.append(list(commands))
        return await super()._pipeline(commands)

    async def _run_one(self, command):
        self.alone.append(command)
        return await super()._run_one(command)

    def folds(self, pipeline):
        """How many frames each folded call of `pipeline` carried."""
        return [len(json.loads(args[1][0])) for name, args, _ in pipeline if name is self._frames]


async def test_frames_of_many_tasks_are_folded_into_one_call_and_keep_their_order(redis_url, bus_prefix):
    """Fan-outs and plain appends of many turns streaming at once go out as one script call
    per batch; each turn's frames reach their channel and streams in order, and each
    submitter is answered its own result (the fan-out's count, the entry's id)."""
    bus, receiver = RecordingRedisBus(redis_url, bus_prefix), RedisBus(redis_url, bus_prefix)
    tasks, frames = 12, 25
    try:
        inboxes = {}
        for task in range(tasks):
            # Task t's user is held by t % 3 other instances (and by the sender, not counted).
            await bus.mark(f"holders:{task}", "me", 30)
            for other in range(task % 3):
                inboxes[task, other] = (await collect(receiver, f"inbox:{task}-{other}:"))[0]
                await bus.mark(f"holders:{task}", f"{task}-{other}:", 30)

        async def turn(task):
            for frame in range(frames):
                if frame % 3 == 2:
                    await bus.fan_out(f"holders:{task}", "inbox:", "me", {"task": task, "frame": frame})
                else:
                    await bus.fan_out(f"holders:{task}", "inbox:", "me", {"task": task, "frame": frame},
                                      record=(f"replay:{task}", {"frame": str(frame), "text": "你好 😀"}, 1000))
                await bus.stream_append(f"log:{task}", {"frame": str(frame)})

        await asyncio.gather(*(turn(task) for task in range(tasks)))

        for task in range(tasks):
            replayed = await bus.stream_read(f"replay:{task}")
            assert replayed == [{"frame": str(f), "text": "你好 😀"} for f in range(frames) if f % 3 != 2]
            assert await bus.stream_read(f"log:{task}") == [{"frame": str(f)} for f in range(frames)]
        for (task, _), received in inboxes.items():
            await wait_for(lambda: len(received) == frames)
            assert received == [{"task": task, "frame": frame} for frame in range(frames)]

        folds = [size for pipeline in bus.pipelines for size in bus.folds(pipeline)]
        assert folds and max(folds) >= tasks  # a batch's frames went out as one call
        # Every submitter got its own result: a fan-out the number of holders it reached, an
        # append the id Redis gave its entry.
        ids = {}
        for task in range(tasks):
            for entry_id, fields in await bus.client.xrange(f"{bus_prefix}log:{task}"):
                ids[f"{bus_prefix}log:{task}", fields["frame"]] = entry_id
        checked = 0
        for commands, results in bus.batches:
            assert len(results) == len(commands)
            for (name, args, _), result in zip(commands, results):
                if name is bus._fan_out:
                    task = int(args[0][0].rsplit(":", 1)[1])
                    assert result == task % 3
                    checked += 1
                elif name == "xadd":
                    assert result == ids[args[0], args[1]["frame"]]
                    checked += 1
        assert checked > tasks * frames  # most frames went in batches, not alone
    finally:
        await bus.close()
        await receiver.close()


async def test_a_frame_that_fails_fails_alone_in_its_folded_call(redis_url, bus_prefix):
    bus, receiver = RecordingRedisBus(redis_url, bus_prefix), RedisBus(redis_url, bus_prefix)
    try:
        received, _, _ = await collect(receiver, "inbox:them")
        await bus.mark("holders:u", "them", 30)
        await bus.set("not-a-stream", "a string")
        bus.pipelines.clear()
        results = await asyncio.gather(
            bus.stream_append("log", {"n": "1"}),
            bus.stream_append("not-a-stream", {"n": "2"}),
            bus.fan_out("holders:u", "inbox:", "me", {"frame": 1}, record=("log", {"n": "3"}, 100)),
            bus.fan_out("holders:u", "inbox:", "me", {"frame": 2}, record=("not-a-stream", {"n": "4"}, 100)),
            bus.fan_out("holders:u", "inbox:", "me", {"frame": 3}),
            bus.stream_append("log", {"n": "5"}, max_len=100),
            return_exceptions=True)
        assert [bus.folds(pipeline) for pipeline in bus.pipelines] == [[6]]  # one call for all six
        assert results[0] is None and results[2] is None and results[4] is None and results[5] is None
        for failed in (results[1], results[3]):
            assert isinstance(failed, redis_exceptions().ResponseError) and "WRONGTYPE" in str(failed)
        assert await bus.stream_read("log") == [{"n": "1"}, {"n": "3"}, {"n": "5"}]
        # The fan-out whose record could not be kept published nothing, as it did alone.
        await wait_for(lambda: len(received) == 2)
        await asyncio.sleep(0.05)
        assert received == [{"frame": 1}, {"frame": 3}]
        assert await bus.get("not-a-stream") == "a string"
    finally:
        await bus.close()
        await receiver.close()


@pytest.mark.slow
async def test_folded_frames_still_go_out_when_redis_forgets_the_script_mid_run(restartable_redis, bus_prefix):
    """A Redis that restarted (here: SCRIPT FLUSH, on a server of the test's own) no longer
    knows the script: the folded call is made again, which loads it, and nothing is lost or
    reordered."""
    bus = RecordingRedisBus(restartable_redis.url, bus_prefix)
    tasks, frames = 8, 40
    halfway = asyncio.Event()
    try:
        async def turn(task):
            for frame in range(frames):
                if task == 0 and frame == frames // 2:
                    halfway.set()
                await bus.fan_out(f"holders:{task}", "inbox:", "me", {"frame": frame},
                                  record=(f"replay:{task}", {"frame": str(frame)}, None))
                await bus.stream_append(f"log:{task}", {"frame": str(frame)})

        async def forget() -> None:
            await halfway.wait()
            await bus.client.script_flush()  # not batched: it goes out between two batches

        await asyncio.gather(forget(), *(turn(task) for task in range(tasks)))
        expected = [{"frame": str(frame)} for frame in range(frames)]
        for task in range(tasks):
            assert await bus.stream_read(f"replay:{task}") == expected
            assert await bus.stream_read(f"log:{task}") == expected
        assert any(name is bus._frames for name, _, _ in bus.alone)  # a fold was made again
        assert all(len(results) == len(commands) for commands, results in bus.batches)
    finally:
        await bus.close()
