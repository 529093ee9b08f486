"""The turn machine across instances when things go wrong: an instance that dies in the middle
of a turn, and two devices on two instances sending in the same instant as a turn ends.

Both run real gateway instances sharing PostgreSQL and Redis, the real AI core and the scripted
model (tests/chat/conftest.py); nothing of the project is patched."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from gateway.config import PROJECT_ROOT, Config
from gateway.database import execute, fetch_all
from plugins.chat import store
from gateway.redis_bus import RedisBus
from plugins.chat.frames import now_ms
from plugins.chat.keys import RUNNING_TURNS, lock_key, message_key, session_key
from plugins.chat.replay import Replay
from plugins.sessions.contract import CONVERSATIONS
from tests.chat.conftest import ADMIN, context_of, eventually, receive_until, registered, token_for
from tests.support.servers import free_port

# An instance in a process of its own, built like `make_gateway` builds one (the production
# factory, the same plugins, the configuration it is handed) and served like `gateway serve`.
INSTANCE_MAIN = """
import json, logging, sys
from aiohttp import web
from gateway.app import create_app
from gateway.config import Config
from plugins.auth import tokens_plugin
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.chat import plugin as chat_plugin
from plugins.files import files_plugin
from plugins.sessions import plugin as sessions_plugin

logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                    format="%(asctime)s %(levelname)s %(name)s: %(message)s")
app = create_app("gateway", Config(json.loads(sys.argv[1])),
                 plugins=[tokens_plugin, sessions_plugin, files_plugin, ai_core_client_plugin, chat_plugin])
web.run_app(app, host="127.0.0.1", port=int(sys.argv[2]), print=None)
"""


class InstanceProcess:
    """A gateway instance in a child process, so that it can die the way a process dies."""

    def __init__(self, process: asyncio.subprocess.Process, port: int, log: Path):
        self.process, self.port, self.log = process, port, log

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    async def kill(self) -> None:
        """SIGKILL: no shutdown hook, no `finally`, no lifespan of any plugin runs; the kernel
        closes its sockets (Redis, PostgreSQL, the AI core stream, the devices' WebSockets)."""
        self.process.kill()
        await asyncio.wait_for(self.process.wait(), 10)


@pytest.fixture
async def spawn_instance(database_url, tmp_path):
    """Start gateway instances in child processes; whatever is still alive is killed at the end
    (before the test's database is dropped)."""
    started: list[InstanceProcess] = []

    async def spawn(config: Config) -> InstanceProcess:
        port = free_port()
        log = tmp_path / f"instance-{len(started)}.log"
        with log.open("wb") as output:
            # The complete configuration the test built, exactly as an in-process instance gets it.
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-c", INSTANCE_MAIN, json.dumps(config._values), str(port),
                cwd=PROJECT_ROOT, stdout=output, stderr=subprocess.STDOUT)
        instance = InstanceProcess(process, port, log)
        started.append(instance)

        async def healthy() -> bool:
            assert process.returncode is None, f"the instance exited:\n{instance.output()}"
            try:
                async with aiohttp.ClientSession() as http, \
                        http.get(instance.base_url + "/api/v1/health") as answer:
                    return answer.status == 200
            except aiohttp.ClientConnectionError:
                return False

        await eventually(healthy, timeout=30)
        return instance

    yield spawn
    for instance in started:
        if instance.process.returncode is None:
            instance.process.kill()
            await instance.process.wait()


def chat_query(token: str, session_id: str) -> str:
    return f"/ws/chat?token={token}&session_id={session_id}"


async def queue_rows(client, session_id: str) -> list[tuple[str, str]]:
    rows = await fetch_all(context_of(client).db, "SELECT text, status FROM chat_turn_queue "
                                                  "WHERE session_id = %s ORDER BY id", (session_id,))
    return [(row["text"], row["status"]) for row in rows]


async def stored_messages(client, session_id: str) -> list[tuple[str, str]]:
    conversations = context_of(client).contracts.require(CONVERSATIONS)
    return [(m["role"], m["content"]) for m in await conversations.all_messages("admin", session_id)]


