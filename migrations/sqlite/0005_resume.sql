-- Crash safety and --resume (issue 7).
--
-- Who owns a running batch. A batch is `running` only while the process that
-- writes it is alive; when that process dies without finishing (SIGKILL, a
-- power cut), the next `assay` to open the database finds the owner gone and
-- marks the batch `interrupted`. A process is named by its host, the kernel's
-- boot id, its pid and its start time (clock ticks since boot, from
-- /proc/PID/stat): a pid alone could be reused by an unrelated process, and
-- a pid from before a reboot means nothing. On another host nothing can be
-- told, so such a batch is left as it is.
ALTER TABLE batches ADD COLUMN owner_host  TEXT;
ALTER TABLE batches ADD COLUMN owner_boot  TEXT;
ALTER TABLE batches ADD COLUMN owner_pid   INTEGER;
ALTER TABLE batches ADD COLUMN owner_start INTEGER;

-- A digest of everything in the spec that decides verdicts and scores (entry,
-- cases, committed candidate, harness, limits, admission rule). `--resume`
-- refuses to finish a batch whose spec has changed since: the batch would mix
-- two oracles. NULL for batches made before this migration (not checked).
ALTER TABLE batches ADD COLUMN spec_digest TEXT;

-- A batch left `running` by a schema-1 assay has no owner to ask. Opening the
-- database with this schema means a newer assay is now in charge, so such a
-- batch is taken as interrupted (resumable) rather than left running forever.
UPDATE batches
   SET status = 'interrupted',
       failure = 'left running by an older assay; resume it with `assay run --resume ' || id || '`'
 WHERE status = 'running';

-- Each time `assay run --resume` takes a batch up again: what was already
-- stored at that moment (kept, not done again) and where this attempt's phase
-- rows begin (`first_phase_seq`), so a report can tell the first attempt's
-- phase figures from each resumed attempt's.
CREATE TABLE resumes (
    batch_id         INTEGER NOT NULL REFERENCES batches(id),
    attempt          INTEGER NOT NULL CHECK (attempt >= 1),
    started_at       TEXT NOT NULL,
    first_phase_seq  INTEGER NOT NULL,
    replies_kept     INTEGER NOT NULL,
    extracted_kept   INTEGER NOT NULL,
    probed_kept      INTEGER NOT NULL,
    scored_kept      INTEGER NOT NULL,
    committed_kept   INTEGER NOT NULL CHECK (committed_kept IN (0, 1)),
    PRIMARY KEY (batch_id, attempt)
);
