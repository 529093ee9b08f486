-- The inbox: every notification pushed to a person, read or not.
CREATE TABLE notifications (
    id uuid PRIMARY KEY,
    user_id text NOT NULL,
    type text NOT NULL,
    title text NOT NULL,
    body text NOT NULL,
    data jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at timestamptz NOT NULL,
    read_at timestamptz
);
CREATE INDEX notifications_by_user ON notifications (user_id, created_at DESC, id);
CREATE INDEX notifications_unread ON notifications (user_id, created_at) WHERE read_at IS NULL;

-- Each device (client_id) of a person: when it was last seen connected, so that on its return it
-- is sent what it missed meanwhile and nothing it saw live.
CREATE TABLE notification_devices (
    user_id text NOT NULL,
    client_id text NOT NULL,
    last_seen timestamptz NOT NULL,
    connected boolean NOT NULL DEFAULT false,
    PRIMARY KEY (user_id, client_id)
);