def frames_of_turn(frames: list[dict], turn_id: str) -> list[dict]:
    """The turn's frames to all devices (they carry `seq`; `queued` and errors to the sender do not)."""
    return [frame for frame in frames if frame.get("turn_id") == turn_id and "seq" in frame]


# ---------------------------------------------------------------------------------------- 1

DEAD_SESSION = "failover"
# The dead instance's lock must expire within the test, and the survivor must look soon after.
FAST_FAILOVER = {"lock_ttl": 1.5, "sweep_interval": 0.2}


@pytest.fixture
def two_instances(make_gateway, make_config, spawn_instance, database_url, ai_core_url, chat_settings,
                  redis_url, bus_prefix):
    """B (the survivor, in this process) and A (the doomed, in a child process that a test kills),
    sharing PostgreSQL and Redis, with a lock that expires within the test. `doomed_settings`:
    more of A's chat settings."""
    async def start(**doomed_settings):
        shared = {"bus.redis_url": redis_url, "bus.prefix": bus_prefix}
        survivor = await make_gateway(overrides=shared, settings=FAST_FAILOVER)
        doomed = await spawn_instance(make_config({
            "database.url": database_url, "peers.ai_core_url": ai_core_url,
            "plugins.chat": {**chat_settings, **FAST_FAILOVER, **doomed_settings}, **shared}))
        return survivor, doomed

    return start


@pytest.mark.parametrize("queued_from", ["survivor", "dead instance"])
async def test_a_turn_queued_behind_an_instance_that_dies_runs_on_the_survivor(queued_from, two_instances, provider):
    """Instance A runs a turn (the model holds it mid-reply) and a second message waits behind
    it; then A *dies*: its process is killed with SIGKILL, so none of its code runs again — the
    session's turn lock stays on Redis until its TTL runs out, its turn's queue row stays
    `running`, its connections drop. Promised (docs/chat.md, "Across instances"): once the lock
    expires, B's sweeper takes the session, marks the dead turn `abandoned`, runs the queued
    message and every device on B gets its reply; the dead turn is not run again, nothing is
    stored twice. `queued_from`: the device that sent the waiting message is on B (the sender
    itself gets the reply) or on A (it is gone with A; B's device gets the echo, then the reply)."""
    survivor, doomed = await two_instances()
    bus = context_of(survivor).bus
    token = token_for(survivor, ADMIN)  # signed with the secret both instances share
    provider.gate.clear()

    async with aiohttp.ClientSession() as http, \
            http.ws_connect(doomed.base_url + chat_query(token, DEAD_SESSION)) as phone_on_a, \
            survivor.ws_connect(chat_query(token, DEAD_SESSION)) as laptop_on_b:
        await registered(phone_on_a, laptop_on_b)
        sender = laptop_on_b if queued_from == "survivor" else phone_on_a
        # A relays the reply; the model then holds it
        queued, before_death = await hold_a_turn_and_queue_another(phone_on_a, sender, survivor, DEAD_SESSION)
        seen = before_death if sender is laptop_on_b else []

        await doomed.kill()
        # A died rather than stopped: it let go of nothing.
        assert await bus.get(lock_key(session_key("admin", DEAD_SESSION))) not in (None, context_of(survivor).hub.instance_id)
        assert await queue_rows(survivor, DEAD_SESSION) == [("first", "running"), ("second", "queued")]
        provider.gate.set()  # the model would answer the next turn at once

        # What B's device gets: the end of A's reply, cut off where A died, then the queued turn.
        seen += await receive_the_cut_off_end_and_the_queued_turn(laptop_on_b, survivor, DEAD_SESSION,
                                                                  "B's device after A died")

    # B's device saw the echo of A's message; of "second" only when another device sent it.
    assert_dead_turn_ended_then_queued_turn_ran(seen, queued["turn_id"], provider.reply,
                                                ["first"] if queued_from == "survivor" else ["first", "second"],
                                                doomed.output())

    # The dead turn was abandoned, not run again; the queued one ran once, with the history A stored.
    assert await queue_rows(survivor, DEAD_SESSION) == [("first", "abandoned"), ("second", "done")]
    assert [request["messages"][-1]["content"] for request in provider.requests] == ["first", "second"]
    history = provider.requests[-1]["messages"]
    assert [m["content"] for m in history if m["role"] == "user"] == ["first", "second"]
    assert await stored_messages(survivor, DEAD_SESSION) == [
        ("user", "first"), ("user", "second"), ("assistant", provider.reply)]

    async def lock_let_go() -> bool:
        return await bus.get(lock_key(session_key("admin", DEAD_SESSION))) is None

    await eventually(lock_let_go)


