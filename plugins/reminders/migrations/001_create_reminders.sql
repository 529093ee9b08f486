CREATE TABLE reminders (
    id text PRIMARY KEY,                      -- 32 hex characters
    user_id text NOT NULL,
    title text NOT NULL,
    description text NOT NULL DEFAULT '',
    remind_at timestamptz NOT NULL,           -- the next (or last) occurrence
    timezone text NOT NULL,                   -- IANA zone its repeats follow
    status text NOT NULL DEFAULT 'pending',   -- pending, completed, cancelled
    repeat_type text NOT NULL DEFAULT 'none', -- none, daily, weekly, monthly, weekdays, cron
    repeat_rule text NOT NULL DEFAULT '',     -- the cron expression of repeat_type cron
    repeat_anchor timestamptz NOT NULL,       -- the first occurrence: day of month and wall time kept
    session_id text NOT NULL DEFAULT '',
    notified boolean NOT NULL DEFAULT false,
    next_run_at timestamptz,                  -- when the scheduler fires it; NULL: nothing to fire
    last_fired_at timestamptz,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    completed_at timestamptz
);
CREATE INDEX reminders_by_user ON reminders (user_id, remind_at, id);
CREATE INDEX reminders_due ON reminders (next_run_at) WHERE next_run_at IS NOT NULL;

-- What the scheduler did with each due occurrence: fired on time, fired late, or skipped.
CREATE TABLE reminder_occurrences (
    id bigserial PRIMARY KEY,
    reminder_id text NOT NULL REFERENCES reminders (id) ON DELETE CASCADE,
    due_at timestamptz NOT NULL,
    handled_at timestamptz NOT NULL,
    outcome text NOT NULL,                    -- fired, fired_late, skipped
    late_by_seconds integer NOT NULL DEFAULT 0,
    notification_id text
);
CREATE INDEX reminder_occurrences_by_reminder ON reminder_occurrences (reminder_id, due_at DESC);
