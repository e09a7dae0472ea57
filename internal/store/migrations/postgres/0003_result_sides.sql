-- Interleaved base/head jobs: each measured run says which commit it
-- measured ("base" or "head"; "" for a job that measures one commit) and
-- which base/head pair it belongs to.
ALTER TABLE results ADD COLUMN side TEXT NOT NULL DEFAULT '';
ALTER TABLE results ADD COLUMN pair INTEGER NOT NULL DEFAULT 0;
