-- perfgate schema v1 (SQLite). Times are INTEGER microseconds since the
-- epoch (NULL = unset); lists and documents are JSON text.

CREATE TABLE agents (
    id           INTEGER PRIMARY KEY,
    name         TEXT    NOT NULL UNIQUE,
    labels       TEXT    NOT NULL DEFAULT '[]',
    gpu_uuids    TEXT    NOT NULL DEFAULT '[]',
    token_hash   TEXT    NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL
);

CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY,
    tier             TEXT    NOT NULL,
    kind             TEXT    NOT NULL DEFAULT '',
    repo             TEXT    NOT NULL,
    installation_id  INTEGER NOT NULL DEFAULT 0,
    pr_number        INTEGER NOT NULL DEFAULT 0,
    head_sha         TEXT    NOT NULL DEFAULT '',
    base_sha         TEXT    NOT NULL DEFAULT '',
    config           BLOB    NOT NULL,
    required_labels  TEXT    NOT NULL DEFAULT '[]',
    gpu_uuid         TEXT    NOT NULL DEFAULT '',
    check_run_id     INTEGER NOT NULL DEFAULT 0,
    status           TEXT    NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL DEFAULT 3,
    failure_reason   TEXT    NOT NULL DEFAULT '',
    lease_id         TEXT    NOT NULL DEFAULT '',
    lease_expires_at INTEGER,
    agent_id         INTEGER REFERENCES agents (id),
    cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
    log_bytes        INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL,
    started_at       INTEGER,
    finished_at      INTEGER
);
CREATE INDEX jobs_queued ON jobs (id) WHERE status = 'queued';
CREATE INDEX jobs_running_lease ON jobs (lease_expires_at) WHERE status = 'running';
CREATE INDEX jobs_pr ON jobs (repo, pr_number, id);

CREATE TABLE results (
    id              INTEGER PRIMARY KEY,
    job_id          INTEGER NOT NULL REFERENCES jobs (id),
    attempt         INTEGER NOT NULL,
    lease_id        TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    run_index       INTEGER NOT NULL,
    kind            TEXT    NOT NULL,
    gpu_uuid        TEXT    NOT NULL DEFAULT '',
    summary         TEXT    NOT NULL DEFAULT 'null',
    environment     TEXT    NOT NULL DEFAULT 'null',
    samples         BLOB    NOT NULL,
    created_at      INTEGER NOT NULL,
    UNIQUE (job_id, lease_id, idempotency_key)
);
CREATE INDEX results_job ON results (job_id, attempt, kind, run_index);
CREATE INDEX results_gpu ON results (gpu_uuid);

CREATE TABLE job_logs (
    job_id  INTEGER NOT NULL REFERENCES jobs (id),
    attempt INTEGER NOT NULL,
    byte_offset INTEGER NOT NULL,
    data    BLOB    NOT NULL,
    PRIMARY KEY (job_id, attempt, byte_offset)
);

CREATE TABLE baselines (
    id           INTEGER PRIMARY KEY,
    repo         TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    version      INTEGER NOT NULL,
    commit_sha   TEXT    NOT NULL DEFAULT '',
    image_digest TEXT    NOT NULL DEFAULT '',
    gpu          TEXT    NOT NULL DEFAULT '',
    gpu_uuid     TEXT    NOT NULL DEFAULT '',
    driver       TEXT    NOT NULL DEFAULT '',
    load_params  TEXT    NOT NULL DEFAULT 'null',
    runs         TEXT    NOT NULL DEFAULT 'null',
    promoted_by  TEXT    NOT NULL DEFAULT '',
    reason       TEXT    NOT NULL DEFAULT '',
    allow_lower  BOOLEAN NOT NULL DEFAULT FALSE,
    created_at   INTEGER NOT NULL,
    UNIQUE (repo, key, version)
);

CREATE TABLE check_runs (
    id              INTEGER PRIMARY KEY,
    repo            TEXT    NOT NULL,
    head_sha        TEXT    NOT NULL,
    tier            TEXT    NOT NULL,
    pr_number       INTEGER NOT NULL DEFAULT 0,
    installation_id INTEGER NOT NULL DEFAULT 0,
    github_id       INTEGER NOT NULL DEFAULT 0,
    job_ids         TEXT    NOT NULL DEFAULT '[]',
    state           TEXT    NOT NULL,
    verdict         TEXT    NOT NULL DEFAULT 'null',
    deadline_at     INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    UNIQUE (repo, head_sha, tier)
);
CREATE INDEX check_runs_deadline ON check_runs (deadline_at) WHERE deadline_at IS NOT NULL;
CREATE INDEX check_runs_pr ON check_runs (repo, pr_number);
CREATE INDEX check_runs_github ON check_runs (github_id);

CREATE TABLE appeals (
    id         INTEGER PRIMARY KEY,
    repo       TEXT    NOT NULL,
    pr_number  INTEGER NOT NULL,
    head_sha   TEXT    NOT NULL DEFAULT '',
    author     TEXT    NOT NULL,
    reason     TEXT    NOT NULL,
    status     TEXT    NOT NULL,
    decided_by TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    decided_at INTEGER
);
CREATE INDEX appeals_pr ON appeals (repo, pr_number);

CREATE TABLE webhook_deliveries (
    delivery_id TEXT    PRIMARY KEY,
    event       TEXT    NOT NULL,
    received_at INTEGER NOT NULL
);

CREATE TABLE audit_log (
    id         INTEGER PRIMARY KEY,
    actor      TEXT    NOT NULL,
    action     TEXT    NOT NULL,
    repo       TEXT    NOT NULL DEFAULT '',
    pr_number  INTEGER NOT NULL DEFAULT 0,
    detail     TEXT    NOT NULL DEFAULT 'null',
    created_at INTEGER NOT NULL
);
CREATE INDEX audit_log_pr ON audit_log (repo, pr_number, id);

CREATE TABLE trend_points (
    repo   TEXT    NOT NULL,
    key    TEXT    NOT NULL,
    metric TEXT    NOT NULL,
    day    TEXT    NOT NULL, -- YYYY-MM-DD, UTC
    value  REAL    NOT NULL,
    job_id INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (repo, key, metric, day)
);
