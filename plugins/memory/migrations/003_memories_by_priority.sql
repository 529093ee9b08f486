-- A person's most important memories first (GET /api/v1/memories?order=priority, MEMORY.top:
-- recall's high-priority memories and the thinking job's reading), without sorting all their rows.
CREATE INDEX memories_user_priority ON memories (user_id, priority DESC, updated_at DESC);
