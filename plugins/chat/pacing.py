"""Turn starts spread over the event loop's steps, so that a burst of messages does not hold
back the first tokens of the turns it already started.

A step of the loop runs every callback that was ready when it began, and sockets are read only
between steps: unpaced, a burst's admissions, then all its requests, then all its set-ups ran
before any answer was read, so every first token waited for every start (bench/chat). With at
most STARTS_PER_STEP starts a step, the answers of the first turns are read between the starts
of the others; turns start in the order their messages came."""
from __future__ import annotations

import asyncio
import collections

STARTS_PER_STEP = 16  # the lowest median first token in bench/chat at 200 simultaneous turns
# Beyond this many waiting starts pacing only costs CPU (there is no idle time to fill).
OVERLOAD_BACKLOG = 256


class StartPacer:
    """`await start()` before a turn's start: at once while fewer than `per_step` turns started
    in this step and none waits, else in a later step, in the order of asking (all in the next
    step when more than `overload_backlog` wait)."""

    def __init__(self, per_step: int = STARTS_PER_STEP, overload_backlog: int = OVERLOAD_BACKLOG):
        self.per_step, self.overload_backlog = per_step, overload_backlog
        self._started = 0  # in the current step
        self._waiting: collections.deque[asyncio.Future] = collections.deque()
        self._next_step_scheduled = False

    async def start(self) -> None:
        if self._started < self.per_step and not self._waiting:
            self._started += 1
            self._schedule_next_step()
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        self._schedule_next_step()
        await waiter

    def _schedule_next_step(self) -> None:
        if not self._next_step_scheduled:  # one callback a step, whatever the number of starts
            self._next_step_scheduled = True
            asyncio.get_running_loop().call_soon(self._next_step)

    def _next_step(self) -> None:
        """Runs in the step after a start: the count starts over, and the next waiters go."""
        self._next_step_scheduled = False
        self._started = 0
        # More waiting than `overload_backlog`: an overload, which pacing cannot serve sooner
        # (there is no idle time to fill), and spreading its starts cost CPU and the slowest
        # first tokens: all go at once.
        waiting = len(self._waiting)
        allowed = waiting if waiting > self.overload_backlog else self.per_step
        while self._waiting and self._started < allowed:
            waiter = self._waiting.popleft()
            if not waiter.done():  # its submitter may have gone
                waiter.set_result(None)
                self._started += 1
        if self._started:
            self._schedule_next_step()
