CREATE TABLE automation_rules (
    id text PRIMARY KEY,
    user_id text NOT NULL,
    name text NOT NULL,
    description text NOT NULL DEFAULT '',
    trigger_type text NOT NULL,
    trigger_config jsonb NOT NULL DEFAULT '{}',
    conditions jsonb NOT NULL DEFAULT '{}',
    actions jsonb NOT NULL,
    enabled boolean NOT NULL DEFAULT true,
    -- Time triggers only: the next instant the rule is due (UTC); NULL when it never fires again.
    next_run_at timestamptz,
    last_run_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX automation_rules_user ON automation_rules (user_id, created_at);
-- The due-loop's claim: enabled time rules by due instant.
CREATE INDEX automation_rules_due ON automation_rules (next_run_at) WHERE enabled AND next_run_at IS NOT NULL;
-- Device-state and event triggers are looked up by what they listen to.
CREATE INDEX automation_rules_trigger ON automation_rules (user_id, trigger_type) WHERE enabled;

CREATE TABLE automation_scenes (
    id text PRIMARY KEY,
    user_id text NOT NULL,
    name text NOT NULL,
    icon text NOT NULL DEFAULT '',
    rule_ids jsonb NOT NULL DEFAULT '[]',
    actions jsonb NOT NULL DEFAULT '[]',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX automation_scenes_user ON automation_scenes (user_id, created_at);

-- One row per (rule, device change): the change fires the rule once even when two instances
-- (or one, twice at a feed hand-over) hear it.
CREATE TABLE automation_device_claims (
    rule_id text NOT NULL REFERENCES automation_rules (id) ON DELETE CASCADE,
    event_id text NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (rule_id, event_id)
);
CREATE INDEX automation_device_claims_age ON automation_device_claims (claimed_at);

-- What each run did: by a trigger, by hand, or as part of a scene.
CREATE TABLE automation_runs (
    id bigserial PRIMARY KEY,
    user_id text NOT NULL,
    rule_id text REFERENCES automation_rules (id) ON DELETE CASCADE,
    scene_id text REFERENCES automation_scenes (id) ON DELETE CASCADE,
    trigger text NOT NULL,
    trigger_detail jsonb NOT NULL DEFAULT '{}',
    status text NOT NULL,
    note text NOT NULL DEFAULT '',
    results jsonb NOT NULL DEFAULT '[]',
    started_at timestamptz NOT NULL,
    finished_at timestamptz
);
CREATE INDEX automation_runs_rule ON automation_runs (rule_id, id DESC);
CREATE INDEX automation_runs_scene ON automation_runs (scene_id, id DESC);