async def hold_a_turn_and_queue_another(runner, sender, reader, session: str) -> tuple[dict, list[dict]]:
    """`runner` sends "first", whose reply the model holds after its first chunks (the turn's row
    is `running` and its message stored, read through the gateway `reader`); then `sender` sends
    "second", which waits. Returns its `queued` frame and all `sender` saw up to it."""
    await runner.send_json({"type": "message", "content": "first", "client_msg_id": "first"})
    await receive_until(runner, "stream_chunk")

    async def first_turn_recorded() -> bool:
        return (await queue_rows(reader, session) == [("first", "running")]
                and await stored_messages(reader, session) == [("user", "first")])

    await eventually(first_turn_recorded)
    await sender.send_json({"type": "message", "content": "second", "client_msg_id": "second"})
    before = await receive_until(sender, "queued")
    assert before[-1]["client_msg_id"] == "second"
    return before[-1], before


async def receive_the_cut_off_end_and_the_queued_turn(device, reader, session: str, who: str,
                                                      output: str = "") -> list[dict]:
    """What a surviving device gets once the dead instance's turn lock expires: up to the cut-off
    turn's stream_end, then up to the queued turn's. A timeout says what the queue holds (read
    through the gateway `reader`) and `output`."""
    try:
        return (await receive_until(device, "stream_end", timeout=FAST_FAILOVER["lock_ttl"] + 10)
                + await receive_until(device, "stream_end"))
    except asyncio.TimeoutError:
        raise AssertionError(f"no reply reached {who}; queue: {await queue_rows(reader, session)}"
                             + (f"\n{output}" if output else "")) from None


def assert_dead_turn_ended_then_queued_turn_ran(seen: list[dict], queued_turn_id: str, reply: str,
                                                echoes: list[str], output: str) -> None:
    """What a surviving device saw when the instance running a turn died with another queued:
    the dead turn (two chunks had arrived) ended with `finish_reason: "error"` and the text that
    had arrived, before the queued turn's frames, which run in full and in order; no error; the
    echoes of the users' messages `echoes`."""
    recovered = frames_of_turn(seen, queued_turn_id)
    assert recovered, f"the queued turn never ran on the survivor:\n{output}"
    assert seen[-1] is recovered[-1]
    assert [frame["type"] for frame in recovered][0] == "stream_start"
    assert [frame["seq"] for frame in recovered] == list(range(len(recovered)))
    assert recovered[-1]["finish_reason"] == "stop" and recovered[-1]["text"] == reply
    assert not [frame for frame in seen if frame["type"] == "error"]
    cut_off = [frame for frame in seen if "seq" in frame and frame["turn_id"] != queued_turn_id]
    assert [frame["type"] for frame in cut_off] == ["stream_start", "stream_chunk", "stream_chunk", "stream_end"]
    assert [frame["seq"] for frame in cut_off] == [0, 1, 2, 3]
    assert cut_off[-1]["finish_reason"] == "error"
    assert cut_off[-1]["text"] == "".join(frame["content"] for frame in cut_off[1:-1])
    assert seen.index(cut_off[-1]) < seen.index(recovered[0])
    assert [frame["content"] for frame in seen if frame["type"] == "response"] == echoes


