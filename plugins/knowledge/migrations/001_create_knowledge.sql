-- Knowledge bases, their documents and the documents' chunks. Vectors live in the vector
-- store (collection "knowledge"), keyed by the chunk's id; these rows are the truth a search
-- hit is read back from, so a deleted document is gone from results at once.
CREATE TABLE knowledge_bases (
    id          uuid PRIMARY KEY,
    user_id     text NOT NULL,
    name        text NOT NULL,
    description text NOT NULL DEFAULT '',
    created_at  bigint NOT NULL,
    updated_at  bigint NOT NULL
);
CREATE INDEX knowledge_bases_user ON knowledge_bases (user_id, created_at);

-- index_status: pending (waiting for the indexer), indexing (claimed; index_claimed_at is the
-- indexer's heartbeat, so a claim left by a stopped service is taken over), ready, failed.
CREATE TABLE knowledge_documents (
    id               uuid PRIMARY KEY,
    kb_id            uuid NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    user_id          text NOT NULL,
    title            text NOT NULL,
    source_type      text NOT NULL CHECK (source_type IN ('text', 'file', 'url')),
    source_ref       text NOT NULL DEFAULT '',
    content_type     text NOT NULL,
    raw_content      text NOT NULL,
    content_length   integer NOT NULL,   -- characters of raw_content, so listings need not read it
    chunk_count      integer NOT NULL DEFAULT 0,
    index_status     text NOT NULL DEFAULT 'pending'
                     CHECK (index_status IN ('pending', 'indexing', 'ready', 'failed')),
    index_error      text,
    index_attempts   integer NOT NULL DEFAULT 0,
    index_claimed_at timestamptz,
    created_at       bigint NOT NULL,
    updated_at       bigint NOT NULL
);
CREATE INDEX knowledge_documents_base ON knowledge_documents (kb_id, created_at);
CREATE INDEX knowledge_documents_user ON knowledge_documents (user_id);
CREATE INDEX knowledge_documents_unindexed ON knowledge_documents (created_at)
    WHERE index_status IN ('pending', 'indexing');

CREATE TABLE knowledge_chunks (
    id           uuid PRIMARY KEY,
    document_id  uuid NOT NULL REFERENCES knowledge_documents (id) ON DELETE CASCADE,
    kb_id        uuid NOT NULL,
    user_id      text NOT NULL,
    position     integer NOT NULL,
    text         text NOT NULL,
    heading_path jsonb NOT NULL DEFAULT '[]',
    start_offset integer NOT NULL,
    end_offset   integer NOT NULL,
    UNIQUE (document_id, position)
);
