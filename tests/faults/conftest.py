"""Fault tests: a component of a running chat turn is killed with SIGKILL (no shutdown code of
it runs) in the middle of a reply. Each test checks what docs/operations.md promises: the
device is told within seconds, no acknowledged message is lost or stored twice, and the next
turn works soon after the component is back.

The chat set-up is tests/chat's (the real gateway and AI core, the scripted model); the
gateway instances in child processes are tests/chat/test_failover.py's."""
from __future__ import annotations

import asyncio
import time

import pytest

# The chat tests' fixtures, used here as they are.
from tests.chat.conftest import (ai_core_url, chat_settings, gateway_port, make_gateway,  # noqa: F401
                                 provider, receive_until)
from tests.chat.test_failover import spawn_instance, two_instances  # noqa: F401

# What each test promises (the numbers): the device is told within this many seconds ...
TOLD_WITHIN = 5.0
# ... and the next turn works within this many seconds of the component's return.
RECOVERED_WITHIN = 30.0


async def until_reply_ends(ws, timeout: float = TOLD_WITHIN) -> tuple[list[dict], float]:
    """The frames up to the reply's stream_end, and how long they took: the end of a reply cut
    off by a failure is what tells the device (with an `error` frame before it)."""
    started = time.monotonic()
    try:
        frames = await receive_until(ws, "stream_end", timeout=timeout)
    except asyncio.TimeoutError:
        raise AssertionError(f"the device was told nothing within {timeout:g}s") from None
    return frames, time.monotonic() - started


def assert_cut_off_cleanly(frames: list[dict], error_types: set[str]) -> None:
    """A reply ended by a failure: an `error` frame of one of `error_types`, then the stream_end
    (`finish_reason: "error"`) carrying the text that had arrived."""
    end = frames[-1]
    assert end["type"] == "stream_end" and end["finish_reason"] == "error", frames
    errors = [frame for frame in frames if frame["type"] == "error"]
    assert [frame.get("errorType") for frame in errors] and {frame.get("errorType") for frame in errors} <= error_types, \
        errors
    assert end["text"] == "".join(frame["content"] for frame in frames if frame["type"] == "stream_chunk")


@pytest.fixture
def fault_settings() -> dict:
    """Chat settings for the fault tests: a lost lock found soon, the sweeper looking often."""
    return {"lock_ttl": 3.0, "sweep_interval": 0.5}
