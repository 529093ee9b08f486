"""Background jobs, the one way (gateway/jobs.py): a declared job and a job group's loops are
listed like jobs, each failure is logged once by the same code, and the core cancels what still
runs as the service stops."""
import asyncio
import logging

from gateway.app import create_app
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
    await asyncio.sleep(0)
    assert plugin.cancelled == ["a", "d"] and group.running() == ["b", "d"]

    await client.close()  # the core cancels what still runs
    assert sorted(plugin.cancelled) == ["a", "b", "d", "d again"] and group.running() == []
    assert len([record for record in caplog.records if record.name == "gateway.jobs"
                and record.levelno >= logging.ERROR]) == 2


async def ignores_the_first_cancellation(ended: list[str], key: str) -> None:
    """A loop whose first cancellation lands where the code it interrupts catches it (a timeout
    racing it, a connect turning it into an error) and then runs on."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        pass
    try:
        await asyncio.Event().wait()
    finally:
        ended.append(key)


async def test_a_loop_that_runs_on_after_one_cancellation_is_still_stopped():
    """`stop` and `close` cancel again, as the declared jobs' `cancel_all` does: a loop replaced
    by a newer start of its key is among what `close` stops, and `stop` does not wait forever."""
    from gateway.jobs import JobGroup

    ended: list[str] = []
    group = JobGroup("plugin.loops")
    replaced = group.start("bot", ignores_the_first_cancellation(ended, "replaced"))
    await asyncio.sleep(0)
    group.start("bot", ignores_the_first_cancellation(ended, "newest"))  # the first cancelled, runs on
    await asyncio.sleep(0.05)
    assert not replaced.done()
    await asyncio.wait_for(group.close(patience=2), 5)
    assert sorted(ended) == ["newest", "replaced"] and replaced.done()

    group.start("other", ignores_the_first_cancellation(ended, "other"))
    await asyncio.sleep(0)
    await asyncio.wait_for(group.stop("other"), 5)
    assert ended[-1] == "other" and group.running() == []
