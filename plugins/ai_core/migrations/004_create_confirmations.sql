-- Tool calls with an effect the person must confirm first (docs/ai-core.md, "Confirmation"):
-- held here, not in a process, so the person's "yes" finds its call on any instance of the AI
-- core; `status` moves once from `pending` (UPDATE ... WHERE status = 'pending'), so a call
-- runs at most once.
CREATE TABLE ai_pending_confirmations (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    tool_name   TEXT NOT NULL,
    arguments   JSONB NOT NULL DEFAULT '{}',
    kinds       TEXT[] NOT NULL DEFAULT '{}',
    effect      TEXT NOT NULL,
    language    TEXT NOT NULL DEFAULT 'en',
    model       TEXT,
    status      TEXT NOT NULL DEFAULT 'pending',
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at  TIMESTAMPTZ NOT NULL,
    decided_at  TIMESTAMPTZ
);
CREATE INDEX ai_pending_confirmations_open ON ai_pending_confirmations (user_id, session_id, created_at DESC)
    WHERE status = 'pending';
