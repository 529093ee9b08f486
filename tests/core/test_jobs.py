"""Background jobs, the one way (gateway/jobs.py): a declared job and a job group's loops are
listed like jobs, each failure is logged once by the same code, and the core cancels what still
runs as the service stops."""
import asyncio
import logging

import pytest

from gateway.app import create_app
from gateway.jobs import JobGroup
from gateway.plugins import REGISTRY, Plugin


class Pollers(Plugin):
    """A plugin with one declared job and one loop per item, started and stopped by itself."""
    name = "pollers"

    def __init__(self):
        self.cancelled: list[str] = []
        self.group = None

    def setup(self, registrar):
        async def fails_at_once(context):
            raise RuntimeError("the declared job broke")

        registrar.job("fails", fails_at_once)
        self.group = registrar.job_group("pollers", per="item", redact=True)

    async def poll_forever(self, key):
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.append(key)
            raise

    @staticmethod
    async def fail(secret):
        raise ValueError(f"https://api.example/bot{secret}/getUpdates refused")

    @staticmethod
    async def fail_when_cancelled():
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise ConnectionError("the cancellation landed inside a connect") from None


def failures(caplog, name):
    return [record for record in caplog.records
            if record.name == "gateway.jobs" and record.levelno >= logging.ERROR and name in record.getMessage()]


async def test_jobs_and_job_groups_are_listed_logged_once_and_stopped(aiohttp_client, config, caplog):
    plugin = Pollers()
    app = create_app("svc", config, plugins=[plugin])
    assert app[REGISTRY].records["pollers"].jobs == ["fails", "pollers (one per item)"]
    client = await aiohttp_client(app)
    await asyncio.sleep(0.05)
    assert len(failures(caplog, "pollers.fails")) == 1

    group = plugin.group
    group.start("a", plugin.poll_forever("a"))
    group.start("b", plugin.poll_forever("b"))
    await asyncio.wait_for(group.start("broken", plugin.fail("123:SECRET")), 5)
    (failed,) = failures(caplog, "pollers.pollers[broken]")
    assert "ValueError" in failed.getMessage() and "SECRET" not in failed.getMessage() and not failed.exc_info
    assert group.running() == ["a", "b"]

    await group.stop("a")  # the plugin stops one: cancelled, not a failure
    group.start("c", plugin.fail_when_cancelled())
    await asyncio.sleep(0)
    await group.stop("c")  # an error raised by the cancellation is no failure either
    assert plugin.cancelled == ["a"] and group.running() == ["b"]
    assert failures(caplog, "pollers.pollers[c]") == []

    group.start("d", plugin.poll_forever("d"))
    await asyncio.sleep(0)
    group.start("d", plugin.poll_forever("d again"))  # two changes of one item raced: the newest wins
    await asyncio.sleep(0.05)
    assert plugin.cancelled == ["a", "d"] and group.running() == ["b", "d"]

    await client.close()  # the core cancels what still runs
    assert sorted(plugin.cancelled) == ["a", "b", "d", "d again"] and group.running() == []
    assert len([record for record in caplog.records if record.name == "gateway.jobs"
                and record.levelno >= logging.ERROR]) == 2


@pytest.fixture
async def loops():
    """A job group closed after the test, a failed one's stubborn loops too (else the event
    loop's own close would wait for them forever)."""
    group = JobGroup("plugin.loops")
    yield group
    await group.close(patience=5)


async def ignores_cancellations(ended: list[str], key: str, times: int = 1) -> None:
    """A loop whose first `times` cancellations land where the code they interrupt catches them
    (a timeout racing one, a connect turning it into an error) and that then runs on."""
    for _ in range(times):
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            pass
    try:
        await asyncio.Event().wait()
    finally:
        ended.append(key)


async def test_a_loop_that_runs_on_after_one_cancellation_is_still_stopped(loops):
    """`stop` and `close` cancel again, as the declared jobs' `cancel_all` does: a loop replaced
    by a newer start of its key and still ending is among what both stop, and neither waits
    forever."""
    group = loops
    ended: list[str] = []
    replaced = group.start("bot", ignores_cancellations(ended, "replaced"))
    await asyncio.sleep(0)
    group.start("bot", ignores_cancellations(ended, "newest"))  # cancels the first again until it ends
    await asyncio.wait([replaced], timeout=5)
    assert ended == ["replaced"]
    await asyncio.sleep(0.05)
    await asyncio.wait_for(group.close(patience=2), 5)
    assert ended == ["replaced", "newest"] and group.running() == []

    for stopping in ("close", "stop"):
        ended.clear()
        replaced = group.start("bot", ignores_cancellations(ended, "replaced", times=3))
        await asyncio.sleep(0)
        group.start("bot", ignores_cancellations(ended, "newest"), patience=10)
        await asyncio.sleep(0.05)
        assert not replaced.done() and ended == []  # the newest waits for it
        await asyncio.wait_for(group.close(patience=5) if stopping == "close" else group.stop("bot"), 5)
        assert ended == ["replaced"] and replaced.done() and group.running() == []  # the newest never began

    group.start("other", ignores_cancellations(ended, "other"))
    await asyncio.sleep(0)
    await asyncio.wait_for(group.stop("other"), 5)
    assert ended[-1] == "other" and group.running() == []


async def test_a_restarted_loop_begins_only_once_the_one_it_replaces_has_ended(loops, caplog):
    """Two pollers of one bot token at once get 409 Conflict from Telegram: a loop started again
    for its key (the bot's configuration changed twice at once) waits for the old one's end,
    even when that takes a while (closing its long poll), and `start` stays callable from sync
    code. One that will not end holds its replacement back for `patience` seconds, no longer."""
    group = loops
    events: list[str] = []

    async def poller(name: str, closing: float) -> None:
        events.append(f"{name} began")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(closing)  # the long poll's connection closes
            events.append(f"{name} ended")
            raise

    old = group.start("bot", poller("old", closing=0.2))
    await asyncio.sleep(0.05)
    new = group.start("bot", poller("new", closing=0))
    await asyncio.wait([old], timeout=5)
    await asyncio.sleep(0.05)
    assert events == ["old began", "old ended", "new began"] and group.running() == ["bot"]
    await group.stop("bot")
    assert new.done() and events[-1] == "new ended"

    ended: list[str] = []
    caplog.set_level(logging.WARNING, logger="gateway.jobs")
    stuck = group.start("bot", ignores_cancellations(ended, "stuck", times=3))
    await asyncio.sleep(0)
    group.start("bot", poller("replacement", closing=0), patience=0.2)
    await asyncio.sleep(1)
    assert not stuck.done() and "replacement began" in events
    assert any("still runs" in record.getMessage() for record in caplog.records if record.name == "gateway.jobs")
    await asyncio.wait_for(group.close(patience=5), 10)
    assert stuck.done() and ended == ["stuck"]
