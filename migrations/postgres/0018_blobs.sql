-- PostgreSQL twin of migrations/sqlite/0018_blobs.sql (store::tests
-- compares the two schemas; BYTEA is SQLite's BLOB).
-- Content-addressed blobs (issue 36): a queued task's files, stored once
-- per distinct content and named by their blake3 digest (64 hex digits),
-- so a lane on a machine that shares nothing but this database
-- materializes the task as it was when queued. A work item names its
-- files' blobs and the digest of the whole set (`queue::carry`); a blob is
-- never changed once written, and two items of one task share its blobs.
CREATE TABLE blobs (
    digest TEXT PRIMARY KEY,
    size BIGINT NOT NULL,
    content BYTEA NOT NULL
);
