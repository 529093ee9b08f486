-- Writes made with a client's idempotency key (the `Idempotency-Key` header of a create,
-- docs/memory.md): a retry with the same key answers the memory the first write made or changed
-- instead of storing it again. Keyed per person; kept `idempotency_hours`, or until the memory
-- is deleted (then a retry stores it anew).
CREATE TABLE memory_writes (
    user_id      text NOT NULL,
    client_key   text NOT NULL,
    request_hash text NOT NULL,
    memory_id    uuid NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    action       text NOT NULL,
    replaced     text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, client_key)
);

CREATE INDEX memory_writes_memory ON memory_writes (memory_id);
CREATE INDEX memory_writes_user_created ON memory_writes (user_id, created_at);
