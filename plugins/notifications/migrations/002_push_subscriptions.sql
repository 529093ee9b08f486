-- Web Push subscriptions: one per browser (its endpoint is unique to it), owned by the person
-- who turned notifications on there last.
CREATE TABLE push_subscriptions (
    id uuid PRIMARY KEY,
    position bigint GENERATED ALWAYS AS IDENTITY,  -- the order they came in (the clock may stand still)
    user_id text NOT NULL,
    endpoint text NOT NULL UNIQUE,
    p256dh text NOT NULL,
    auth text NOT NULL,
    device_name text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    last_push_at timestamptz,
    last_error text
);
CREATE INDEX push_subscriptions_by_user ON push_subscriptions (user_id, position);
