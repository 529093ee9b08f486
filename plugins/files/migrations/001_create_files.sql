-- Uploaded files. The bytes live in blob storage under storage_key (a name the server chose);
-- thumbnail_key is set once a thumbnail has been generated and cached there too.
CREATE TABLE files (
    id            uuid PRIMARY KEY,
    user_id       text NOT NULL,
    filename      text NOT NULL,
    mime_type     text NOT NULL,
    size          bigint NOT NULL,
    hash          text NOT NULL,
    is_public     boolean NOT NULL DEFAULT false,
    storage_key   text NOT NULL,
    thumbnail_key text,
    width         integer,
    height        integer,
    created_at    bigint NOT NULL
);

CREATE INDEX files_user_created ON files (user_id, created_at DESC);
