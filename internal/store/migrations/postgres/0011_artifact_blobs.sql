-- Artifact bytes in the database (issue 23): with several replicas on one
-- PostgreSQL database a trace uploaded through one must be served by every
-- other, so the files live here, in 1 MiB chunks, under their SHA-256, and
-- not on a replica's disk. The artifacts table still says whose each is.
CREATE TABLE artifact_blobs (
    sha256      TEXT    PRIMARY KEY,
    size        BIGINT  NOT NULL,
    chunk_bytes INTEGER NOT NULL,
    created_at  BIGINT  NOT NULL -- last stored: the sweep's grace runs from it
);
CREATE INDEX artifact_blobs_created ON artifact_blobs (created_at);
CREATE TABLE artifact_chunks (
    sha256 TEXT    NOT NULL REFERENCES artifact_blobs (sha256) ON DELETE CASCADE,
    seq    INTEGER NOT NULL,
    data   BYTEA   NOT NULL,
    PRIMARY KEY (sha256, seq)
);
CREATE INDEX artifacts_sha256 ON artifacts (sha256);
