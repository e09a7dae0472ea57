-- Sign-in sessions (issue 37), in the database so a restart keeps people
-- signed in and every replica knows every session. The browser holds a
-- random id; only its SHA-256 is stored (token_hash), and after a
-- rotation the id before it (prev_hash) for a few seconds (prev_until),
-- for requests already on their way. token_sealed is the person's GitHub
-- token, sealed (AES-256-GCM) by the dashboard under a key derived from
-- its link-signing key, which the database does not hold. Times are
-- microseconds since the epoch.
CREATE TABLE web_sessions (
    id            INTEGER PRIMARY KEY,
    token_hash    TEXT   NOT NULL UNIQUE,
    prev_hash     TEXT,
    prev_until    INTEGER NOT NULL DEFAULT 0,
    login         TEXT   NOT NULL,
    token_sealed  BLOB  NOT NULL,
    created_at    INTEGER NOT NULL,
    rotated_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL
);
CREATE INDEX web_sessions_prev ON web_sessions (prev_hash) WHERE prev_hash IS NOT NULL;
CREATE INDEX web_sessions_expires ON web_sessions (expires_at);
