-- Every tool call, whoever made it (a model's function call or the offline agent).
CREATE TABLE ai_tool_calls (
    id          BIGSERIAL PRIMARY KEY,
    call_id     TEXT NOT NULL,
    tool_name   TEXT NOT NULL,
    arguments   JSONB NOT NULL DEFAULT '{}',
    result      JSONB,
    error       TEXT,
    status      TEXT NOT NULL,
    duration_ms DOUBLE PRECISION NOT NULL DEFAULT 0,
    session_id  TEXT,
    user_id     TEXT,
    model       TEXT,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX ai_tool_calls_by_tool ON ai_tool_calls (tool_name, created_at DESC);
CREATE INDEX ai_tool_calls_by_time ON ai_tool_calls (created_at DESC);

-- The turns the AI core has answered, so the search_messages tool can find a user's past words.
CREATE TABLE ai_conversation_turns (
    id          BIGSERIAL PRIMARY KEY,
    session_id  TEXT,
    user_id     TEXT NOT NULL,
    role        TEXT NOT NULL,
    content     TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX ai_conversation_turns_by_user ON ai_conversation_turns (user_id, created_at DESC);
