-- Profile artifacts: trace files a runner uploaded for a job (a profiling
-- pass of base and head). The bytes live in the server's artifact
-- directory under their SHA-256; a row says whose they are.

CREATE TABLE artifacts (
    id          INTEGER PRIMARY KEY,
    job_id      INTEGER  NOT NULL,
    attempt     INTEGER NOT NULL,
    repo        TEXT    NOT NULL,
    sha         TEXT    NOT NULL DEFAULT '', -- the commit the artifact profiles
    side        TEXT    NOT NULL DEFAULT '', -- base, head or ''
    name        TEXT    NOT NULL,            -- the file's base name
    size        INTEGER  NOT NULL,
    sha256      TEXT    NOT NULL,            -- its key in the artifact directory
    created_at  INTEGER  NOT NULL
);
-- An upload retried under the same lease replaces its row.
CREATE UNIQUE INDEX artifacts_job_file ON artifacts (job_id, attempt, side, name);
