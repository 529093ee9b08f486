-- Refresh tokens are kept only as SHA-256 hashes. A family is one login's chain of rotated
-- tokens: presenting a token that was already used revokes the whole family.
CREATE TABLE auth_refresh_tokens (
    token_hash text PRIMARY KEY,
    family_id text NOT NULL,
    user_id text NOT NULL,
    issued_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at timestamptz,
    revoked_at timestamptz
);
CREATE INDEX auth_refresh_tokens_family ON auth_refresh_tokens (family_id);
CREATE INDEX auth_refresh_tokens_user ON auth_refresh_tokens (user_id);
CREATE INDEX auth_refresh_tokens_expires ON auth_refresh_tokens (expires_at);

-- Access tokens already traded in at /auth/refresh (or logged out): each renews only once.
CREATE TABLE auth_spent_access_tokens (
    jti text PRIMARY KEY,
    user_id text NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX auth_spent_access_tokens_expires ON auth_spent_access_tokens (expires_at);
