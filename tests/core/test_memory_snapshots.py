"""MEMORY_SNAPSHOTS: tracemalloc snapshots of a running service, off unless asked for."""
import asyncio
import os
import signal
import tracemalloc

import pytest

from bench.soak.snapshots import growth
from gateway import memory_snapshots


def test_the_setting_names_the_services_and_the_interval():
    assert memory_snapshots.parse("") is None
    assert memory_snapshots.parse("60") == (None, 60.0)
    assert memory_snapshots.parse("gateway, memory-service:30") == ({"gateway", "memory-service"}, 30.0)
    assert memory_snapshots.parse("gateway:often") is None  # said in the log; the service still starts
    assert memory_snapshots.parse("0") is None


def test_nothing_is_traced_unless_asked_or_for_another_service(tmp_path, monkeypatch):
    loop = asyncio.new_event_loop()
    try:
        monkeypatch.delenv(memory_snapshots.ENVIRONMENT, raising=False)
        assert memory_snapshots.start(loop, "gateway", tmp_path) is False
        monkeypatch.setenv(memory_snapshots.ENVIRONMENT, "memory-service:60")
        assert memory_snapshots.start(loop, "gateway", tmp_path) is False
        assert not tracemalloc.is_tracing() and not (tmp_path / memory_snapshots.DIRECTORY).exists()
    finally:
        loop.close()


@pytest.mark.skipif(memory_snapshots.SNAPSHOT_SIGNAL is None, reason="no SIGUSR1 here")
def test_snapshots_are_written_periodically_and_on_signal_and_compared(tmp_path, monkeypatch):
    monkeypatch.setenv(memory_snapshots.ENVIRONMENT, "gateway:0.3")
    monkeypatch.setenv(memory_snapshots.FRAMES_ENVIRONMENT, "3")
    loop = asyncio.new_event_loop()
    kept: list[bytes] = []
    directory = tmp_path / memory_snapshots.DIRECTORY

    async def grow_then_signal() -> None:
        await asyncio.sleep(0.4)  # the first periodic snapshot
        kept.extend(b"x" * 1000 + bytes([n % 256]) for n in range(2000))
        await asyncio.sleep(0.05)
        os.kill(os.getpid(), signal.SIGUSR1)  # one now
        while len(list(directory.glob("*.tracemalloc"))) < 2:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)  # the file written off the loop

    try:
        assert memory_snapshots.start(loop, "gateway", tmp_path) is True
        loop.run_until_complete(asyncio.wait_for(grow_then_signal(), 10))
    finally:
        loop.remove_signal_handler(memory_snapshots.SNAPSHOT_SIGNAL)
        loop.close()
        tracemalloc.stop()
    first, second = sorted(directory.glob(f"gateway-{os.getpid()}-*.tracemalloc"))[:2]
    lines = growth(str(first), str(second), "lineno", 3)
    assert "test_memory_snapshots.py" in "\n".join(lines[:3])  # the list that grew, first
