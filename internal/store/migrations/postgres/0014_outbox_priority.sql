-- Outbox priorities (issue 23): under GitHub's rate limit a verdict must
-- not wait behind queue notes. 0: a check run's completed state (the
-- verdict); 1: comments, reactions, cancels and other check syncs; 2: the
-- sync of a queued check (its queue note). Claims take the due rows in
-- priority order, oldest first within one. A check's sync is one row,
-- re-armed by every change, so its notes are coalesced already.
ALTER TABLE outbox ADD COLUMN priority INTEGER NOT NULL DEFAULT 1;
CREATE INDEX outbox_due_priority ON outbox (priority, next_attempt_at, id) WHERE status = 'pending';
