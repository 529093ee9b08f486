"""Reply taps (contract.py `REPLY_TAPS`): plugins that watch a reply as it streams and add
frames of their own to it (spoken replies add `stream_segments` and `full_audio_url`). Chat
knows nothing of what a tap does; a failing tap is logged and left out, never the reply."""
from __future__ import annotations

import logging
from typing import Collection

from .contract import ReplyStream, ReplyTap, ReplyTapFactory

log = logging.getLogger("plugins.chat.taps")


class ReplyTapRegistry:
    def __init__(self) -> None:
        self._factories: list[tuple[frozenset[str], ReplyTapFactory]] = []

    def add(self, modes: Collection[str], factory: ReplyTapFactory) -> None:
        self._factories.append((frozenset(modes), factory))

    def open(self, stream: ReplyStream) -> list[ReplyTap]:
        """The taps that watch this reply (usually none: a text turn pays one set lookup)."""
        taps = []
        for modes, factory in self._factories:
            if stream.mode not in modes:
                continue
            try:
                tap = factory(stream)
            except Exception:
                log.exception("a reply tap could not start for turn %s", stream.turn_id)
                continue
            if tap is not None:
                taps.append(tap)
        return taps


def feed(taps: list[ReplyTap], text: str) -> list[ReplyTap]:
    """Give each tap the next piece; a tap that fails is dropped from this reply."""
    working = []
    for tap in taps:
        try:
            tap.feed(text)
        except Exception:
            log.exception("a reply tap failed; the reply goes on without it")
            continue
        working.append(tap)
    return working


async def finish(taps: list[ReplyTap], text: str) -> dict:
    """The fields the taps add to `stream_end`."""
    extra: dict = {}
    for tap in taps:
        try:
            extra.update(await tap.finish(text))
        except Exception:
            log.exception("a reply tap failed to finish; stream_end goes without its fields")
    return extra


async def abort(taps: list[ReplyTap]) -> None:
    for tap in taps:
        try:
            await tap.abort()
        except Exception:
            log.exception("a reply tap failed to stop")
