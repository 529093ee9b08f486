"""SQL of the chat plugin: the per-session turn queue and the known clients."""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import aiopg

from gateway.batching import Batcher
from gateway.database import execute, fetch_all, fetch_one, fetch_value, json_rows, transaction
from gateway.text import dumps_text

if TYPE_CHECKING:
    from gateway.context import Context

QUEUE_COLUMNS = ("id, turn_id, session_id, user_id, text, mode, attachments, client_msg_id, "
                 "sender_connection, metadata, client_info, status")
CLIENT_COLUMNS = ("client_id, user_id, device_name, user_agent, note, "
                  "(extract(epoch FROM last_seen) * 1000)::bigint AS last_seen, online")
# Finished queue rows are kept this long so a late re-send of a client_msg_id is still recognised.
KEEP_FINISHED = "1 day"


# A row of a turn that already runs, and a turn's final status, commit without waiting for the
# WAL flush (PostgreSQL's asynchronous commit: a crash can lose the last fraction of a second of
# them, never corrupt them): the turn's messages are stored durably beside them. A queued row
# holds the user's text until its turn runs, so it, and its claim, commit durably.
ASYNC_COMMIT = "SET LOCAL synchronous_commit TO OFF; "

# The prologue of a statement that starts a session's turn: turns left `running` by an instance
# that died are marked abandoned in the same round trip.
ABANDON_RUNNING = ("WITH abandoned AS (UPDATE chat_turn_queue SET status = 'abandoned', finished_at = now() "
                   "WHERE user_id = %(user)s AND session_id = %(session)s AND status = 'running') ")


async def enqueue(db: aiopg.Pool, *, turn_id: str, session_id: str, user_id: str, text: str, mode: str,
                  attachments: list[dict], client_msg_id: str | None, sender_connection: str | None,
                  metadata: dict | None = None, client_info: dict | None = None, start: bool = False,
                  running: bool = False) -> dict | None:
    """The new row (status `queued`); None when this client_msg_id was already received for the
    session. With `start` (the caller holds the session's turn lock) the row is claimed in the
    same statement, status `running`, unless older turns are waiting — then it stays `queued`
    behind them. With `running` it is recorded as running whatever waits (the turn already
    started). Both mark turns left `running` by an instance that died as abandoned."""
    params = {"turn": turn_id, "session": session_id, "user": user_id, "text": text, "mode": mode,
              "attachments": dumps_text(attachments), "client_msg_id": client_msg_id or None,
              "sender": sender_connection,
              "metadata": dumps_text(metadata) if metadata is not None else None,
              "client_info": dumps_text(client_info) if client_info is not None else None}
    status, prologue = "'queued'", ""
    if start or running:
        prologue = ABANDON_RUNNING
        status = "'running'" if running else (
            "CASE WHEN EXISTS (SELECT 1 FROM chat_turn_queue WHERE user_id = %(user)s "
            "AND session_id = %(session)s AND status = 'queued') THEN 'queued' ELSE 'running' END")
    return await fetch_one(
        db,
        f"{ASYNC_COMMIT if running else ''}{prologue}INSERT INTO chat_turn_queue (turn_id, session_id, user_id, text, mode, "
        f"attachments, client_msg_id, sender_connection, metadata, client_info, status) VALUES (%(turn)s, "
        f"%(session)s, %(user)s, %(text)s, %(mode)s, %(attachments)s, %(client_msg_id)s, %(sender)s, %(metadata)s, "
        f"%(client_info)s, {status}) "
        f"ON CONFLICT (user_id, session_id, client_msg_id) WHERE client_msg_id IS NOT NULL DO NOTHING "
        f"RETURNING {QUEUE_COLUMNS}",
        params)


# Rows of turns that already run, many at once (json_rows: one parameter for the batch), as
# `enqueue` with `running` writes each.
RECORD_RUNNING_SQL = (
    f"{ASYNC_COMMIT}WITH given AS (SELECT * FROM json_to_recordset(%s::json) AS given ("
    f"  turn_id text, session_id text, user_id text, text text, mode text, attachments jsonb, "
    f"  client_msg_id text, sender_connection text, metadata jsonb, client_info jsonb)), "
    f"abandoned AS (UPDATE chat_turn_queue SET status = 'abandoned', finished_at = now() "
    f"  WHERE status = 'running' AND (user_id, session_id) IN (SELECT user_id, session_id FROM given)) "
    f"INSERT INTO chat_turn_queue (turn_id, session_id, user_id, text, mode, attachments, client_msg_id, "
    f"sender_connection, metadata, client_info, status) "
    f"SELECT turn_id, session_id, user_id, text, mode, attachments, client_msg_id, sender_connection, metadata, "
    f"client_info, 'running' FROM given "
    f"ON CONFLICT (user_id, session_id, client_msg_id) WHERE client_msg_id IS NOT NULL DO NOTHING "
    f"RETURNING turn_id")


