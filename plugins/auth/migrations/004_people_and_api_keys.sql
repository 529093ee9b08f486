-- The people of a household (docs/auth.md, "People"): the administrator may disable a person,
-- make one an administrator, and invite one to choose their own password.
-- `token_generation` is written into each access token (claim `gen`): a token whose generation is
-- not the person's current one is refused at once, so disabling, deleting or demoting someone ends
-- their access tokens before they expire. New people take a fresh number from a sequence, so a
-- person deleted and created again under the same name does not inherit the old tokens; people
-- who exist already keep 0, the generation of tokens issued before this migration.
CREATE SEQUENCE auth_token_generations;
ALTER TABLE auth_users
    ADD COLUMN disabled_at timestamptz,
    ADD COLUMN is_admin boolean NOT NULL DEFAULT false,
    ADD COLUMN password_change_required boolean NOT NULL DEFAULT false,
    ADD COLUMN token_generation bigint NOT NULL DEFAULT 0;
ALTER TABLE auth_users ALTER COLUMN token_generation SET DEFAULT nextval('auth_token_generations');

-- An invitation: the person it names chooses their password with the code (kept only hashed).
CREATE TABLE auth_invitations (
    code_hash text PRIMARY KEY,
    user_id text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX auth_invitations_user ON auth_invitations (user_id);

-- Personal API keys: shown once, kept only as SHA-256 hashes (a key is 256 random bits, so a
-- fast hash is enough and lets every request find its key by an index).
CREATE TABLE auth_api_keys (
    id text PRIMARY KEY,
    user_id text NOT NULL,
    name text NOT NULL,
    key_hash text NOT NULL UNIQUE,
    scopes text[] NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz,
    last_used_at timestamptz,
    revoked_at timestamptz
);
CREATE INDEX auth_api_keys_user ON auth_api_keys (user_id, created_at);

-- People deleted lately: their access tokens (verifiable with the secret alone) are refused
-- until they would have expired anyway; kept a day, then purged.
CREATE TABLE auth_deleted_people (
    user_id text PRIMARY KEY,
    deleted_at timestamptz NOT NULL DEFAULT now()
);