async def test_a_reply_cut_off_by_a_dead_instance_is_ended_though_no_message_follows(two_instances, provider):
    """A dies mid-reply and nobody sends anything after: once A's lock expires, B's sweeper ends
    the reply for B's device (stream_end, `finish_reason: "error"`, the text that had arrived),
    records it in the replay buffer for devices that connect later, and marks the turn's row
    abandoned; the turn is not run again."""
    survivor, doomed = await two_instances()
    bus = context_of(survivor).bus
    token = token_for(survivor, ADMIN)
    provider.gate.clear()

    async with aiohttp.ClientSession() as http, \
            http.ws_connect(doomed.base_url + chat_query(token, DEAD_SESSION)) as phone_on_a, \
            survivor.ws_connect(chat_query(token, DEAD_SESSION)) as laptop_on_b:
        await registered(phone_on_a, laptop_on_b)
        await phone_on_a.send_json({"type": "message", "content": "first", "client_msg_id": "first"})
        await receive_until(phone_on_a, "stream_chunk")
        seen = await receive_until(laptop_on_b, "stream_chunk")  # the echo, then A's frames
        seen += await receive_until(laptop_on_b, "stream_chunk")  # the model holds after two pieces
        await doomed.kill()
        provider.gate.set()
        try:
            seen += await receive_until(laptop_on_b, "stream_end", timeout=FAST_FAILOVER["lock_ttl"] + 10)
        except asyncio.TimeoutError:
            raise AssertionError("A's reply was never ended for B's device") from None

    turn = [frame for frame in seen if "seq" in frame]
    assert [frame["type"] for frame in turn] == ["stream_start", "stream_chunk", "stream_chunk", "stream_end"]
    assert [frame["seq"] for frame in turn] == [0, 1, 2, 3]
    assert turn[-1]["finish_reason"] == "error"
    assert turn[-1]["text"] == "".join(frame["content"] for frame in turn[1:3]) != ""

    async def abandoned() -> bool:
        return (await queue_rows(survivor, DEAD_SESSION) == [("first", "abandoned")]
                and await bus.get(lock_key(session_key("admin", DEAD_SESSION))) is None)

    await eventually(abandoned)
    assert len(provider.requests) == 1  # not run again
    assert await stored_messages(survivor, DEAD_SESSION) == [("user", "first")]
    # A device that saw the reply up to its last chunk and reconnects now is replayed the end.
    after = f"{turn[-1]['turn_id']}:{turn[2]['seq']}"
    async with survivor.ws_connect(chat_query(token, DEAD_SESSION) + f"&after={after}") as phone_again:
        replayed = await receive_until(phone_again, "stream_end")
    assert replayed == [turn[-1]]


