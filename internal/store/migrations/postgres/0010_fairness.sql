-- A fair queue over days (issue 23).
--
-- age_at: when a queued job has waited long enough (fleet.AgeAfter of its
-- class) to be claimed ahead of the strict priority order, oldest first;
-- NULL for merge work, which is first already. Jobs queued before this
-- migration do not age.
ALTER TABLE jobs ADD COLUMN age_at BIGINT;
CREATE INDEX jobs_aged ON jobs (age_at, seq) WHERE status = 'queued';

-- A tenant's line in a class: a job cancelled before it ran leaves it,
-- and the jobs behind it move up (refundQueued).
CREATE INDEX jobs_tenant_line ON jobs (priority, share_key, vtag) WHERE status = 'queued';
