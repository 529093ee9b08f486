-- The platform bridge's bots, who may talk to them, their chats' sessions, the Telegram
-- updates received (the offset that survives a restart) and each bot's bounded message log.
CREATE TABLE bridge_bots (
    id text PRIMARY KEY,
    name text NOT NULL,
    platform text NOT NULL,
    enabled boolean NOT NULL DEFAULT true,
    settings jsonb NOT NULL DEFAULT '{}',      -- the platform's fields that are not secret
    secrets jsonb NOT NULL DEFAULT '{}',       -- bot tokens, signing secrets: never answered in full
    allow_linking boolean NOT NULL DEFAULT true,
    update_offset bigint NOT NULL DEFAULT 0,   -- Telegram: the next update_id to ask getUpdates for
    last_error text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE bridge_users (
    bot_id text NOT NULL REFERENCES bridge_bots (id) ON DELETE CASCADE,
    platform_user_id text NOT NULL,
    user_id text NOT NULL,
    linked_by text NOT NULL DEFAULT 'allow_list',   -- 'allow_list' or 'code'
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bot_id, platform_user_id)
);

CREATE TABLE bridge_link_codes (
    bot_id text NOT NULL REFERENCES bridge_bots (id) ON DELETE CASCADE,
    code text NOT NULL,
    user_id text NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (bot_id, code)
);

CREATE TABLE bridge_chats (
    bot_id text NOT NULL REFERENCES bridge_bots (id) ON DELETE CASCADE,
    chat_id text NOT NULL,
    user_id text NOT NULL,
    generation integer NOT NULL DEFAULT 1,     -- /new counts up: a new session id
    PRIMARY KEY (bot_id, chat_id, user_id)
);

CREATE TABLE bridge_updates (
    bot_id text NOT NULL REFERENCES bridge_bots (id) ON DELETE CASCADE,
    update_id bigint NOT NULL,
    body jsonb NOT NULL,
    status text NOT NULL DEFAULT 'received',   -- received, running, done, interrupted
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bot_id, update_id)
);
CREATE INDEX bridge_updates_pending ON bridge_updates (bot_id, update_id) WHERE status <> 'done';

CREATE TABLE bridge_messages (
    id bigserial PRIMARY KEY,
    bot_id text NOT NULL REFERENCES bridge_bots (id) ON DELETE CASCADE,
    direction text NOT NULL,                   -- 'in' or 'out'
    chat_id text NOT NULL DEFAULT '',
    platform_user_id text NOT NULL DEFAULT '',
    user_id text,
    session_id text,
    text text NOT NULL DEFAULT '',
    latency_ms integer,
    error text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX bridge_messages_bot ON bridge_messages (bot_id, id DESC);
