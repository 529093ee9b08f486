-- The thinking log (docs/memory.md, "Thinking and timeline"): what the scheduled thinking job of
-- the gateway (plugin `thinking`) noticed about a person's recent conversations and memories,
-- and what it might suggest. Written by the job through the memory service's API.
CREATE TABLE thinking_entries (
    id                 uuid PRIMARY KEY,
    user_id            text NOT NULL,
    kind               text NOT NULL DEFAULT 'reflection',
    content            text NOT NULL,
    suggestion         text NOT NULL DEFAULT '',
    model              text,
    source_session_ids text[] NOT NULL DEFAULT '{}',
    source_memory_ids  text[] NOT NULL DEFAULT '{}',
    created_at         timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX thinking_entries_user_created ON thinking_entries (user_id, created_at DESC, id);
CREATE INDEX thinking_entries_created ON thinking_entries (created_at DESC, id);
-- The timeline merges memories (at their latest change) with thinking entries, newest first;
-- one person's memories use memories_user_updated (001), everyone's this one.
CREATE INDEX memories_updated ON memories (updated_at DESC, id);
