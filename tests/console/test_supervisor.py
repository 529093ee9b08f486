"""The supervisor against real child processes (`python -m gateway serve --service ID`)."""
from __future__ import annotations

import asyncio
import os
import signal

import aiohttp
import psutil
import pytest

from console.logstore import LogStore
from console.push import PushHub
from console.supervisor import (FAILED, RUNNING, STOPPED, Supervisor, SupervisorError, SupervisorSettings,
                                find_orphans)

pytestmark = pytest.mark.slow


class Recorder:
    """Collects the pushes, and lets a test wait for one."""

    def __init__(self, hub: PushHub):
        self.messages: list[dict] = []
        self._changed = asyncio.Event()
        hub.add_listener(self._add)

    def _add(self, message: dict) -> None:
        self.messages.append(message)
        self._changed.set()

    def transitions(self) -> list[tuple[str, str]]:
        return [(m["service"], m["status"]["status"]) for m in self.messages if m["type"] == "status"]

    async def wait_for(self, predicate, timeout: float = 20.0) -> dict:
        async def scan():
            seen = 0
            while True:
                for message in self.messages[seen:]:
                    if predicate(message):
                        return message
                seen = len(self.messages)
                self._changed.clear()
                await self._changed.wait()
        return await asyncio.wait_for(scan(), timeout)


def make_supervisor(specs, tmp_path, **settings) -> tuple[Supervisor, Recorder]:
    hub = PushHub()
    recorder = Recorder(hub)
    data_dir = tmp_path / "data"
    supervisor = Supervisor(specs, data_dir, LogStore(data_dir / "logs"), hub,
                            SupervisorSettings(**{"health_timeout": 30, "stop_timeout": 5, **settings}))
    return supervisor, recorder


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_start_all_in_order_with_health_waits_failure_kill_and_stop_all(service_table, tmp_path):
    specs = service_table([
        {"id": "alpha", "name": "Alpha"},
        {"id": "beta", "name": "Beta", "depends": ["alpha"]},
        # Serves, but its health URL never answers 200: must be reported, stopped, and end the sequence.
        {"id": "broken", "name": "Broken", "health": "/api/v1/never-healthy", "health_timeout": 1.5},
        {"id": "after", "name": "After"},
    ])
    supervisor, recorder = make_supervisor(specs, tmp_path)
    await supervisor.open()
    try:
        with pytest.raises(SupervisorError) as failure:
            await supervisor.start_all()
        assert failure.value.service == "broken"
        assert failure.value.error_type == "health_check_failed"

        # Each service started only after the previous one passed its health check.
        assert recorder.transitions()[:4] == [("alpha", "starting"), ("alpha", "running"),
                                              ("beta", "starting"), ("beta", "running")]
        assert ("after", "starting") not in recorder.transitions()
        states = {row["id"]: row for row in supervisor.statuses()}
        assert states["alpha"]["status"] == states["beta"]["status"] == RUNNING
        assert states["broken"]["status"] == FAILED and states["broken"]["pid"] is None
        assert "did not pass within 1.5s" in states["broken"]["lastError"]
        assert states["after"]["status"] == STOPPED
        async with aiohttp.ClientSession() as http:
            async with http.get(states["beta"]["healthUrl"]) as response:
                assert (await response.json())["service"] == "beta"
        alpha_pid, beta_pid = states["alpha"]["pid"], states["beta"]["pid"]
        child_environment = psutil.Process(alpha_pid).environ()
        assert child_environment["DATA_DIR"] == str(supervisor.data_dir)
        assert "CONSOLE_TOKEN" not in child_environment
        assert states["alpha"]["uptime"] >= 0 and states["alpha"]["startedAt"]

        # kill -9 of a child is noticed and reported (no restart: not configured).
        os.kill(beta_pid, signal.SIGKILL)
        message = await recorder.wait_for(lambda m: m["type"] == "status" and m["service"] == "beta"
                                          and m["status"]["status"] == FAILED)
        assert message["status"]["exitCode"] == -signal.SIGKILL
        assert "exited unexpectedly" in message["status"]["lastError"]
        assert supervisor.status("beta")["pid"] is None

        # The services' output reached their logs, next to the console's own notes.
        alpha_log = "\n".join((await supervisor.logs.get("alpha").tail(200)).lines)
        assert "[console] starting:" in alpha_log and "-m gateway serve --service alpha" in alpha_log
        assert "alpha listening on 127.0.0.1" in alpha_log
        assert any(m["type"] == "log" and m["service"] == "alpha" and m["source"] == "service"
                   for m in recorder.messages)

        await supervisor.stop_all()
        assert {row["status"] for row in supervisor.statuses()} == {STOPPED}
        assert gone(alpha_pid) and gone(beta_pid)
        assert find_orphans({s.id for s in specs}, supervisor.data_dir) == []
        last_lines = (await supervisor.logs.get("alpha").tail(5)).lines
        assert "[console] stopped (exit code 0)" in "\n".join(last_lines)
    finally:
        await supervisor.close()


