-- Chat turns waiting for, or taken by, the instance that holds their session's turn lock.
-- Kept in PostgreSQL so every gateway instance sharing DATABASE_URL sees one queue per session.
-- Finished rows stay a while so a message re-sent with the same client_msg_id is recognised.
CREATE TABLE chat_turn_queue (
    id                bigserial PRIMARY KEY,
    session_id        text NOT NULL,
    user_id           text NOT NULL,
    text              text NOT NULL DEFAULT '',
    mode              text NOT NULL DEFAULT 'text',
    attachments       jsonb NOT NULL DEFAULT '[]',
    client_msg_id     text,
    sender_connection text,
    status            text NOT NULL DEFAULT 'queued',
    created_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz
);

CREATE UNIQUE INDEX chat_turn_queue_client_msg ON chat_turn_queue (session_id, client_msg_id)
    WHERE client_msg_id IS NOT NULL;
CREATE INDEX chat_turn_queue_waiting ON chat_turn_queue (session_id, id) WHERE status = 'queued';
