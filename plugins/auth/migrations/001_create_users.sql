CREATE TABLE auth_users (
    id bigserial PRIMARY KEY,
    username text NOT NULL,
    email text NOT NULL,
    nickname text NOT NULL,
    password_hash text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
-- One account per name whatever its case: "Alice" and "alice" would be easy to confuse.
CREATE UNIQUE INDEX auth_users_username ON auth_users (lower(username));
