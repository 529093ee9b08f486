"""The conversations store's SQL that is worth naming: the columns every read returns, the
statements that add messages (one, or a batch in one statement), and search's (docs/sessions.md)."""
from __future__ import annotations

from .title_text import DEFAULT_TITLES_SQL

SESSION_COLUMNS = ("id, user_id, title, is_main, "
                   "(extract(epoch FROM created_at) * 1000)::bigint AS created_at, "
                   "(extract(epoch FROM updated_at) * 1000)::bigint AS updated_at")
MESSAGE_COLUMNS = ("id, session_id, user_id, role, msg_type, content, metadata, client_msg_id, "
                   "(extract(epoch FROM created_at) * 1000)::bigint AS created_at")

# The two search statements, named so that the plan test and the benchmark EXPLAIN exactly these.
TOTALS_SQL = ("SELECT (SELECT count(DISTINCT user_id) FROM chat_sessions) AS users, "
              "(SELECT count(*) FROM chat_sessions) AS sessions, (SELECT count(*) FROM chat_messages) AS messages")
SEARCH_COUNT_SQL = "SELECT count(*) FROM chat_messages WHERE user_id = %s AND content ILIKE %s"
SEARCH_PAGE_SQL = (
    "SELECT m.id, m.session_id, s.title AS session_title, m.role, m.content, "
    "(extract(epoch FROM m.created_at) * 1000)::bigint AS created_at "
    "FROM chat_messages AS m JOIN chat_sessions AS s ON s.user_id = m.user_id AND s.id = m.session_id "
    "WHERE m.user_id = %s AND m.content ILIKE %s "
    "ORDER BY m.id DESC LIMIT %s OFFSET %s")


def escape_like(text: str) -> str:
    """`text` as a literal inside a LIKE pattern (backslash is PostgreSQL's default escape)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# One message: inserted, its session touched when it went in, and the row returned; or the
# row stored before with the same client_msg_id (`duplicate`).
ADD_MESSAGE_SQL = (
    f"WITH inserted AS ("
    f"  INSERT INTO chat_messages (session_id, user_id, role, msg_type, content, metadata, client_msg_id)"
    f"  VALUES (%(session)s, %(user)s, %(role)s, %(type)s, %(content)s, %(metadata)s, %(client)s)"
    f"  ON CONFLICT (user_id, session_id, client_msg_id) WHERE client_msg_id IS NOT NULL DO NOTHING"
    f"  RETURNING {MESSAGE_COLUMNS}), "
    f"touched AS (UPDATE chat_sessions SET updated_at = now(), "
    f"  title = CASE WHEN title IN ({DEFAULT_TITLES_SQL}) AND %(title)s::text IS NOT NULL THEN %(title)s ELSE title END "
    f"  WHERE user_id = %(user)s AND id = %(session)s AND EXISTS (SELECT 1 FROM inserted)) "
    f"SELECT *, false AS duplicate FROM inserted "
    f"UNION ALL "
    f"SELECT {MESSAGE_COLUMNS}, true AS duplicate FROM chat_messages "
    f"WHERE user_id = %(user)s AND session_id = %(session)s "
    f"AND client_msg_id = %(client)s AND NOT EXISTS (SELECT 1 FROM inserted)")


# Many messages at once: the same outcome per message as ADD_MESSAGE_SQL, from one JSON array
# of them (gateway.database.json_rows). One constant statement whatever the batch's size: a
# statement of two CTEs per message cost PostgreSQL ~15 ms to plan and run for 50 messages, and
# this process 27 µs a message to quote (bench/README.md). The ids are drawn in the batch's
# order, so the rows can be matched to their messages (and messages stored together are
# numbered in the order they came).
ADD_MESSAGES_SQL = f"""WITH given AS (
  SELECT batch_index, session AS session_id, "user" AS user_id, role, type AS msg_type, content,
         metadata::jsonb AS metadata, client AS client_msg_id, title, nextval('chat_messages_id_seq') AS new_id
  FROM json_to_recordset(%s::json) AS given (batch_index int, session text, "user" text, role text, type text,
                                              content text, metadata text, client text, title text)
  ORDER BY batch_index),
inserted AS (
  INSERT INTO chat_messages (id, session_id, user_id, role, msg_type, content, metadata, client_msg_id)
  SELECT new_id, session_id, user_id, role, msg_type, content, metadata, client_msg_id FROM given
  ON CONFLICT (user_id, session_id, client_msg_id) WHERE client_msg_id IS NOT NULL DO NOTHING
  RETURNING *),
touched AS (
  UPDATE chat_sessions SET updated_at = now(),
    title = CASE WHEN chat_sessions.title IN ({DEFAULT_TITLES_SQL}) AND changed.title IS NOT NULL
                 THEN changed.title ELSE chat_sessions.title END
  FROM (SELECT DISTINCT ON (inserted.user_id, inserted.session_id) inserted.user_id, inserted.session_id, given.title
        FROM inserted JOIN given ON given.new_id = inserted.id
        ORDER BY inserted.user_id, inserted.session_id, given.title IS NULL, inserted.id) AS changed
  WHERE chat_sessions.user_id = changed.user_id AND chat_sessions.id = changed.session_id),
outcome AS (
  SELECT given.batch_index, inserted.*, false AS duplicate FROM given JOIN inserted ON inserted.id = given.new_id
  UNION ALL
  SELECT given.batch_index, stored.*, true FROM given JOIN chat_messages AS stored
    ON stored.user_id = given.user_id AND stored.session_id = given.session_id
    AND stored.client_msg_id = given.client_msg_id
  WHERE NOT EXISTS (SELECT 1 FROM inserted WHERE inserted.id = given.new_id))
SELECT batch_index, {MESSAGE_COLUMNS}, duplicate FROM outcome"""