class TurnRecords:
    """The two rows every turn writes beside its reply, batched with other turns' (a burst of
    turns then costs a statement per batch, not per turn; gateway.batching): the row of a turn
    that already runs, and a turn's final status. Both commit asynchronously, as `enqueue` with
    `running` and `finish` do."""

    def __init__(self, context: "Context"):
        self.context = context
        self._running: Batcher[dict, bool] = Batcher(self._record_one, self._record_many)
        self._finished: Batcher[tuple[str, str], None] = Batcher(self._finish_one, self._finish_many)

    def running(self, columns: dict) -> "asyncio.Future[bool]":
        """`enqueue(**columns, running=True)`, under way once this returns; False when the queue
        already had the client_msg_id."""
        return self._running.submit(columns)

    async def finish(self, turn_id: str, status: str) -> None:
        await self._finished.submit((turn_id, status))

    async def _record_one(self, columns: dict) -> bool:
        return await enqueue(self.context.db, **columns, running=True) is not None

    async def _record_many(self, batch: list[dict]) -> list[bool]:
        rows = json_rows([{**columns, "client_msg_id": columns["client_msg_id"] or None} for columns in batch])
        inserted = {row["turn_id"] for row in await fetch_all(self.context.db, RECORD_RUNNING_SQL, (rows,))}
        return [columns["turn_id"] in inserted for columns in batch]

    async def _finish_one(self, finished: tuple[str, str]) -> None:
        await finish(self.context.db, *finished)

    async def _finish_many(self, batch: list[tuple[str, str]]) -> list[None]:
        rows = json_rows([{"turn_id": turn_id, "status": status} for turn_id, status in batch])
        await execute(self.context.db,
                      f"{ASYNC_COMMIT}UPDATE chat_turn_queue AS queue SET status = finished.status, "
                      f"finished_at = now() FROM json_to_recordset(%s::json) AS finished (turn_id text, status text) "
                      f"WHERE queue.turn_id = finished.turn_id", (rows,))
        return [None] * len(batch)


async def claim_next(db: aiopg.Pool, user_id: str, session_id: str, *,
                     abandon_running: bool = False) -> dict | None:
    """Take the oldest waiting turn of the session (the caller holds the session's turn lock).
    A new lock holder first marks turns left `running` by an instance that died as abandoned,
    in the same statement: one round trip less before a turn's first token."""
    abandon = ABANDON_RUNNING if abandon_running else ""
    return await fetch_one(
        db,
        f"{abandon}UPDATE chat_turn_queue SET status = 'running' WHERE id = ("
        f"  SELECT id FROM chat_turn_queue WHERE user_id = %(user)s AND session_id = %(session)s "
        f"  AND status = 'queued' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING {QUEUE_COLUMNS}",
        {"user": user_id, "session": session_id})


async def finish(db: aiopg.Pool, turn_id: str, status: str) -> None:
    await execute(db, ASYNC_COMMIT + "UPDATE chat_turn_queue SET status = %s, finished_at = now() "
                                     "WHERE turn_id = %s", (status, turn_id))


async def requeue(db: aiopg.Pool, turn_id: str) -> None:
    """A claimed turn that did not start (the instance is stopping) waits again."""
    await execute(db, "UPDATE chat_turn_queue SET status = 'queued' WHERE turn_id = %s AND status = 'running'",
                  (turn_id,))


async def message_ids(db: aiopg.Pool, user_id: str, session_id: str) -> list[str]:
    """The client_msg_ids the queue remembers for the session (finished rows are kept a day)."""
    rows = await fetch_all(db, "SELECT client_msg_id FROM chat_turn_queue WHERE user_id = %s AND session_id = %s "
                               "AND client_msg_id IS NOT NULL", (user_id, session_id))
    return [row["client_msg_id"] for row in rows]


