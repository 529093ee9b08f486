"""The two hooks of a chat turn (contract.py: `TURN_CONTEXT`, `TURN_FINISHED`): what other
plugins of the ai-core service add to the model's system message before a turn, and who is told
after it. Both are bounded so that no plugin can stall or break a turn: providers run at once,
each within a time limit, and their text within a budget of characters; listeners run as
background jobs of the service's scheduler."""
from __future__ import annotations

import asyncio
import logging

from gateway.context import Context
from gateway.jobs import run_logged

from .contract import ContextBlock, FinishedTurn, TurnContextProvider, TurnFinishedListener

log = logging.getLogger("plugins.ai_core.hooks")


class TurnContextProviders:
    """`TURN_CONTEXT`: the providers, in the order they were added."""

    def __init__(self, timeout: float, max_chars: int):
        self.timeout = timeout
        self.max_chars = max_chars
        self._providers: dict[str, TurnContextProvider] = {}

    def add(self, name: str, provider: TurnContextProvider) -> None:
        if name in self._providers:
            raise ValueError(f"a turn context provider named {name!r} is already added")
        self._providers[name] = provider

    def __bool__(self) -> bool:
        return bool(self._providers)

    async def _ask(self, name: str, provider: TurnContextProvider, user_id: str, session_id: str | None,
                   text: str) -> list[ContextBlock]:
        try:
            async with asyncio.timeout(self.timeout):
                blocks = await provider(user_id, session_id, text)
        except TimeoutError:
            log.warning("turn context %r skipped: no answer within %.1f s", name, self.timeout)
            return []
        except Exception as error:  # a plugin's failure must not end the turn
            log.warning("turn context %r skipped: %s: %s", name, type(error).__name__, error)
            return []
        return [block for block in blocks or [] if block.get("lines")]

    async def blocks(self, user_id: str, session_id: str | None, text: str) -> list[ContextBlock]:
        """Every provider's blocks, in the providers' order."""
        if not self._providers:
            return []
        answers = await asyncio.gather(*(self._ask(name, provider, user_id, session_id, text)
                                         for name, provider in self._providers.items()))
        return [block for blocks in answers for block in blocks]

    def render(self, blocks: list[ContextBlock]) -> str:
        """The blocks as text for the system message, at most `max_chars` characters: whole
        lines only, so that the model never reads a cut fact."""
        parts: list[str] = []
        used = 0
        for block in blocks:
            head = block["title"].strip()
            lines: list[str] = []
            cost = len(head) + 2
            for line in block["lines"]:
                entry = "- " + " ".join(str(line).split())
                if used + cost + len(entry) + 1 > self.max_chars:
                    break
                lines.append(entry)
                cost += len(entry) + 1
            if not lines:
                continue
            parts.append("\n".join([head, *lines]))
            used += cost
        return "\n\n".join(parts)


class TurnFinishedListeners:
    """`TURN_FINISHED`: the listeners, told of each finished chat turn in the background."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self._listeners: dict[str, TurnFinishedListener] = {}

    def add(self, name: str, listener: TurnFinishedListener) -> None:
        if name in self._listeners:
            raise ValueError(f"a turn listener named {name!r} is already added")
        self._listeners[name] = listener

    async def notify(self, turn: FinishedTurn) -> None:
        """Start every listener as a job of the scheduler and return at once."""
        for name, listener in self._listeners.items():
            job = run_logged(f"ai_core.turn_listener[{name}]", listener(turn))
            try:
                await self.context.scheduler.spawn(job)
            except Exception as error:  # the scheduler is closing: the service stops
                job.close()
                log.warning("turn listener %r not started: %s", name, error)
