-- A conversation's own base: documents attached in a chat session go into the base whose
-- session_id names it (one per person and session). NULL: a general base, searched in every
-- conversation; a session's base is searched only in its own.
ALTER TABLE knowledge_bases ADD COLUMN session_id text;
CREATE UNIQUE INDEX knowledge_bases_session ON knowledge_bases (user_id, session_id) WHERE session_id IS NOT NULL;