async def release_message_id(db: aiopg.Pool, user_id: str, session_id: str, client_msg_id: str,
                             dead_after: float) -> bool:
    """Free a client_msg_id whose turn died before it stored the message (the caller holds the
    session's turn lock and checked that no such message is stored): its rows that are
    `abandoned`, `failed`, or `running` for longer than `dead_after` seconds (their holder let the
    lock expire) give the id up, a running one becoming `abandoned`. False, and nothing changes,
    when a row holding the id waits (`queued`), ran, or is running and younger."""
    row = await fetch_one(
        db,
        "WITH held AS (SELECT status, status IN ('abandoned', 'failed') OR (status = 'running' "
        "  AND created_at < now() - make_interval(secs => %(age)s)) AS dead FROM chat_turn_queue "
        "  WHERE user_id = %(user)s AND session_id = %(session)s AND client_msg_id = %(id)s FOR UPDATE), "
        "released AS (UPDATE chat_turn_queue SET client_msg_id = NULL, "
        "  status = CASE WHEN status = 'running' THEN 'abandoned' ELSE status END, "
        "  finished_at = coalesce(finished_at, now()) "
        "  WHERE user_id = %(user)s AND session_id = %(session)s AND client_msg_id = %(id)s "
        "  AND NOT EXISTS (SELECT 1 FROM held WHERE NOT dead)) "
        "SELECT NOT EXISTS (SELECT 1 FROM held WHERE NOT dead) AS released",
        {"user": user_id, "session": session_id, "id": client_msg_id, "age": float(dead_after)})
    return bool(row and row["released"])


async def queue_length(db: aiopg.Pool, user_id: str, session_id: str) -> int:
    return int(await fetch_value(db, "SELECT count(*) FROM chat_turn_queue WHERE user_id = %s AND session_id = %s "
                                     "AND status = 'queued'", (user_id, session_id)) or 0)


async def queued_for_user(db: aiopg.Pool, user_id: str) -> int:
    """How many of the user's turns wait, over all their sessions."""
    return int(await fetch_value(db, "SELECT count(*) FROM chat_turn_queue WHERE user_id = %s "
                                     "AND status = 'queued'", (user_id,)) or 0)


async def sessions_waiting(db: aiopg.Pool) -> list[tuple[str, str]]:
    """(user_id, session_id) of every session with a waiting turn."""
    rows = await fetch_all(db, "SELECT DISTINCT user_id, session_id FROM chat_turn_queue WHERE status = 'queued'")
    return [(row["user_id"], row["session_id"]) for row in rows]


async def purge_finished(db: aiopg.Pool) -> int:
    return await execute(db, f"DELETE FROM chat_turn_queue WHERE status NOT IN ('queued', 'running') "
                             f"AND finished_at < now() - interval '{KEEP_FINISHED}'")


async def client_connected(db: aiopg.Pool, *, client_id: str, user_id: str, device_name: str,
                           user_agent: str) -> None:
    await execute(
        db,
        "INSERT INTO known_clients (client_id, user_id, device_name, user_agent, last_seen, online) "
        "VALUES (%s, %s, %s, %s, now(), true) ON CONFLICT (client_id) DO UPDATE SET "
        "user_id = EXCLUDED.user_id, device_name = CASE WHEN EXCLUDED.device_name = '' "
        "THEN known_clients.device_name ELSE EXCLUDED.device_name END, "
        "user_agent = EXCLUDED.user_agent, last_seen = now(), online = true",
        (client_id, user_id, device_name, user_agent))


async def client_disconnected(db: aiopg.Pool, client_id: str) -> None:
    await execute(db, "UPDATE known_clients SET last_seen = now(), online = false WHERE client_id = %s",
                  (client_id,))


async def known_clients(db: aiopg.Pool, user_id: str | None = None) -> list[dict]:
    if user_id:
        return await fetch_all(db, f"SELECT {CLIENT_COLUMNS} FROM known_clients WHERE user_id = %s "
                                   f"ORDER BY last_seen DESC", (user_id,))
    return await fetch_all(db, f"SELECT {CLIENT_COLUMNS} FROM known_clients ORDER BY last_seen DESC")


async def set_client_note(db: aiopg.Pool, client_id: str, note: str) -> dict | None:
    async with transaction(db) as cursor:
        await cursor.execute(f"UPDATE known_clients SET note = %s WHERE client_id = %s "
                             f"RETURNING {CLIENT_COLUMNS}", (note, client_id))
        row = await cursor.fetchone()
        return dict(row) if row else None
