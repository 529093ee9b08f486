-- MCP servers the assistant uses (docs/mcp.md): their tools join the assistant's as
-- `<name>__<tool>`. Kept here, not in a process, so every instance of the AI core connects to
-- the same servers.
CREATE TABLE ai_mcp_servers (
    name            TEXT PRIMARY KEY,
    transport       TEXT NOT NULL,
    command         TEXT NOT NULL DEFAULT '',
    args            JSONB NOT NULL DEFAULT '[]',
    env             JSONB NOT NULL DEFAULT '{}',
    url             TEXT NOT NULL DEFAULT '',
    headers         JSONB NOT NULL DEFAULT '{}',
    enabled         BOOLEAN NOT NULL DEFAULT TRUE,
    allowed_tools   JSONB,
    timeout_seconds DOUBLE PRECISION NOT NULL DEFAULT 30,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
