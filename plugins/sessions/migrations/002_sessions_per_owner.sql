-- A session id is its owner's name for it: two users may each have a session `work`, and
-- another user's id is simply free (its existence cannot be probed; docs/sessions.md). Sessions
-- are keyed by (user_id, id); a message names its session by the same pair.
UPDATE chat_messages AS m SET user_id = s.user_id FROM chat_sessions AS s
    WHERE s.id = m.session_id AND m.user_id <> s.user_id;
ALTER TABLE chat_messages DROP CONSTRAINT chat_messages_session_id_fkey;
ALTER TABLE chat_sessions DROP CONSTRAINT chat_sessions_pkey;
ALTER TABLE chat_sessions ADD PRIMARY KEY (user_id, id);
CREATE INDEX chat_sessions_id ON chat_sessions (id);
ALTER TABLE chat_messages ADD CONSTRAINT chat_messages_session_fkey
    FOREIGN KEY (user_id, session_id) REFERENCES chat_sessions (user_id, id) ON DELETE CASCADE;
DROP INDEX chat_messages_session_id;
CREATE INDEX chat_messages_session ON chat_messages (user_id, session_id, id);
DROP INDEX chat_messages_client_msg_id;
CREATE UNIQUE INDEX chat_messages_client_msg ON chat_messages (user_id, session_id, client_msg_id)
    WHERE client_msg_id IS NOT NULL;
