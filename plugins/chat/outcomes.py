"""What a turn's steps end in: a failure as the devices are told it (`as_failure`), a step
whose failure must not stop the others (`best_effort`), and the outcomes of the turn's own
tasks, read so that asyncio never logs one as lost."""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable

from gateway.errors import unavailable_error
from plugins.ai_core.contract import AiCoreError

from .admission import Turn
from .contract import TurnFailed
from .frames import turn_error_text

log = logging.getLogger("plugins.chat.relay")


def as_failure(error: Exception, turn: Turn) -> TurnFailed:
    if isinstance(error, TurnFailed):
        return error
    if isinstance(error, AiCoreError):
        # Devices see whether the AI core could be reached, or sent more than a reply may hold;
        # what it answered, and where it runs, stay in the log.
        log.warning("the AI core failed turn %s: %s (%s)", turn.turn_id, error.error, error.error_type)
        error_type = error.error_type if error.error_type in ("ai_core_unreachable", "reply_too_large") \
            else "ai_core_failed"
        return TurnFailed(turn_error_text(error_type), error_type)
    if unavailable_error(error) is not None:  # the database or the bus went away
        error_type = storage_error_type(error)
        return TurnFailed(turn_error_text(error_type), error_type)
    # A defect here, not the AI core's doing: every device's stream still ends.
    log.exception("chat turn %s of session %s failed", turn.turn_id, turn.session_id, exc_info=error)
    return TurnFailed(turn_error_text("internal_error"), "internal_error")


def storage_error_type(error: Exception) -> str:
    """`database_unavailable` (or `bus_unavailable`) when that is why a write failed: the device
    may tell the person to try again in a moment."""
    unavailable = unavailable_error(error)
    return unavailable.error_type if unavailable is not None and unavailable.error_type else "storage_failed"


async def best_effort(step: Awaitable[Any], what: str) -> Exception | None:
    """Await `step`; a failure is logged and returned rather than raised."""
    try:
        await step
    except Exception as error:
        log.warning("%s failed: %r", what, error)
        return error
    return None


async def already_stored(message: dict) -> dict:
    """`message`, as the awaitable a write of it would be."""
    return message


def outcome_read(future: "asyncio.Future") -> None:
    """Read a future's outcome nobody waits for any more (asyncio logs an exception never read)."""
    if not future.cancelled():
        future.exception()


def confirmation(task: "asyncio.Task[dict]") -> dict:
    """The stored user message, or TurnFailed when it could not be stored."""
    try:
        return task.result()
    except TurnFailed:
        raise
    except Exception as error:
        log.error("storing the user's message failed: %r", error)
        error_type = storage_error_type(error)
        raise TurnFailed(turn_error_text(error_type), error_type) from None


async def wait_out(task: "asyncio.Task", cancel: bool = False) -> None:
    """Wait for `task` to end (cancelled first with `cancel`), leaving its outcome unraised."""
    if cancel:
        task.cancel()
    await asyncio.wait([task])
    outcome_read(task)
