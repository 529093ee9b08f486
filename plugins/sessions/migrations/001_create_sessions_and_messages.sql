-- Conversations: sessions and their stored messages, with a trigram index for substring search.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE chat_sessions (
    id          text PRIMARY KEY,
    user_id     text NOT NULL,
    title       text NOT NULL,
    is_main     boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX chat_sessions_user_updated ON chat_sessions (user_id, updated_at DESC);

CREATE TABLE chat_messages (
    id             bigserial PRIMARY KEY,
    session_id     text NOT NULL REFERENCES chat_sessions (id) ON DELETE CASCADE,
    user_id        text NOT NULL,
    role           text NOT NULL,
    msg_type       text NOT NULL DEFAULT 'chat',
    content        text NOT NULL DEFAULT '',
    metadata       jsonb NOT NULL DEFAULT '{}'::jsonb,
    client_msg_id  text NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX chat_messages_session_id ON chat_messages (session_id, id);
CREATE INDEX chat_messages_user_id ON chat_messages (user_id, id);
-- A client retrying a send must not store its message twice.
CREATE UNIQUE INDEX chat_messages_client_msg_id ON chat_messages (session_id, client_msg_id)
    WHERE client_msg_id IS NOT NULL;
-- Substring search (ILIKE '%q%') in any script: trigrams of the content, CJK included under a
-- UTF-8 locale.
CREATE INDEX chat_messages_content_trgm ON chat_messages USING gin (content gin_trgm_ops);