async def test_a_service_that_dies_is_restarted_with_back_off(service_table, tmp_path):
    specs = service_table([{"id": "alpha", "name": "Alpha"}])
    supervisor, recorder = make_supervisor(specs, tmp_path, restart_on_exit=True, restart_backoff_initial=0.1)
    await supervisor.open()
    try:
        first_pid = (await supervisor.start("alpha"))["pid"]
        os.kill(first_pid, signal.SIGKILL)
        await recorder.wait_for(lambda m: m["type"] == "status" and m["status"]["status"] == FAILED)
        again = await recorder.wait_for(lambda m: m["type"] == "status" and m["status"]["status"] == RUNNING
                                        and m["status"]["pid"] != first_pid)
        assert again["status"]["pid"] != first_pid
        assert "restarting in 0.1s (failure 1 in a row)" in "\n".join(
            (await supervisor.logs.get("alpha").tail(50)).lines)
        await supervisor.stop("alpha")
        assert supervisor.status("alpha")["restarts"] == 1
        assert supervisor.status("alpha")["status"] == STOPPED
    finally:
        await supervisor.close()
    assert gone(first_pid) and gone(again["status"]["pid"])


async def test_start_refuses_a_port_held_by_another_process(service_table, tmp_path):
    specs = service_table([{"id": "alpha", "name": "Alpha"}])
    holder = await asyncio.start_server(lambda reader, writer: writer.close(), "127.0.0.1", specs[0].port)
    supervisor, _ = make_supervisor(specs, tmp_path)
    await supervisor.open()
    try:
        with pytest.raises(SupervisorError) as failure:
            await supervisor.start("alpha")
        assert failure.value.error_type == "port_in_use"
        assert supervisor.status("alpha")["status"] == FAILED
        assert supervisor.child_pids() == []
    finally:
        holder.close()
        await holder.wait_closed()
        await supervisor.close()


async def test_build_runs_the_build_step_then_starts_and_a_failed_build_keeps_the_service(service_table,
                                                                                          tmp_path):
    import sys

    marker = tmp_path / "built.txt"
    specs = service_table([
        {"id": "alpha", "name": "Alpha",
         "build": [[sys.executable, "-c", f"open({str(marker)!r}, 'w').write('ok'); print('compiled alpha')"]]},
        {"id": "beta", "name": "Beta", "build": [[sys.executable, "-c", "import sys; sys.exit(3)"]]},
    ])
    supervisor, _ = make_supervisor(specs, tmp_path)
    await supervisor.open()
    try:
        status = await supervisor.build("alpha")
        assert status["status"] == RUNNING and marker.read_text() == "ok"
        assert "compiled alpha" in "\n".join((await supervisor.logs.get("alpha").tail(50)).lines)
        with pytest.raises(SupervisorError) as failure:
            await supervisor.build("beta")
        assert failure.value.error_type == "build_failed"
        assert supervisor.status("beta")["pid"] is None
        assert "exit code 3" in supervisor.status("beta")["lastError"]
    finally:
        await supervisor.close()


def test_children_learn_their_peers_from_the_service_table(tmp_path, monkeypatch):
    """Each `*_URL` the operator left unset is the table's port (or the console's `[peers]`
    setting); one the operator set stands (a service run on another machine)."""
    from gateway.services import ServiceSpec

    monkeypatch.setenv("CONSOLE_TOKEN", "not-for-services")
    monkeypatch.setenv("AI_CORE_URL", "http://elsewhere:1")
    monkeypatch.delenv("MEMORY_SERVICE_URL", raising=False)
    monkeypatch.delenv("VOICE_SERVICE_URL", raising=False)
    monkeypatch.setenv("GATEWAY_URL", "")  # set but empty: unset
    specs = [ServiceSpec("memory-service", "memory", 18091), ServiceSpec("ai-core", "AI", 18081),
             ServiceSpec("gateway", "Gateway", 18080), ServiceSpec("frontend", "Frontend", 15173),
             ServiceSpec("voice-service", "Voice", 18093)]
    supervisor = Supervisor(specs, tmp_path / "data", LogStore(tmp_path / "logs"), PushHub(),
                            peer_urls={"voice-service": "http://voice.lan:8093"})
    environment = supervisor.child_environment()
    assert environment["MEMORY_SERVICE_URL"] == "http://127.0.0.1:18091"
    assert environment["AI_CORE_URL"] == "http://elsewhere:1"  # the operator's address stands
    assert environment["GATEWAY_URL"] == "http://127.0.0.1:18080"
    assert environment["VOICE_SERVICE_URL"] == "http://voice.lan:8093"
    assert environment["DATA_DIR"] == str(tmp_path / "data")
    assert "CONSOLE_TOKEN" not in environment


