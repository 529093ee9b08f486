-- Devices that connected to the chat channel, for the administrator's client list.
-- `online` is the last state this table saw; the presence service answers from live presence.
CREATE TABLE known_clients (
    client_id   text PRIMARY KEY,
    user_id     text NOT NULL,
    device_name text NOT NULL DEFAULT '',
    user_agent  text NOT NULL DEFAULT '',
    note        text NOT NULL DEFAULT '',
    last_seen   timestamptz NOT NULL DEFAULT now(),
    online      boolean NOT NULL DEFAULT false
);

CREATE INDEX known_clients_user ON known_clients (user_id, last_seen DESC);
