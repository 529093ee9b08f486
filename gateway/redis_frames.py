"""Folding a batch of the Redis bus's commands: each run of reply frames in a row (fan-outs and
replay appends) becomes one `FRAMES_SCRIPT` call, so a burst of replies costs Redis a command per
batch, not per frame (`RedisBus._run_many`). `frames` and `fan_out` are the bus's registered
scripts; a command is (name or script, args, options) as the bus's batcher holds it."""
from __future__ import annotations

from typing import Any

from .redis_scripts import FrameKeys, fields
from .text import dumps_text

# The options of `RedisBus.stream_append`'s XADD (no ttl), which `FRAMES_SCRIPT` can do.
_FOLDABLE_XADD_OPTIONS = frozenset({"maxlen", "approximate"})


def fold_frames(commands: list[tuple], *, frames: Any, fan_out: Any) -> tuple[list[tuple], list[int]]:
    """`commands` with each run of two or more frames in a row (`frame_item`) made one
    `FRAMES_SCRIPT` call: a burst of replies costs a command per batch, not per frame. Only
    a run in a row is folded, so every command still reaches Redis in the order submitted.
    Returns the commands to send and, for each, how many of `commands` it answers for: 0
    for one sent as it was, else a list of that many results."""
    sent: list[tuple] = []
    folded: list[int] = []
    keys, items = FrameKeys(), []
    index, total = 0, len(commands)
    while index < total:
        end = index
        while end < total and (item := frame_item(commands[end], keys, fan_out)) is not None:
            items.append(item)
            end += 1
        if len(items) > 1:
            payload = dumps_text(items)
            sent.append((frames, (keys.keys, [payload]), {}))
            folded.append(len(items))
            index = end
        else:  # not a frame, or a frame alone: sent as it is
            sent.append(commands[index])
            folded.append(0)
            index += 1
        if items:
            keys, items = FrameKeys(), []
    return sent, folded

def frame_item(command: tuple, keys: FrameKeys, fan_out: Any) -> list | None:
    """`command` as an item of `FRAMES_SCRIPT` (its keys named by their place in `keys`),
    or None when it is not a frame: a `fan_out`, or a `stream_append` without a ttl."""
    name, args, options = command
    if name is fan_out:
        script_keys, script_args = args
        if len(script_keys) == 1:
            return ["fan_out", keys.position(script_keys[0]), 0, *script_args]
        return ["fan_out", keys.position(script_keys[0]), keys.position(script_keys[1]),
                *script_args[:5], script_args[5:]]
    if name == "xadd" and options.keys() <= _FOLDABLE_XADD_OPTIONS and options.get("approximate", True):
        key, entry = args
        max_len = options.get("maxlen")
        return ["append", keys.position(key), "" if max_len is None else max_len, fields(entry)]
    return None