async def test_start_all_fresh_ends_what_a_previous_console_left_on_this_data_dir_only(service_table,
                                                                                      tmp_path):
    import subprocess
    import sys

    from tests.support.servers import free_port

    specs = service_table([{"id": "alpha", "name": "Alpha"}])
    supervisor, _ = make_supervisor(specs, tmp_path)

    def serve(data_dir, *extra):
        return subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--service", "alpha", *extra],
                                env={**os.environ, "DATA_DIR": str(data_dir)},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    left_behind = serve(supervisor.data_dir)  # a previous console's child, on the table's port
    stranger = serve(tmp_path / "someone-else", "--port", str(free_port()))  # same command, other DATA_DIR
    await supervisor.open()
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(150):
                try:
                    async with http.get(supervisor.health_url(specs[0])) as response:
                        if response.status == 200:
                            break
                except aiohttp.ClientError:
                    await asyncio.sleep(0.1)
        assert [p.pid for p in find_orphans({"alpha"}, supervisor.data_dir)] == [left_behind.pid]
        with pytest.raises(SupervisorError):
            await supervisor.start_all()  # its port is taken: plain start-all refuses
        statuses = await supervisor.start_all_fresh()
        assert statuses[0]["status"] == RUNNING and statuses[0]["pid"] != left_behind.pid
        assert left_behind.wait(5) == 0  # asked to stop (SIGTERM), and it stopped cleanly
        assert stranger.poll() is None  # same command line, other DATA_DIR: not ours to stop
    finally:
        await supervisor.close()
        for process in (left_behind, stranger):
            if process.poll() is None:
                process.kill()
            process.wait()


async def test_the_stt_log_reads_the_voice_services_recognition_records_from_its_output(tmp_path):
    """A service's output, from a real child process, through the supervisor's reader: each
    `voice.stt` record (docs/voice.md, "The STT log") becomes an STT log entry and an `stt-log`
    push; other lines, and a record that is not JSON, are only log lines."""
    import json
    import sys

    from console.push import SttLog
    from console.supervisor import ManagedService
    from gateway.services import ServiceSpec

    hub = PushHub()
    recorder = Recorder(hub)
    stt_log = SttLog(hub)
    spec = ServiceSpec("voice-service", "speech", 18093)
    supervisor = Supervisor([spec], tmp_path / "data", LogStore(tmp_path / "logs"), hub,
                            line_listener=stt_log.read_service_line)
    record = {"time": 1795500642.123, "user_id": "user_alice", "language": "zh", "audio_ms": 2990,
              "engine": "whisper", "processing_ms": 412.34, "rtf": 0.138, "text_length": 4, "text": "你好世界",
              "source": "stream", "success": True, "error_type": None}
    lines = ["2026-11-24 06:10:40,001 INFO gateway: voice-service listening",
             f"2026-11-24 06:10:42,123 INFO voice.stt: {json.dumps(record, ensure_ascii=False)}",
             "2026-11-24 06:10:43,000 INFO voice.stt: not json"]
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", f"import sys; sys.stdout.write({chr(10).join(lines)!r} + '\\n')",
        stdout=asyncio.subprocess.PIPE)
    await supervisor._read_output(ManagedService(spec), process)
    await process.wait()

    [entry] = stt_log.entries()
    assert entry["text"] == "你好世界" and entry["processingMs"] == 412.3 and entry["time"] == 1795500642.123
    assert entry["service"] == "voice-service" and entry["engine"] == "whisper" and entry["rtf"] == 0.138
    assert "processing_ms" not in entry
    pushed = await recorder.wait_for(lambda m: m["type"] == "stt-log")
    assert pushed["entry"] == entry
    logged = [m["line"] for m in recorder.messages if m["type"] == "log"]
    assert logged == lines
