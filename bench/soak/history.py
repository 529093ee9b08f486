"""The soak's sessions given a past before the load starts: each device's session holds `depth`
messages (the soak's own question and reply, alternating), as a person's sessions do after a
while.

Why: every instance of the gateway keeps the latest 50 messages of recently used sessions in
memory (plugins/sessions/history_cache.py, bounded by sessions and characters). Sessions that
start empty fill that copy for as long as they take to reach 50 messages, about 17 minutes of the
soak's pace (1.5 turns a minute): a rise of the gateway's memory that levels off at the cache's
bound, which the soak would judge as growth from minute 5. With a past, the first turn of each
session reads its 50 latest messages and the copy stays that size: what is left to judge is
memory that grows beyond a full working set."""
from __future__ import annotations

from typing import Any


def seed_history(url: str, sessions: list[tuple[str, str]], depth: int, question: str, reply: str) -> int:
    """Create each (user id, session id) with `depth` messages unless it exists; the messages
    written. Blocking (psycopg2): call it in a thread, once the services made their tables."""
    import psycopg2

    if depth <= 0 or not sessions:
        return 0
    users, ids = [user for user, _ in sessions], [session for _, session in sessions]
    connection: Any = psycopg2.connect(url, application_name="bench-soak-seed")
    try:
        with connection, connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO chat_sessions (user_id, id, title) "
                "SELECT user_id, id, 'Soak history' FROM unnest(%s::text[], %s::text[]) AS given (user_id, id) "
                "ON CONFLICT DO NOTHING RETURNING user_id, id", (users, ids))
            created = cursor.fetchall()
            if not created:
                return 0
            cursor.execute(
                "INSERT INTO chat_messages (user_id, session_id, role, content) "
                "SELECT given.user_id, given.id, CASE WHEN number %% 2 = 1 THEN 'user' ELSE 'assistant' END, "
                "       CASE WHEN number %% 2 = 1 THEN replace(%s, '{n}', ((number + 1) / 2)::text) ELSE %s END "
                "FROM unnest(%s::text[], %s::text[]) AS given (user_id, id), generate_series(1, %s) AS number "
                "ORDER BY given.id, number",
                (question, reply, [user for user, _ in created], [session for _, session in created], depth))
            return cursor.rowcount
    finally:
        connection.close()
