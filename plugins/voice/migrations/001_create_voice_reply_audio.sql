-- The audio of spoken replies in the blob store, so that it can be deleted when it is old
-- (the blob store cannot list its keys).
CREATE TABLE voice_reply_audio (
    storage_key text PRIMARY KEY,
    user_id text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX voice_reply_audio_created ON voice_reply_audio (created_at);