async def test_a_message_taken_by_an_instance_that_died_before_storing_it_runs_when_sent_again(
        two_instances, provider):
    """An idle session's turn takes the message's client_msg_id on the bus and calls the AI core
    before anything is written (docs/chat.md, "How a turn starts"). An instance killed in that
    moment leaves the id taken, no queue row and no stored message. The device, reconnected to
    the survivor, sends the message again with the same id once the dead instance's lock is gone:
    it must be answered and stored once, not refused as a re-send of a message that was received."""
    survivor, doomed = await two_instances(store_after=30)
    token = token_for(survivor, ADMIN)
    bus = context_of(survivor).bus

    async def lock_free() -> bool:
        return await bus.get(lock_key(session_key("admin", DEAD_SESSION))) is None

    async with aiohttp.ClientSession() as http, \
            http.ws_connect(doomed.base_url + chat_query(token, DEAD_SESSION)) as phone:
        # A first turn, so that the bus vouches for the session and the next one starts fast.
        await phone.send_json({"type": "message", "content": "zero", "client_msg_id": "zero"})
        await receive_until(phone, "stream_end")
        # Sent once the lock is let go (with Redis that takes round trips after stream_end), so
        # that the message finds the session idle rather than queues behind the ending turn.
        await eventually(lock_free)
        provider.hold_after = 0
        provider.gate.clear()
        provider.received.clear()
        await phone.send_json({"type": "message", "content": "lost", "client_msg_id": "lost"})
        await asyncio.wait_for(provider.received.wait(), 10)  # the model is asked; nothing is written
        assert await queue_rows(survivor, DEAD_SESSION) == [("zero", "done")]
        await doomed.kill()
    assert [role for role, _ in await stored_messages(survivor, DEAD_SESSION)] == ["user", "assistant"]
    provider.gate.set()
    await eventually(lock_free, timeout=FAST_FAILOVER["lock_ttl"] + 5)
    async with survivor.ws_connect(chat_query(token, DEAD_SESSION)) as phone_again:
        await phone_again.send_json({"type": "message", "content": "lost", "client_msg_id": "lost"})
        # The dead turn (it had sent its stream_start) is ended first: by the sweeper once A's lock
        # expired (before this device connected: it is not replayed a finished turn it never saw),
        # or, when the re-send comes first, before the re-sent turn's stream_start. Then the re-send runs.
        frames = await receive_until(phone_again, "stream_end")
        if frames[-1]["finish_reason"] == "error":
            assert frames[-1]["text"] == "" and frames[-1]["seq"] == 1
            dead = frames[-1]["turn_id"]
            frames = await receive_until(phone_again, "stream_end")
            assert frames[-1]["turn_id"] != dead
        assert not [frame for frame in frames if frame["type"] == "error"]
        assert frames[-1]["finish_reason"] == "stop" and frames[-1]["text"] == provider.reply
        # Sent a third time, now that it is stored: refused as a re-send (no frame), the session stays idle.
        await phone_again.send_json({"type": "message", "content": "lost", "client_msg_id": "lost"})
        await phone_again.send_json({"type": "ping"})
        assert [frame["type"] for frame in await receive_until(phone_again, "pong")] == ["pong"]

    assert await stored_messages(survivor, DEAD_SESSION) == [
        ("user", "zero"), ("assistant", provider.reply), ("user", "lost"), ("assistant", provider.reply)]
    assert await queue_rows(survivor, DEAD_SESSION) == [("zero", "done"), ("lost", "done")]
    assert [request["messages"][-1]["content"] for request in provider.requests] == ["zero", "lost", "lost"]


async def test_a_running_row_left_without_its_message_does_not_refuse_the_message_sent_again(make_gateway, provider):
    """What a killed instance leaves when it wrote the turn's queue row but not yet the user's
    message (they are written together): a `running` row holding the client_msg_id, no message.
    A fresh instance (its bus knows nothing, so the database decides) must run the message sent
    again with that id, and record the dead turn as abandoned."""
    gateway = await make_gateway()
    token = token_for(gateway, ADMIN)
    db = context_of(gateway).db
    async with gateway.ws_connect(chat_query(token, DEAD_SESSION)) as phone:
        await store.enqueue(db, turn_id="dead0000turn0000", session_id=DEAD_SESSION,
                            user_id=ADMIN.user_id, text="lost", mode="text", attachments=[], client_msg_id="lost",
                            sender_connection=None, running=True)
        # Younger than a turn lock's lifetime, the row may belong to a turn that still runs.
        await phone.send_json({"type": "message", "content": "lost", "client_msg_id": "lost"})
        await phone.send_json({"type": "ping"})
        assert [frame["type"] for frame in await receive_until(phone, "pong")] == ["pong"]
        await execute(db, "UPDATE chat_turn_queue SET created_at = now() - interval '1 minute' "
                          "WHERE turn_id = 'dead0000turn0000'")
        await phone.send_json({"type": "message", "content": "lost", "client_msg_id": "lost"})
        frames = await receive_until(phone, "stream_end")
    assert not [frame for frame in frames if frame["type"] == "error"]
    assert frames[-1]["finish_reason"] == "stop"
    assert await stored_messages(gateway, DEAD_SESSION) == [("user", "lost"), ("assistant", provider.reply)]
    assert await queue_rows(gateway, DEAD_SESSION) == [("lost", "abandoned"), ("lost", "done")]


