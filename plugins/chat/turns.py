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
import math
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Coroutine

from gateway.errors import Conflict, ServiceUnavailable, TooManyRequests
from plugins.sessions.contract import CONVERSATIONS, Conversations

from . import store
from .admission import Admission, Turn
from .attachments import resolve_attachments
from .contract import TurnFailed, TurnReply
from .keys import QUEUED_MARK_TTL, RATE_WINDOW, RUNNING_TURNS, SessionRef, lock_key, queued_key, rate_key, running_marks
from .pacing import StartPacer
from .relay import Relay
from .waiters import TurnWaiters

if TYPE_CHECKING:
    from gateway.context import Context

log = logging.getLogger("plugins.chat.turns")

# How long an edit or a regeneration waits for the turn before it to let the session go.
REWRITE_LOCK_WAIT = 3.0


class TurnMachine:
    def __init__(self, context: "Context", *, admission: Admission, relay: Relay, waiters: TurnWaiters,
                 attachment_url_ttl: int, stop_timeout: float, max_queued_turns: int,
                 max_messages_per_minute: int):
        self.context = context
        self.max_queued_turns, self.max_messages_per_minute = max_queued_turns, max_messages_per_minute
        self.admission, self.relay, self.replay, self.waiters = admission, relay, relay.replay, waiters
        self.attachment_url_ttl = attachment_url_ttl
        self.stop_timeout = stop_timeout
        # Sessions whose lock this instance holds: the draining task (None for the moment between
        # taking the lock and starting it).
        self._draining: dict[SessionRef, asyncio.Task | None] = {}
        self._bookkeeping: set[asyncio.Task] = set()
        self._stopping = False
        self.pacer = StartPacer()

    @property
    def conversations(self) -> Conversations:
        return self.context.contracts.require(CONVERSATIONS)

    # ------------------------------------------------------------------ submitting

    async def submit(self, turn: Turn, *, session_known: bool = False) -> dict:
        """Queue one turn (its attachments as sent); start it when the session is idle. Raises
        ApiError for a bad request. `session_known`: the caller already ensured this user's
        session (the WebSocket did at connect). In a burst it waits its turn to start (pacing.py)."""
        await self.pacer.start()
        await self._limit_rate(turn.user_id)
        if not session_known:
            await self.conversations.ensure_session(turn.user_id, turn.session_id)
        turn.attachments = await resolve_attachments(self.context, turn.user_id, turn.attachments,
                                                     self.attachment_url_ttl)
        session = turn.session
        locked, on_bus = await self._lock_for(session, turn)
        if not locked:  # busy, here or on another instance
            await self._limit_queue(turn.user_id)
            if not await self.admission.queue(turn):
                return _duplicate(turn)
            if await self.kick(session):  # the holder let go meanwhile
                return _started(turn)
            return await self.admission.tell_queued(turn)
        try:
            status = await self.admission.admit(turn, on_bus)
        except BaseException:
            await self._unlock(session)
            raise
        if status == "started":
            self._start_draining(session, first=turn)
            return _started(turn)
        self._start_draining(session)  # a duplicate, or older turns wait: drain in order
        if status == "duplicate":
            return _duplicate(turn)
        return await self.admission.tell_queued(turn)

    async def submit_rewrite(self, turn: Turn, rewrite: Callable[[], Awaitable[None]]) -> dict:
        """Run `turn` after `rewrite` changed the session's stored history (an edited message,
        a regenerated reply), both under the session's turn lock: refused (Conflict
        `turn_running`) while a turn runs or waits in the session, here or on another instance."""
        await self.pacer.start()
        await self._limit_rate(turn.user_id)
        session = turn.session
        if not await self._lock_within(session, REWRITE_LOCK_WAIT):
            raise turn_running()
        try:
            if await store.queue_length(self.context.db, session.user_id, session.session_id):
                raise turn_running()
            await rewrite()
        except BaseException:
            await self._unlock(session)
            raise
        self._start_draining(session, first=turn)
        return _started(turn)

    def stop_turn(self, user_id: str, session_id: str, turn_id: str | None) -> bool:
        """Stop the turn if this instance runs it (see Relay.request_stop)."""
        return self.relay.request_stop(user_id, session_id, turn_id)

    async def _limit_rate(self, user_id: str) -> None:
        """At most `max_messages_per_minute` messages a user, counted on the bus (every instance
        sharing it shares the count), whichever way they came in."""
        count, remaining = await self.context.bus.incr(rate_key(user_id), RATE_WINDOW)
        if count > self.max_messages_per_minute:
            retry_after = max(1, math.ceil(remaining))
            raise TooManyRequests(f"Too many messages; send again in {retry_after} seconds.", error_type="rate_limited",
                                  headers={"Retry-After": str(retry_after)},
                                  hint=f"At most {self.max_messages_per_minute} messages a minute.")

    async def _limit_queue(self, user_id: str) -> None:
        """At most `max_queued_turns` of a user's messages wait behind running turns (counted in
        the shared queue, so over every instance; two sending in the same instant may both pass)."""
        if await store.queued_for_user(self.context.db, user_id) >= self.max_queued_turns:
            raise TooManyRequests("Too many messages are waiting for a reply; send this one when a reply ends.",
                                  error_type="queue_full",
                                  hint=f"At most {self.max_queued_turns} messages may wait for their turn.")

    async def submit_and_wait(self, turn: Turn, timeout: float | None,
                              on_piece: Callable[[str], None] | None = None) -> TurnReply:
        ended = self.waiters.expect(turn.turn_id, on_piece)
        try:
            if (await self.submit(turn))["status"] == "duplicate":
                raise TurnFailed(f"this message was already received (client_msg_id {turn.client_msg_id})",
                                 "duplicate_message")
            return await asyncio.wait_for(ended, timeout)
        except asyncio.TimeoutError:
            raise TurnFailed(f"no reply within {timeout:g} seconds", "timeout") from None
        finally:
            self.waiters.forget(turn.turn_id)

    async def kick(self, session: SessionRef) -> bool:
        """Take the session's turn lock and drain its queue; False when someone already is."""
        if not await self._lock(session):
            return False
        self._start_draining(session)
        return True

    async def _lock(self, session: SessionRef) -> bool:
        """The session's turn lock, for this instance; False while anyone (here too) holds it."""
        return (await self._lock_for(session))[0]

    async def _lock_for(self, session: SessionRef, turn: Turn | None = None) -> tuple[bool, bool | None]:
        """`_lock`; with `turn`, the same step says whether the bus admits it (Admission.lock)."""
        if self._stopping or session in self._draining:
            return False, None
        locked, on_bus = await self.admission.lock(session, turn)
        if locked:
            self._draining[session] = None  # reserved until the task exists
        return locked, on_bus

    async def _lock_within(self, session: SessionRef, seconds: float) -> bool:
        """The lock, waiting up to `seconds` for it: a turn's `stream_end` goes out before its
        drain lets the lock go, and a device regenerating or editing at once must not be refused."""
        deadline = asyncio.get_running_loop().time() + seconds
        while not await self._lock(session):
            if self._stopping or asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    async def _unlock(self, session: SessionRef) -> None:
        self._draining.pop(session, None)
        with contextlib.suppress(Exception):
            await asyncio.shield(self.admission.release(session))

    def _start_draining(self, session: SessionRef, first: Turn | None = None) -> None:
        if self._stopping:  # stop() no longer waits for new turns: leave the work to the next holder
            self._background(self._unlock(session))
            if first is not None and first.recorded:
                self._background(store.requeue(self.context.db, first.turn_id))
            raise ServiceUnavailable("The gateway is stopping; send the message again in a moment.",
                                     error_type="stopping")
        self._draining[session] = asyncio.create_task(self._drain(session, first),
                                                         name=f"chat-turns-{session.key}")

    # ------------------------------------------------------------------ draining

    async def _drain(self, session: SessionRef, first: Turn | None = None) -> None:
        """Run the session's turns oldest first while holding its lock. `first`: the turn the
        submitter admitted (claimed, or with its row still to be written).

        After a turn the queue is read only when the bus says a message was queued meanwhile,
        and when none was, the lock is let go in the same step (`_let_go`): the device that saw
        `stream_end` often sends its next message at once, and it should find the session idle.

        The lock is renewed from a third of its lifetime on (`_renew`); most turns end sooner,
        and a task per turn beside the reply would cost every turn of a burst its steps."""
        renewer: asyncio.Task | None = None

        def start_renewing() -> None:
            nonlocal renewer
            renewer = asyncio.create_task(self._renew(session))

        first_renewal = asyncio.get_running_loop().call_later(self.admission.lock_ttl / 3, start_renewing)
        released = let_go = False
        try:
            turn, claimed = first, False
            abandon_running = first is None
            while True:
                if turn is None:
                    if self._stopping:  # queued turns may be left: keep the mark for the next holder
                        await self.context.bus.set(queued_key(session.key), "1", ttl=QUEUED_MARK_TTL)
                        break
                    row = await store.claim_next(self.context.db, session.user_id, session.session_id,
                                                 abandon_running=abandon_running)
                    abandon_running, claimed = False, row is not None
                    if row is None:
                        if let_go := await self._let_go(session):
                            break
                        continue
                    turn = Turn.from_row(row)
                await self._run(turn)
                # After a turn taken from the queue look again (more may wait behind it); after
                # the submitter's own turn, only when a message was queued meanwhile.
                if not claimed and (let_go := await self._let_go(session)):
                    break
                turn = None
            released = True
            if not let_go:  # stopping: let go whatever waits
                self._draining.pop(session, None)
                await self.admission.release(session, turns_ended=True)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("draining the turn queue of session %s failed", session.session_id)
        finally:
            first_renewal.cancel()
            if renewer is not None:
                renewer.cancel()
            if not released:
                await self._unlock(session)
            if renewer is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await renewer
        # A message queued just as the lock was let go would otherwise wait for the sweeper (let
        # go by `_let_go`, the bus looked in the same step).
        try:
            if not let_go and not self._stopping \
                    and await self.context.bus.get(queued_key(session.key)) is not None \
                    and await store.queue_length(self.context.db, session.user_id, session.session_id):
                await self.kick(session)
        except Exception as error:  # the bus or the database is down: the sweeper looks again later
            log.warning("looking for turns queued in session %s failed: %r", session.session_id, error)

    async def _let_go(self, session: SessionRef) -> bool:
        """The lock let go, unless a message was queued since the last look (False: drain it).
        Forgotten here first: a submitter on this instance may try the lock once it is free."""
        task = self._draining.pop(session, None)
        if await self.admission.release_unless_queued(session):
            return True
        self._draining[session] = task
        return False

    async def _run(self, turn: Turn) -> None:
        status, outcome = "failed", None
        try:
            # A turn handed in without a device: its waiter, here or elsewhere, may want the pieces.
            watcher = self.waiters.watch(turn.turn_id) if turn.sender is None else None
            status, outcome = await self.relay.run(turn, watcher)
        except asyncio.CancelledError:
            status = "abandoned"
            raise
        except Exception:
            log.exception("chat turn %s of session %s failed", turn.turn_id, turn.session_id)
        finally:
            if status != "done":  # a finished turn's row was closed before its stream_end
                self._background(self.relay.records.finish(turn.turn_id, status))
            if turn.sender is None:  # handed in by a plugin, which may wait for it
                self._background(self.waiters.settle(
                    turn.turn_id, outcome or TurnFailed(f"the turn ended without a reply ({status})", "turn_" + status)))

    def _background(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        """Bookkeeping nobody waits for; `stop` lets it finish."""
        task = asyncio.create_task(coroutine)
        self._bookkeeping.add(task)
        task.add_done_callback(self._bookkeeping.discard)
        task.add_done_callback(_log_failure)

    async def _mark(self, session: SessionRef) -> None:
        """Mark the session as running a turn (for the sweeper) and live again while turns run
        (the lock's taking made the marks, Admission.lock). A failure to reach the bus once is logged:
        it must not end the turn, nor the renewing (the lock would expire)."""
        bus = self.context.bus
        try:  # both in one round trip on a shared bus
            await asyncio.gather(*(bus.mark(*mark) for mark in running_marks(session.key)))
        except Exception:
            log.exception("marking session %s live failed", session.session_id)

    async def _renew(self, session: SessionRef) -> None:
        """Keep the session's lock and marks while its turns run, every third of the lock's
        lifetime (the first a third after the lock was taken). A lock found lost (it expired
        while this instance could not renew it, or was taken) stops the turns: another instance
        may hold the session now, and its sweeper ends the reply for the devices."""
        while True:
            try:
                renewed = await self.admission.renew(session)
            except Exception:
                log.exception("renewing the turn lock of session %s failed", session.session_id)
                renewed = True  # tried again a third of the lifetime later
            if not renewed:
                log.warning("the turn lock of session %s was lost (expired or taken); its turn stops", session.session_id)
                drain = self._draining.get(session)
                if drain is not None:
                    drain.cancel()
                return
            await self._mark(session)
            await asyncio.sleep(self.admission.lock_ttl / 3)

    async def sweep(self) -> None:
        """Drain queues whose lock holder went away, and end the replies it left unfinished."""
        for user_id, session_id in await store.sessions_waiting(self.context.db):
            await self.kick(SessionRef(user_id, session_id))
        bus = self.context.bus
        marked = [session for session in map(SessionRef.from_key, await bus.members(RUNNING_TURNS))
                  if session not in self._draining]
        holders = await bus.get_many([lock_key(session.key) for session in marked])
        for session, holder in zip(marked, holders):
            if holder is None:
                try:
                    await self._end_abandoned_turn(session)
                except Exception:  # the other sessions still get their turn
                    log.exception("ending the unfinished turn of session %s failed", session.session_id)

    async def _end_abandoned_turn(self, session: SessionRef) -> None:
        """The session's holder went away (its lock expired or was let go by a cancelled turn)
        with a reply unfinished, and no message came after it: every device gets the stream_end
        the next turn would have sent, and the replay records it. Then the queue is drained as
        by any new holder, which marks the dead turn's row abandoned."""
        if not await self._lock(session):
            return
        try:
            dead = await self.replay.read(session.key)
            if dead is not None and dead.running:
                if dead.frames and await self.conversations.get_session(session.user_id, session.session_id):
                    await self.relay.end_dead_turn(session, dead, latest=True)
                await self.replay.finish(session.key, dead.turn_id)
        except BaseException:
            await self._unlock(session)
            raise
        self._start_draining(session)

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


def turn_running() -> Conflict:
    return Conflict("A reply is still running in this session; stop it or wait for it to end.",
                    error_type="turn_running", hint="Send `stop` first, or wait for `stream_end`.")


def _started(turn: Turn) -> dict:
    return {"status": "started", "turn_id": turn.turn_id, "session_id": turn.session_id}


def _duplicate(turn: Turn) -> dict:
    return {"status": "duplicate", "session_id": turn.session_id, "client_msg_id": turn.client_msg_id}


def _log_failure(task: "asyncio.Task") -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("chat bookkeeping failed: %r", task.exception())
