"""How a platform answers one incoming message: the shapes every platform's replier has, shared
by the bridge and each platform's module."""
from __future__ import annotations

from typing import Awaitable, Callable, Protocol


class DeliveryFailed(Exception):
    """A platform did not take the reply."""


class Streamer(Protocol):
    async def add(self, piece: str) -> None: ...

    async def finish(self, text: str) -> None: ...


class Replier(Protocol):
    """How one platform answers one incoming message."""

    async def say(self, text: str) -> None:
        """A whole short answer (a refusal, a command's answer)."""
        ...

    def streamer(self) -> Streamer:
        """Where the assistant's reply goes as it streams."""
        ...


class CollectedReply:
    """For platforms that take a reply whole: the pieces are kept and the end is sent."""

    def __init__(self, send: Callable[[str], Awaitable[None]]):
        self.send, self.text = send, ""

    async def add(self, piece: str) -> None:
        self.text += piece

    async def finish(self, text: str) -> None:
        await self.send(text or self.text)
