-- One-off background jobs of the memory service and how far they got (plugins/memory/neutral_form.py:
-- `neutral_form`, rewriting first-person memories), so a restart goes on where the last one stopped
-- and a finished job is not run again.
CREATE TABLE memory_jobs (
    name TEXT PRIMARY KEY,
    position TEXT NOT NULL DEFAULT '',
    done BOOLEAN NOT NULL DEFAULT false,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