async def test_an_id_another_instance_just_took_is_not_taken_over(make_gateway, provider):
    """Between taking a message's id on the bus and committing its queue row, an instance holds
    the id with nothing written (a message queued behind a busy session looks like this). A
    re-send of that message to an idle session in that moment must be refused, not run twice."""
    gateway = await make_gateway()
    bus = context_of(gateway).bus
    async with gateway.ws_connect(chat_query(token_for(gateway, ADMIN), DEAD_SESSION)) as phone:
        await phone.send_json({"type": "message", "content": "zero", "client_msg_id": "zero"})
        await receive_until(phone, "stream_end")
        await bus.set(message_key(session_key("admin", DEAD_SESSION), "pending"), str(now_ms()), ttl=60)
        await phone.send_json({"type": "message", "content": "pending", "client_msg_id": "pending"})
        await phone.send_json({"type": "message", "content": "after", "client_msg_id": "after"})
        frames = await receive_until(phone, "stream_end")
        assert frames[-1]["finish_reason"] == "stop"
        # (`after` may be queued for a moment: the refused re-send looks at the queue first.)
        assert [frame["type"] for frame in frames if frame["type"] not in ("stream_chunk", "queued")] == [
            "stream_start", "review", "stream_end"]
    # Had the re-send run, the model would have been asked for it before the message after it.
    assert [request["messages"][-1]["content"] for request in provider.requests] == ["zero", "after"]


# ---------------------------------------------------------------------------------------- 2

BOUNDARY_SESSION = "boundary"
ROUNDS = 10
# No sweeper during the test: a message must not depend on it while every instance is alive
# (the sweeper is for queues whose instance died), so one left behind shows as a timeout.
NO_SWEEPER = {"sweep_interval": 60}


class Devices:
    """Every frame each device receives for the session, in order, read as they come; waiters
    wake at each frame."""

    def __init__(self, **sockets):
        self.sockets = sockets
        self.frames: dict[str, list[dict]] = {name: [] for name in sockets}
        self.changed = asyncio.Condition()
        self.readers = [asyncio.create_task(self._read(name, ws)) for name, ws in sockets.items()]

    async def _read(self, name: str, ws) -> None:
        async for message in ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                break
            frame = json.loads(message.data)
            if frame.get("session_id") not in (None, BOUNDARY_SESSION):
                continue
            async with self.changed:
                self.frames[name].append(frame)
                self.changed.notify_all()

    def ends(self, name: str) -> int:
        return sum(1 for frame in self.frames[name] if frame["type"] == "stream_end")

    async def until(self, condition, what: str, timeout: float = 10.0) -> None:
        async with self.changed:
            try:
                await asyncio.wait_for(self.changed.wait_for(condition), timeout)
            except asyncio.TimeoutError:
                raise AssertionError(f"{what}: not reached in {timeout}s; stream_ends seen: "
                                     f"{ {name: self.ends(name) for name in self.frames} }") from None

    async def close(self) -> None:
        for reader in self.readers:
            reader.cancel()
        await asyncio.gather(*self.readers, return_exceptions=True)


def assert_turns_never_overlap(frames: list[dict], device: str) -> list[dict]:
    """Every frame of a turn lies between its `stream_start` and its `stream_end`, seq 0, 1, 2 ...;
    no frame of another turn comes in between. Returns the turns' stream_starts in order."""
    starts, running, expected_seq = [], None, 0
    for frame in frames:
        if "seq" not in frame:  # not a frame of a turn's stream (echo, queued, pong)
            continue
        if frame["type"] == "stream_start":
            assert running is None, f"{device}: turn {frame['turn_id']} started while {running} ran"
            running, expected_seq = frame["turn_id"], 0
            starts.append(frame)
        assert frame["turn_id"] == running, f"{device}: {frame} came while turn {running} was the one running"
        assert frame["seq"] == expected_seq, f"{device}: seq {frame['seq']} where {expected_seq} was due"
        expected_seq += 1
        if frame["type"] == "stream_end":
            assert frame["finish_reason"] == "stop", f"{device}: {frame}"
            running = None
    assert running is None, f"{device}: turn {running} never ended"
    return starts


