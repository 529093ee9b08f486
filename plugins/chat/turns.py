"""The chat turn machine: one turn at a time per session, on every instance together.

Admission (admission.py) decides whether a message starts now, waits in the queue, or is a
re-send. The instance holding the session's turn lock drains that session's queue oldest
first, one turn at a time (relay.py runs each). A turn runs in a task of its own, not in the
sender's connection, so it finishes and is stored even when every device has gone. A sweeper
picks up queues whose lock holder died (the lock expires, the rows stay), and the holder
re-checks the queue after releasing so no message is stranded."""
from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from gateway.errors import ServiceUnavailable
from plugins.sessions.contract import CONVERSATIONS

from . import store
from .admission import Admission, Turn
from .attachments import resolve_attachments
from .contract import TurnFailed, TurnReply
from .keys import LIVE_SESSIONS, LIVE_TTL, QUEUED_MARK_TTL, RUNNING_TURNS, RUNNING_TURNS_TTL, lock_key, queued_key
from .relay import Relay
from .waiters import TurnWaiters

if TYPE_CHECKING:
    from gateway.context import Context

log = logging.getLogger("plugins.chat.turns")


class TurnMachine:
    def __init__(self, context: "Context", *, admission: Admission, relay: Relay, waiters: TurnWaiters,
                 attachment_url_ttl: int, stop_timeout: float):
        self.context = context
        self.admission, self.relay, self.replay, self.waiters = admission, relay, relay.replay, waiters
        self.attachment_url_ttl = attachment_url_ttl
        self.stop_timeout = stop_timeout
        # Sessions whose lock this instance holds: the draining task (None for the moment between
        # taking the lock and starting it).
        self._draining: dict[str, asyncio.Task | None] = {}
        self._bookkeeping: set[asyncio.Task] = set()
        self._stopping = False

    @property
    def conversations(self):
        return self.context.contracts.require(CONVERSATIONS)

    # ------------------------------------------------------------------ submitting

    async def submit(self, turn: Turn, *, session_known: bool = False) -> dict:
        """Queue one turn (its attachments as sent); start it when the session is idle. Raises
        ApiError for a bad request. `session_known`: the caller already ensured this user's
        session (the WebSocket did at connect)."""
        if not session_known:
            await self.conversations.ensure_session(turn.user_id, turn.session_id)
        turn.attachments = await resolve_attachments(self.context, turn.user_id, turn.attachments,
                                                     self.attachment_url_ttl)
        session_id = turn.session_id
        if not await self._lock(session_id):  # busy, here or on another instance
            if not await self.admission.queue(turn):
                return _duplicate(turn)
            if await self.kick(session_id):  # the holder let go meanwhile
                return _started(turn)
            return await self.admission.tell_queued(turn)
        try:
            status = await self.admission.admit(turn)
        except BaseException:
            await self._unlock(session_id)
            raise
        if status == "started":
            self._start_draining(session_id, first=turn)
            return _started(turn)
        self._start_draining(session_id)  # a duplicate, or older turns wait: drain in order
        if status == "duplicate":
            return _duplicate(turn)
        return await self.admission.tell_queued(turn)

    async def submit_and_wait(self, turn: Turn, timeout: float | None) -> TurnReply:
        ended = self.waiters.expect(turn.turn_id)
        try:
            if (await self.submit(turn))["status"] == "duplicate":
                raise TurnFailed(f"this message was already received (client_msg_id {turn.client_msg_id})",
                                 "duplicate_message")
            return await asyncio.wait_for(ended, timeout)
        except asyncio.TimeoutError:
            raise TurnFailed(f"no reply within {timeout:g} seconds", "timeout") from None
        finally:
            self.waiters.forget(turn.turn_id)

    async def kick(self, session_id: str) -> bool:
        """Take the session's turn lock and drain its queue; False when someone already is."""
        if not await self._lock(session_id):
            return False
        self._start_draining(session_id)
        return True

    async def _lock(self, session_id: str) -> bool:
        """The session's turn lock, for this instance; False while anyone (here too) holds it."""
        if self._stopping or session_id in self._draining or not await self.admission.lock(session_id):
            return False
        self._draining[session_id] = None  # reserved until the task exists
        return True

    async def _unlock(self, session_id: str) -> None:
        self._draining.pop(session_id, None)
        with contextlib.suppress(Exception):
            await asyncio.shield(self.admission.release(session_id))

    def _start_draining(self, session_id: str, first: Turn | None = None) -> None:
        if self._stopping:  # stop() no longer waits for new turns: leave the work to the next holder
            self._background(self._unlock(session_id))
            if first is not None and first.recorded:
                self._background(store.requeue(self.context.db, first.turn_id))
            raise ServiceUnavailable("The gateway is stopping; send the message again in a moment.",
                                     error_type="stopping")
        self._draining[session_id] = asyncio.create_task(self._drain(session_id, first),
                                                         name=f"chat-turns-{session_id}")

    # ------------------------------------------------------------------ draining

    async def _drain(self, session_id: str, first: Turn | None = None) -> None:
        """Run the session's turns oldest first while holding its lock. `first`: the turn the
        submitter admitted (claimed, or with its row still to be written).

        After a turn the queue is read only when the bus says a message was queued meanwhile,
        and the lock is let go before anything else: the device that saw `stream_end` often
        sends its next message at once, and it should find the session idle."""
        renewer = asyncio.create_task(self._renew(session_id))
        released = False
        try:
            turn, look, claimed = first, first is None, False
            abandon_running = first is None
            while True:
                if turn is None:
                    if not look:
                        break
                    if self._stopping:  # queued turns may be left: keep the mark for the next holder
                        await self.context.bus.set(queued_key(session_id), "1", ttl=QUEUED_MARK_TTL)
                        break
                    row = await store.claim_next(self.context.db, session_id, abandon_running=abandon_running)
                    abandon_running, claimed = False, row is not None
                    if row is None:
                        look = await self.admission.queued_meanwhile(session_id)
                        continue
                    turn = Turn.from_row(row)
                await self._run(turn)
                # After a turn taken from the queue look again (more may wait behind it); after
                # the submitter's own turn, only when a message was queued meanwhile.
                look = claimed or await self.admission.queued_meanwhile(session_id)
                turn = None
            released = True
            self._draining.pop(session_id, None)
            try:  # every turn ended: nothing for the sweeper to end
                await self.context.bus.unmark(RUNNING_TURNS, session_id)
            except Exception:
                log.exception("unmarking the turns of session %s failed", session_id)
            await self.admission.release(session_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("draining the turn queue of session %s failed", session_id)
        finally:
            renewer.cancel()
            if not released:
                await self._unlock(session_id)
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
        # A message queued just as the lock was let go would otherwise wait for the sweeper.
        try:
            if not self._stopping and await self.context.bus.get(queued_key(session_id)) is not None \
                    and await store.queue_length(self.context.db, session_id):
                await self.kick(session_id)
        except Exception as error:  # the bus or the database is down: the sweeper looks again later
            log.warning("looking for turns queued in session %s failed: %r", session_id, error)

    async def _run(self, turn: Turn) -> None:
        status, outcome = "failed", None
        try:
            status, outcome = await self.relay.run(turn)
        except asyncio.CancelledError:
            status = "abandoned"
            raise
        except Exception:
            log.exception("chat turn %s of session %s failed", turn.turn_id, turn.session_id)
        finally:
            if status != "done":  # a finished turn's row was closed before its stream_end
                self._background(store.finish(self.context.db, turn.turn_id, status))
            if turn.sender is None:  # handed in by a plugin, which may wait for it
                self._background(self.waiters.settle(
                    turn.turn_id, outcome or TurnFailed(f"the turn ended without a reply ({status})", "turn_" + status)))

    def _background(self, coroutine) -> None:
        """Bookkeeping nobody waits for; `stop` lets it finish."""
        task = asyncio.create_task(coroutine)
        self._bookkeeping.add(task)
        task.add_done_callback(self._bookkeeping.discard)
        task.add_done_callback(_log_failure)

    async def _renew(self, session_id: str) -> None:
        """Keep the session's lock and marks while its turns run. A lock found lost (it expired
        while this instance could not renew it, or was taken) stops the turns: another instance
        may hold the session now, and its sweeper ends the reply for the devices."""
        bus = self.context.bus
        await asyncio.sleep(0)  # the turn's request to the AI core goes out first
        while True:
            try:  # a failure to reach the bus once must not end the renewing (the lock would expire)
                await bus.mark(RUNNING_TURNS, session_id, RUNNING_TURNS_TTL)
                await bus.mark(LIVE_SESSIONS, session_id, LIVE_TTL)
            except Exception:
                log.exception("marking session %s live failed", session_id)
            await asyncio.sleep(self.admission.lock_ttl / 3)
            try:
                renewed = await self.admission.renew(session_id)
            except Exception:
                log.exception("renewing the turn lock of session %s failed", session_id)
                continue
            if not renewed:
                log.warning("the turn lock of session %s was lost (expired or taken); its turn stops", session_id)
                drain = self._draining.get(session_id)
                if drain is not None:
                    drain.cancel()
                return

    async def sweep(self) -> None:
        """Drain queues whose lock holder went away, and end the replies it left unfinished."""
        for session_id in await store.sessions_waiting(self.context.db):
            await self.kick(session_id)
        bus = self.context.bus
        marked = [session_id for session_id in await bus.members(RUNNING_TURNS) if session_id not in self._draining]
        holders = await bus.get_many([lock_key(session_id) for session_id in marked])
        for session_id, holder in zip(marked, holders):
            if holder is None:
                try:
                    await self._end_abandoned_turn(session_id)
                except Exception:  # the other sessions still get their turn
                    log.exception("ending the unfinished turn of session %s failed", session_id)

    async def _end_abandoned_turn(self, session_id: str) -> None:
        """The session's holder went away (its lock expired or was let go by a cancelled turn)
        with a reply unfinished, and no message came after it: every device gets the stream_end
        the next turn would have sent, and the replay records it. Then the queue is drained as
        by any new holder, which marks the dead turn's row abandoned."""
        if not await self._lock(session_id):
            return
        try:
            dead = await self.replay.read(session_id)
            if dead is not None and dead.running:
                session = await self.conversations.get_session(session_id)
                if dead.frames and session is not None:
                    await self.relay.end_dead_turn(session["user_id"], session_id, dead, latest=True)
                await self.replay.finish(session_id, dead.turn_id)
        except BaseException:
            await self._unlock(session_id)
            raise
        self._start_draining(session_id)

    async def stop(self) -> None:
        """Let running turns finish for a while, then cancel them (their locks are released).
        A turn claimed just before the stop began still starts, so it is waited for too."""
        self._stopping = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.stop_timeout
        while self._draining:
            tasks = [task for task in self._draining.values() if task is not None]
            left = deadline - loop.time()
            if left <= 0:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                self._draining.clear()
                break
            if tasks:
                await asyncio.wait(tasks, timeout=min(left, 0.5))
            else:  # a lock taken, its task about to start
                await asyncio.sleep(0.01)
        if self._bookkeeping:  # writes the stopped turns started (their rows' final status)
            await asyncio.wait(list(self._bookkeeping), timeout=max(1.0, deadline - loop.time()))


def _started(turn: Turn) -> dict:
    return {"status": "started", "turn_id": turn.turn_id, "session_id": turn.session_id}


def _duplicate(turn: Turn) -> dict:
    return {"status": "duplicate", "session_id": turn.session_id, "client_msg_id": turn.client_msg_id}


def _log_failure(task: "asyncio.Task") -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("chat bookkeeping failed: %r", task.exception())
