"""The console runs a service with several workers (the service table's `workers`) with no
configuration, and stopping it leaves nothing behind: no worker, no embedded bus."""
from __future__ import annotations

import asyncio

import aiohttp
import psutil
import pytest

from console.supervisor import RUNNING, STOPPED, find_orphans
from tests.console.test_supervisor import make_supervisor

pytestmark = pytest.mark.slow


async def test_the_console_starts_every_worker_and_stops_them_and_the_bus(service_table, tmp_path):
    specs = service_table([{"id": "alpha", "name": "Alpha", "workers": 2}])
    supervisor, _ = make_supervisor(specs, tmp_path)
    await supervisor.open()
    try:
        await supervisor.start("alpha")
        status = supervisor.status("alpha")
        assert status["status"] == RUNNING
        parent = psutil.Process(status["pid"])

        def started() -> list[str]:
            """The parent's children: worker 1 starts once worker 0 answers (as the console saw)."""
            return sorted("redis-server" if child.name().startswith("redis-server") else
                          child.cmdline()[child.cmdline().index("--worker-index") + 1]
                          for child in parent.children(recursive=True))
        for _ in range(100):
            if started() == ["0", "1", "redis-server"]:
                break
            await asyncio.sleep(0.1)
        assert started() == ["0", "1", "redis-server"]
        children = parent.children(recursive=True)
        async with aiohttp.ClientSession() as http:
            async with http.get(status["healthUrl"]) as answer:
                assert (await answer.json())["worker"] in (0, 1)

        await supervisor.stop("alpha")
        assert supervisor.status("alpha")["status"] == STOPPED
        assert [child for child in children if child.is_running()
                and child.status() != psutil.STATUS_ZOMBIE] == []
        assert find_orphans({"alpha"}, supervisor.data_dir) == []
        log = "\n".join((await supervisor.logs.get("alpha").tail(200)).lines)
        assert "2 workers" in log and "[console] stopped (exit code 0)" in log
    finally:
        await supervisor.close()


async def test_a_rolling_restart_of_one_process_starts_the_next_on_the_same_port_first(service_table, tmp_path):
    """With one process, the console starts its replacement beside it (SO_REUSEPORT), and only
    then stops the old one: the health check answers all along. A service without `workers`
    cannot be rolled, nor one that is not running."""
    from console.supervisor import SupervisorError

    specs = service_table([{"id": "alpha", "name": "Alpha", "workers": 1}, {"id": "beta", "name": "Beta"}])
    supervisor, _ = make_supervisor(specs, tmp_path)
    await supervisor.open()
    try:
        with pytest.raises(SupervisorError) as refused:
            await supervisor.rolling_restart("alpha")
        assert refused.value.error_type == "not_running" and refused.value.status == 409
        await supervisor.start("beta")
        with pytest.raises(SupervisorError) as refused:
            await supervisor.rolling_restart("beta")
        assert refused.value.error_type == "rolling_unsupported" and refused.value.status == 409

        before = await supervisor.start("alpha")
        assert before["rolling"] is True and "--reuse-port" in psutil.Process(before["pid"]).cmdline()
        answers: list[int | str] = []
        polling = True

        async def poll() -> None:
            async with aiohttp.ClientSession() as http:
                while polling:
                    try:
                        async with http.get(before["healthUrl"], headers={"Connection": "close"}) as answer:
                            answers.append(answer.status)
                    except aiohttp.ClientError as error:
                        answers.append(type(error).__name__)
                    await asyncio.sleep(0.02)

        poller = asyncio.ensure_future(poll())
        after = await supervisor.rolling_restart("alpha")
        await asyncio.sleep(0.3)
        polling = False
        await poller
        assert after["status"] == RUNNING and after["pid"] != before["pid"] and after["restarts"] == 1
        assert not psutil.pid_exists(before["pid"]) or psutil.Process(before["pid"]).status() == psutil.STATUS_ZOMBIE
        assert len(answers) > 10 and set(answers) == {200}, answers
        log = "\n".join((await supervisor.logs.get("alpha").tail(200)).lines)
        assert "rolling restart: starting the replacement" in log and f"replaced pid {before['pid']} stopped" in log

        await supervisor.stop("alpha")
        assert supervisor.status("alpha")["status"] == STOPPED
    finally:
        await supervisor.close()
