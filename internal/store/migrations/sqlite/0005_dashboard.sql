-- The dashboard's read paths and the change points found on each
-- default-branch series (internal/changepoint, the nightly pass).

CREATE TABLE change_points (
    id           INTEGER PRIMARY KEY,
    repo         TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    metric       TEXT    NOT NULL,
    day          TEXT    NOT NULL, -- YYYY-MM-DD of the first point of the new level
    good_day     TEXT    NOT NULL DEFAULT '',
    good_sha     TEXT    NOT NULL DEFAULT '',
    bad_sha      TEXT    NOT NULL DEFAULT '',
    good_job_id  INTEGER NOT NULL DEFAULT 0,
    bad_job_id   INTEGER NOT NULL DEFAULT 0,
    mean_before  REAL    NOT NULL,
    mean_after   REAL    NOT NULL,
    std_before   REAL    NOT NULL DEFAULT 0,
    std_after    REAL    NOT NULL DEFAULT 0,
    change       REAL    NOT NULL,
    magnitude    REAL    NOT NULL,
    p_value      REAL    NOT NULL,
    regression   BOOLEAN NOT NULL DEFAULT FALSE,
    state        TEXT    NOT NULL DEFAULT 'open',
    issue_number INTEGER NOT NULL DEFAULT 0,
    issue_url    TEXT    NOT NULL DEFAULT '',
    slack_sent   BOOLEAN NOT NULL DEFAULT FALSE,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    UNIQUE (repo, key, metric, day)
);

CREATE INDEX audit_log_action ON audit_log (repo, action, id);
CREATE INDEX check_runs_repo_tier ON check_runs (repo, tier, id);
