-- A fork's commit runs on the runners only after someone the repository's
-- triggers.forks allows approved that exact commit: one row per approved
-- (repo, head_sha). A new push is a new SHA, so it needs a new approval.
CREATE TABLE commit_approvals (
    repo        TEXT    NOT NULL,
    head_sha    TEXT    NOT NULL,
    pr_number   INTEGER NOT NULL DEFAULT 0,
    approved_by TEXT    NOT NULL,
    role        TEXT    NOT NULL DEFAULT '',
    via         TEXT    NOT NULL DEFAULT '',
    created_at  BIGINT  NOT NULL,
    PRIMARY KEY (repo, head_sha)
);
