-- Issue 5: both fingerprints, dedup groups, the sandbox's record, per-run CPU
-- time and case outcomes, admission ranks and promotions. Additive only.

-- Both fingerprints are stored for every candidate, whichever one grouped
-- the batch (`batches.dedup_by`). `exact_dup_of` and `alpha_dup_of` name the
-- first earlier candidate with the same exact or alpha-renamed fingerprint;
-- `dup_of` (0001) is the one of the two that the batch deduped by.
ALTER TABLE candidates ADD COLUMN alpha_fingerprint TEXT;
ALTER TABLE candidates ADD COLUMN exact_dup_of INTEGER;
ALTER TABLE candidates ADD COLUMN alpha_dup_of INTEGER;

-- `exact` or `alpha`; NULL for batches stored before this migration (exact).
ALTER TABLE batches ADD COLUMN dedup_by TEXT;
-- What the scoring sandbox enforced in this batch, as one line
-- (`landlock abi 6 (fs, tcp, scopes); netns; pids cgroup v1 max 32; ...`), and
-- the warnings it gave. A batch scored without some confinement says so here.
ALTER TABLE batches ADD COLUMN sandbox TEXT;
ALTER TABLE batches ADD COLUMN sandbox_warnings TEXT;
-- The committed candidate's blake3 (hex) when the batch read it, its CPU time
-- and its per-case outcomes: promotion compares against exactly this file.
ALTER TABLE batches ADD COLUMN committed_hash TEXT;
ALTER TABLE batches ADD COLUMN committed_cpu_ms REAL;
ALTER TABLE batches ADD COLUMN committed_cases TEXT;

-- CPU time of the scoring run (user + system of the child and whatever it
-- waited for, from wait4), one letter per case in file order (`p` passed,
-- `f` failed, `x` panicked, `t` timed out, `c` crashed, `-` not run), how many
-- times the run was restarted under per-case isolation, the most processes
-- the run held at once (when a pids cgroup counted them), and the admitted
-- candidate's rank (1 = best; NULL when not admitted).
ALTER TABLE scores ADD COLUMN cpu_ms REAL;
ALTER TABLE scores ADD COLUMN cases TEXT;
ALTER TABLE scores ADD COLUMN restarts INTEGER;
ALTER TABLE scores ADD COLUMN peak_processes INTEGER;
ALTER TABLE scores ADD COLUMN rank INTEGER;
-- Why an unadmitted candidate was refused (`below min_score`, ...).
ALTER TABLE scores ADD COLUMN admission TEXT;

-- A candidate written over its task's committed file. `replaced_hash` is the
-- blake3 of the file it replaced, which was the batch's reference.
CREATE TABLE promotions (
    id             INTEGER PRIMARY KEY,
    batch_id       INTEGER NOT NULL REFERENCES batches(id),
    idx            INTEGER NOT NULL,
    path           TEXT NOT NULL,
    replaced_hash  TEXT NOT NULL,
    passed         INTEGER NOT NULL,
    total          INTEGER NOT NULL,
    reference_passed INTEGER NOT NULL,
    promoted_at    TEXT NOT NULL
);
