-- Model providers (OpenAI-compatible endpoints), models and routing rules per purpose.
-- The AI core owns these; the gateway's admin API edits them through the AI core's endpoints.
CREATE TABLE ai_providers (
    name        TEXT PRIMARY KEY,
    base_url    TEXT NOT NULL,
    api_key     TEXT NOT NULL DEFAULT '',
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE ai_models (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    provider    TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    priority    INTEGER NOT NULL DEFAULT 0,
    tags        JSONB NOT NULL DEFAULT '[]',
    params      JSONB NOT NULL DEFAULT '{}',
    enabled     BOOLEAN NOT NULL DEFAULT TRUE,
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE ai_routes (
    purpose        TEXT PRIMARY KEY,
    fallback_chain JSONB NOT NULL DEFAULT '[]',
    required       BOOLEAN NOT NULL DEFAULT FALSE,
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- One-time facts about this installation, e.g. that the environment's model was seeded.
CREATE TABLE ai_core_state (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
