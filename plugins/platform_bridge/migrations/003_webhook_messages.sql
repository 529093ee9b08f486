-- The generic webhook's messages already taken (by message_id and by signature) for as long as
-- their signed timestamp could still be accepted, so a replay of a signed body is not answered
-- twice ([plugins.platform_bridge] webhook_max_age).
CREATE TABLE bridge_webhook_messages (
    bot_id text NOT NULL REFERENCES bridge_bots (id) ON DELETE CASCADE,
    key text NOT NULL,                         -- 'id:<message_id>' or 'sig:<signature>'
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (bot_id, key)
);
CREATE INDEX bridge_webhook_messages_expiry ON bridge_webhook_messages (bot_id, expires_at);
