-- What a person chose for themselves, beside the account: the administrator has no row in
-- auth_users (it comes from configuration), so this is keyed by user id.
CREATE TABLE auth_user_preferences (
    user_id text PRIMARY KEY,
    timezone text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
