"""Turn starts spread over the event loop's steps (plugins/chat/pacing.py)."""
from __future__ import annotations

import asyncio

from plugins.chat.pacing import StartPacer


async def test_at_most_so_many_start_in_a_step_and_the_rest_follow_in_order():
    pacer = StartPacer(per_step=2)
    started: list[tuple[int, int]] = []  # (who, step)
    step = 0

    async def count_steps():
        nonlocal step
        while True:
            await asyncio.sleep(0)
            step += 1

    async def start(who: int) -> None:
        await pacer.start()
        started.append((who, step))

    counter = asyncio.create_task(count_steps())
    await asyncio.gather(*(start(who) for who in range(7)))
    counter.cancel()
    assert [who for who, _ in started] == list(range(7))  # in the order they asked
    per_step: dict[int, int] = {}
    for _, at in started:
        per_step[at] = per_step.get(at, 0) + 1
    assert max(per_step.values()) <= 2 and len(per_step) >= 4


async def test_a_waiter_that_went_away_takes_no_place_and_a_quiet_start_does_not_wait():
    pacer = StartPacer(per_step=1)
    first, gone, later = (asyncio.create_task(pacer.start()) for _ in range(3))
    await asyncio.sleep(0)  # the first started; the other two wait for the next steps
    assert first.done() and not gone.done() and not later.done()
    gone.cancel()
    await asyncio.wait_for(later, 1)
    assert gone.cancelled()
    for _ in range(3):
        await asyncio.sleep(0)
    await asyncio.wait_for(pacer.start(), 0.01)  # nobody waits: at once again


async def test_an_overload_is_not_paced():
    pacer = StartPacer(per_step=1, overload_backlog=3)
    starts = [asyncio.create_task(pacer.start()) for _ in range(5)]  # one at once, four waiting: over 3
    await asyncio.sleep(0)
    assert sum(start.done() for start in starts) == 1
    await asyncio.sleep(0)  # the next step lets all four go
    await asyncio.sleep(0)
    assert all(start.done() for start in starts)