async def test_two_devices_on_two_instances_sending_as_a_turn_ends_both_run_in_turn(
        make_gateway, provider, redis_url, bus_prefix):
    """At a turn boundary the lock is being let go on one instance while devices on both send:
    each round, the moment either device sees the previous reply end, both send at once. Both
    turns must run, one after the other on every device (docs/chat.md: either order, never
    overlapping, none lost), each device must see both replies and the echo of the other's
    message, each message must be stored once, and the queue must end empty."""
    shared = {"bus.redis_url": redis_url, "bus.prefix": bus_prefix}
    first = await make_gateway(overrides=shared, settings=NO_SWEEPER)
    second = await make_gateway(overrides=shared, settings=NO_SWEEPER)
    token = token_for(first, ADMIN)
    provider.reply, provider.pieces = "One reply, streamed in a few pieces.", 3
    sent_by = {"phone": [], "laptop": []}

    async with first.ws_connect(chat_query(token, BOUNDARY_SESSION)) as phone, \
            second.ws_connect(chat_query(token, BOUNDARY_SESSION)) as laptop:
        devices = Devices(phone=phone, laptop=laptop)
        try:
            async def send(name: str, ws, content: str) -> None:
                sent_by[name].append(content)
                await ws.send_json({"type": "message", "content": content, "client_msg_id": content})

            await send("phone", phone, "phone 0")
            await devices.until(lambda: devices.ends("phone") >= 1 and devices.ends("laptop") >= 1,
                                "the first reply")
            for round_number in range(1, ROUNDS + 1):
                ended = 2 * round_number - 1  # replies before this round
                await devices.until(lambda: devices.ends("phone") >= ended or devices.ends("laptop") >= ended,
                                    f"round {round_number - 1}'s replies")
                await asyncio.gather(send("phone", phone, f"phone {round_number}"),
                                     send("laptop", laptop, f"laptop {round_number}"))
            total = 2 * ROUNDS + 1
            await devices.until(lambda: devices.ends("phone") >= total and devices.ends("laptop") >= total,
                                "every reply on both devices")
            # Anything more (a reply run twice, a late error) would arrive now.
            await phone.send_json({"type": "ping"})
            await laptop.send_json({"type": "ping"})
            await devices.until(lambda: all(seen[-1]["type"] == "pong" for seen in devices.frames.values()),
                                "the pongs")
        finally:
            await devices.close()

    everything = [content for contents in sent_by.values() for content in contents]
    # The model saw one request at a time, one per message; the n-th request is the n-th turn.
    assert provider.max_active == 1
    asked = [request["messages"][-1]["content"] for request in provider.requests]
    assert sorted(asked) == sorted(everything)
    for name, other in (("phone", "laptop"), ("laptop", "phone")):
        frames = devices.frames[name]
        assert not [frame for frame in frames if frame["type"] == "error"], name
        starts = assert_turns_never_overlap(frames, name)
        assert len(starts) == len(everything) == len({start["turn_id"] for start in starts}), name
        ends = [frame for frame in frames if frame["type"] == "stream_end"]
        assert all(end["text"] == provider.reply for end in ends), name
        # Echoes: each of the other device's messages once, none of its own, before that turn starts.
        echoes = [frame["content"] for frame in frames if frame["type"] == "response"]
        assert sorted(echoes) == sorted(sent_by[other]), name
        for content in sent_by[other]:
            echo_at = next(i for i, frame in enumerate(frames) if frame["type"] == "response"
                           and frame["content"] == content)
            start_at = frames.index(starts[asked.index(content)])
            assert echo_at < start_at, f"{name}: the echo of {content!r} came after its reply started"
    assert [start["turn_id"] for start in assert_turns_never_overlap(devices.frames["phone"], "phone")] == \
        [start["turn_id"] for start in assert_turns_never_overlap(devices.frames["laptop"], "laptop")]

    stored = await stored_messages(first, BOUNDARY_SESSION)
    assert sorted(content for role, content in stored if role == "user") == sorted(everything)
    assert [content for role, content in stored if role == "assistant"] == [provider.reply] * len(everything)
    rows = await queue_rows(second, BOUNDARY_SESSION)
    assert sorted(text for text, _ in rows) == sorted(everything)
    assert {status for _, status in rows} == {"done"}


