-- perfgate schema v2 (SQLite): the durable webhook inbox, the outbox of
-- GitHub writes, check runs as desired state, and jobs waiting to be judged.

-- A delivery is stored (payload included) before the webhook is answered;
-- workers process pending rows and mark them done only on success. It
-- replaces webhook_deliveries, whose rows were only ever "seen": they come
-- across as done.
CREATE TABLE webhook_inbox (
    delivery_id     TEXT    PRIMARY KEY,
    event           TEXT    NOT NULL,
    payload         BLOB    NOT NULL,
    status          TEXT    NOT NULL,            -- pending, done, failed
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    lease_id        TEXT    NOT NULL DEFAULT '',
    lease_until     INTEGER,
    last_error      TEXT    NOT NULL DEFAULT '',
    redeliveries    INTEGER NOT NULL DEFAULT 0,
    received_at     INTEGER NOT NULL,
    done_at         INTEGER
);
CREATE INDEX webhook_inbox_due ON webhook_inbox (next_attempt_at) WHERE status = 'pending';
INSERT INTO webhook_inbox (delivery_id, event, payload, status, next_attempt_at, received_at, done_at)
    SELECT delivery_id, event, X'', 'done', received_at, received_at, received_at FROM webhook_deliveries;
DROP TABLE webhook_deliveries;

-- Every write to GitHub (a check run's state, a cancelled check, a comment,
-- a reaction) is a row here until GitHub confirms it. key makes a write
-- idempotent: the same key is one write. version counts re-arms of a
-- check_sync row, so a sync that raced a newer change is not marked done.
CREATE TABLE outbox (
    id              INTEGER PRIMARY KEY,
    key             TEXT    NOT NULL UNIQUE,
    kind            TEXT    NOT NULL,
    installation_id INTEGER NOT NULL DEFAULT 0,
    repo            TEXT    NOT NULL DEFAULT '',
    body            TEXT    NOT NULL DEFAULT 'null',
    status          TEXT    NOT NULL,            -- pending, done, failed
    version         INTEGER NOT NULL DEFAULT 1,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    lease_id        TEXT    NOT NULL DEFAULT '',
    lease_until     INTEGER,
    last_error      TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    done_at         INTEGER
);
CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE status = 'pending';

-- A check run row holds the state GitHub should show (desired, versioned)
-- and what GitHub confirmed (synced_version). generation counts the GitHub
-- check runs the row has reported to (a retest starts a new one).
ALTER TABLE check_runs ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE check_runs ADD COLUMN desired TEXT NOT NULL DEFAULT 'null';
ALTER TABLE check_runs ADD COLUMN desired_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE check_runs ADD COLUMN synced_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE check_runs ADD COLUMN create_attempted BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE check_runs ADD COLUMN request_key TEXT NOT NULL DEFAULT '';
CREATE INDEX check_runs_open ON check_runs (id) WHERE state IN ('queued', 'in_progress');

-- A finished job waits here (judged_at NULL) until a worker has judged it.
ALTER TABLE jobs ADD COLUMN judged_at INTEGER;
ALTER TABLE jobs ADD COLUMN judge_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN judge_next_at INTEGER;
ALTER TABLE jobs ADD COLUMN judge_lease_id TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN judge_lease_until INTEGER;
UPDATE jobs SET judged_at = COALESCE(finished_at, created_at) WHERE status IN ('succeeded', 'failed', 'cancelled');
CREATE INDEX jobs_unjudged ON jobs (id) WHERE judged_at IS NULL AND status IN ('succeeded', 'failed', 'cancelled');

-- A job now names its check run row (check_runs.id), not the GitHub check
-- run (which a row only learns once GitHub answers).
UPDATE jobs SET check_run_id = COALESCE((SELECT c.id FROM check_runs c WHERE c.github_id = jobs.check_run_id ORDER BY c.id DESC LIMIT 1), 0)
    WHERE check_run_id <> 0;
