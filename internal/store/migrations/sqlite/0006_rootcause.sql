-- From a failed gate to the root cause: the knowledge base of regressions
-- (internal/kb) and the bisects in progress (internal/bisect's state, kept
-- between GPU jobs and across restarts).

CREATE TABLE root_causes (
    id           INTEGER PRIMARY KEY,
    repo         TEXT    NOT NULL,
    number       INTEGER NOT NULL DEFAULT 0,  -- the PR or issue it was recorded on
    url          TEXT    NOT NULL DEFAULT '',
    commit_sha   TEXT    NOT NULL DEFAULT '',
    culprit_pr   INTEGER NOT NULL DEFAULT 0,
    summary      TEXT    NOT NULL DEFAULT '', -- the phenomenon, one line
    cause        TEXT    NOT NULL,
    fix_url      TEXT    NOT NULL DEFAULT '',
    signature    TEXT    NOT NULL DEFAULT 'null', -- kb.Signature JSON
    recorded_by  TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
CREATE INDEX root_causes_repo ON root_causes (repo, id);

CREATE TABLE bisects (
    id              INTEGER PRIMARY KEY,
    repo            TEXT    NOT NULL,
    good_sha        TEXT    NOT NULL,
    bad_sha         TEXT    NOT NULL,
    metric          TEXT    NOT NULL,
    requested_by    TEXT    NOT NULL DEFAULT '',
    number          INTEGER NOT NULL DEFAULT 0, -- the PR or issue to report to
    change_point_id INTEGER NOT NULL DEFAULT 0,
    installation_id INTEGER NOT NULL DEFAULT 0,
    status          TEXT    NOT NULL DEFAULT 'running',
    state           TEXT    NOT NULL,           -- bisect.State JSON, byte for byte
    job_id          INTEGER NOT NULL DEFAULT 0, -- the queued job measuring the pending request; 0 for none
    version         INTEGER NOT NULL DEFAULT 1, -- bumped by every update: optimistic locking
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
CREATE UNIQUE INDEX bisects_one_running ON bisects (repo, good_sha, bad_sha, metric) WHERE status = 'running';
CREATE INDEX bisects_status ON bisects (status, id);
CREATE UNIQUE INDEX bisects_job ON bisects (job_id) WHERE job_id <> 0; -- a job measures one bisect
