-- A GPU fleet shared by many repositories (issue 15).
--
-- Jobs are claimed in (priority, vtag, seq) order: the priority class
-- (0 merge, 1 quick, 2 nightly, 3 batch), then the start tag of
-- start-time fair queuing over the tenants (repositories or
-- installations), then the queue sequence — the job's own id, or the id of
-- the superseded job whose place it took.
ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN share_key TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN vtag REAL NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN vcost REAL NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
-- handoff: a queued job cancelled by a newer push; the push's job takes
-- its place in the queue.
ALTER TABLE jobs ADD COLUMN handoff BOOLEAN NOT NULL DEFAULT FALSE;
-- The tenant's weight when the job was queued (its GPU time is charged
-- with it) and the job's pool (fleet.Pool: its labels and card pin).
ALTER TABLE jobs ADD COLUMN vweight REAL NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN pool TEXT NOT NULL DEFAULT '';
UPDATE jobs SET seq = id, share_key = repo,
    priority = CASE WHEN tier = 'merge' OR kind = 'merge_group' THEN 0
                    WHEN kind = 'bisect' THEN 3
                    WHEN tier = 'nightly' OR kind = 'nightly' THEN 2
                    WHEN tier = 'quick' THEN 1 ELSE 3 END;
CREATE INDEX jobs_claim ON jobs (priority, vtag, seq) WHERE status = 'queued';
CREATE INDEX jobs_running_tag ON jobs (priority, vtag) WHERE status = 'running';
CREATE INDEX jobs_running_agent ON jobs (agent_id) WHERE status = 'running';
CREATE INDEX jobs_handoff ON jobs (repo, pr_number, tier, seq) WHERE handoff;

-- Each tenant's virtual finish time per priority class: where its next
-- job's start tag begins.
CREATE TABLE fleet_flows (
    priority  INTEGER NOT NULL,
    share_key TEXT    NOT NULL,
    finish    REAL    NOT NULL,
    PRIMARY KEY (priority, share_key)
);

-- Runners: the cards they reported and whether they are drained.
ALTER TABLE agents ADD COLUMN cards TEXT NOT NULL DEFAULT '[]';
ALTER TABLE agents ADD COLUMN drained BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE agents ADD COLUMN drained_at INTEGER;

-- Every attempt's time on a GPU: accounting, run time estimates and the
-- fair-share charge. charge is what the attempt's tenant owes beyond the
-- estimate charged at enqueue (GPU-seconds over the weight, less that
-- estimate once); the tenant's next enqueue folds it into its clock, so a
-- finish never waits on the clock's row.
CREATE TABLE gpu_attempts (
    job_id          INTEGER NOT NULL REFERENCES jobs (id),
    attempt         INTEGER NOT NULL,
    repo            TEXT    NOT NULL,
    installation_id INTEGER NOT NULL DEFAULT 0,
    tier            TEXT    NOT NULL,
    pool            TEXT    NOT NULL DEFAULT '',
    agent_id        INTEGER,
    status          TEXT    NOT NULL,
    started_at      INTEGER NOT NULL,
    ended_at        INTEGER NOT NULL,
    priority        INTEGER NOT NULL DEFAULT 0,
    share_key       TEXT    NOT NULL DEFAULT '',
    charge          REAL NOT NULL DEFAULT 0,
    folded          BOOLEAN NOT NULL DEFAULT TRUE,
    PRIMARY KEY (job_id, attempt)
);
CREATE INDEX gpu_attempts_unfolded ON gpu_attempts (priority, share_key) WHERE NOT folded;
CREATE INDEX gpu_attempts_ended ON gpu_attempts (ended_at);
CREATE INDEX gpu_attempts_repo ON gpu_attempts (repo, ended_at);
CREATE INDEX gpu_attempts_tier ON gpu_attempts (tier, ended_at) WHERE status = 'succeeded';

CREATE INDEX audit_log_action_time ON audit_log (action, created_at);

-- reused_baseline: the check was judged against a stored baseline, not one
-- measured for it (the verdict's report.design is stored or recent and it
-- has no baseline_job): a job saved. Written with every verdict.
ALTER TABLE check_runs ADD COLUMN reused_baseline BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE check_runs SET reused_baseline = TRUE
    WHERE json_extract(verdict, '$.report.design') IN ('stored', 'recent') AND COALESCE(json_extract(verdict, '$.baseline_job'), 0) = 0;
CREATE INDEX check_runs_reused ON check_runs (created_at) WHERE reused_baseline;
