-- The pools jobs have been queued for (fleet.Pool: labels and card pin),
-- with what each asks. A claim first matches the runner against these few
-- rows and, when no pool is its, answers at once instead of walking every
-- queued job (issue 23: idle runners of an unserved pool walked 10,000
-- jobs on every poll). A pool is added by the first job queued for it and
-- kept: pools are few.
CREATE TABLE queue_pools (
    pool            TEXT PRIMARY KEY,
    required_labels TEXT NOT NULL,
    gpu_uuid        TEXT NOT NULL
);
INSERT OR IGNORE INTO queue_pools (pool, required_labels, gpu_uuid)
    SELECT pool, required_labels, gpu_uuid FROM jobs WHERE status = 'queued' AND pool <> '';
-- Jobs queued before their pool was recorded (pool ''): every runner is a
-- candidate, and the claim checks each job's labels as before.
INSERT OR IGNORE INTO queue_pools (pool, required_labels, gpu_uuid)
    SELECT '', '[]', '' WHERE EXISTS (SELECT 1 FROM jobs WHERE status = 'queued' AND pool = '');
