-- Who was active lately, across all users (CONVERSATIONS.active_users: the thinking job's
-- scan): without this index the query reads the whole sessions table each run.
CREATE INDEX chat_sessions_updated ON chat_sessions (updated_at DESC);
