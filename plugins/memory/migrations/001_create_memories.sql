-- What the assistant remembers about each person (docs/memory.md). The texts are indexed in the
-- vector store's collection "memory" (payload user_id, category); this table is the record.
CREATE TABLE memories (
    id                uuid PRIMARY KEY,
    user_id           text NOT NULL,
    content           text NOT NULL,
    category          text NOT NULL DEFAULT 'other',
    priority          integer NOT NULL DEFAULT 5,
    source            text NOT NULL DEFAULT 'api',
    source_session_id text,
    source_message_id text,
    -- The slot this memory states and nothing else ("name", "home", "name_of:wife"...): a newer
    -- value of that slot replaces it (plugins/memory/rules.py). NULL for other memories.
    slot              text,
    -- The content this memory had before a contradicting fact replaced it, the latest only.
    previous_content  text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX memories_user_updated ON memories (user_id, updated_at DESC);
CREATE INDEX memories_user_category ON memories (user_id, category, updated_at DESC);
CREATE INDEX memories_user_slot ON memories (user_id, slot) WHERE slot IS NOT NULL;