# ---------------------------------------------------------------------------------------- 3

async def test_a_turn_whose_lock_is_lost_stops_and_is_ended_for_the_devices(make_gateway, provider):
    """The lock of a running turn expired while its instance could not renew it (or another took
    it): the instance stops relaying, since another may hold the session now, and the reply is
    ended for the devices once, by the sweeper; nothing of it comes after its stream_end."""
    gateway = await make_gateway(settings={"lock_ttl": 0.6, "sweep_interval": 0.2})
    provider.gate.clear()
    async with gateway.ws_connect(chat_query(token_for(gateway, ADMIN), "lost")) as phone:
        await phone.send_json({"type": "message", "content": "hi", "client_msg_id": "l1"})
        frames = await receive_until(phone, "stream_chunk")
        frames += await receive_until(phone, "stream_chunk")
        await context_of(gateway).bus.delete(lock_key(session_key("admin", "lost")))  # as if it had expired
        frames += await receive_until(phone, "stream_end", timeout=5)
        provider.gate.set()
        await asyncio.sleep(0.5)
        await phone.send_json({"type": "ping"})
        after = await receive_until(phone, "pong")
    turn = [frame for frame in frames if "seq" in frame]
    assert [frame["type"] for frame in turn] == ["stream_start", "stream_chunk", "stream_chunk", "stream_end"]
    assert turn[-1]["finish_reason"] == "error"
    assert [frame["type"] for frame in after] == ["pong"]

    async def abandoned() -> bool:
        return await queue_rows(gateway, "lost") == [("hi", "abandoned")]

    await eventually(abandoned)


@pytest.mark.parametrize("found_by", ["sweeper", "next turn"])
async def test_a_reply_that_ended_but_was_not_recorded_as_ended_is_not_ended_twice(
        found_by, make_gateway, provider, redis_url, bus_prefix):
    """The holder sent stream_end and stopped (killed, or cancelled by a stop) before its replay
    recorded the end: whoever finds the turn unfinished records the end and sends nothing."""
    settings = FAST_FAILOVER if found_by == "sweeper" else {"sweep_interval": 3600}
    gateway = await make_gateway(overrides={"bus.redis_url": redis_url, "bus.prefix": bus_prefix}, settings=settings)
    bus = RedisBus(redis_url, bus_prefix)
    replay = Replay(bus)
    try:
        await replay.begin(session_key("admin", "ended"), "t1")
        for seq, kind in enumerate(["stream_start", "stream_end"]):
            await replay.append(session_key("admin", "ended"), "t1", seq, json.dumps({
                "type": kind, "session_id": "ended", "turn_id": "t1", "seq": seq, "text": "said"}))
        await context_of(gateway).bus.mark(RUNNING_TURNS, session_key("admin", "ended"), 3600)
        async with gateway.ws_connect(chat_query(token_for(gateway, ADMIN), "ended")) as phone:
            if found_by == "sweeper":
                async def recorded() -> bool:
                    return not (await replay.read(session_key("admin", "ended"))).running

                await eventually(recorded)
                await phone.send_json({"type": "ping"})
                frames = await receive_until(phone, "pong")
            else:  # a device joining a running turn is replayed its frames first
                await phone.send_json({"type": "message", "content": "next", "client_msg_id": "n1"})
                frames = await receive_until(phone, "stream_end", session_id="ended")
                if frames[-1]["turn_id"] == "t1":
                    frames += await receive_until(phone, "stream_end", session_id="ended")
                assert frames[-1]["turn_id"] != "t1" and frames[-1]["finish_reason"] == "stop"
    finally:
        await bus.close()
    assert len([frame for frame in frames if frame["type"] == "stream_end" and frame["turn_id"] == "t1"]) <= 1

    async def unmarked() -> bool:
        return session_key("admin", "ended") not in await context_of(gateway).bus.members(RUNNING_TURNS)

    await eventually(unmarked)
