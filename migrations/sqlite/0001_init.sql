-- The first schema of assay's store. Never edit an applied migration: add a
-- new one. Candidates are numbered by their reply's index in the batch
-- (`idx`), so candidate N of batch B is always reply N of batch B.

CREATE TABLE batches (
    id            INTEGER PRIMARY KEY,
    task          TEXT NOT NULL,
    spec_path     TEXT NOT NULL,
    pool          TEXT NOT NULL,
    n             INTEGER NOT NULL CHECK (n > 0),
    -- running: being written; finished: every stage done; interrupted: the
    -- process stopped before the end (set on the next open, or on Ctrl-C).
    status        TEXT NOT NULL CHECK (status IN ('running', 'finished', 'interrupted', 'failed')),
    started_at    TEXT NOT NULL,
    finished_at   TEXT,
    errors_dir    TEXT,
    -- The committed candidate, scored in the same run as the reference.
    committed_verdict TEXT,
    committed_passed  INTEGER,
    committed_total   INTEGER,
    failure       TEXT
);

-- One row per reply, raw as the server sent it. NULL token counts mean the
-- server sent no usage: unknown, never zero.
CREATE TABLE replies (
    batch_id          INTEGER NOT NULL REFERENCES batches(id),
    idx               INTEGER NOT NULL,
    pool              TEXT NOT NULL,
    model             TEXT,
    content           TEXT,
    reasoning         TEXT,
    finish_reason     TEXT,
    prompt_tokens     INTEGER,
    completion_tokens INTEGER,
    ttft_ms           REAL,
    latency_ms        REAL,
    received_at       TEXT NOT NULL,
    PRIMARY KEY (batch_id, idx)
);

-- What extraction and dedup made of each reply. `source` and `fingerprint`
-- are NULL when nothing was extracted; `dup_of` names the group's
-- representative (the first candidate with the same fingerprint).
CREATE TABLE candidates (
    batch_id       INTEGER NOT NULL,
    idx            INTEGER NOT NULL,
    extract        TEXT NOT NULL,
    extract_detail TEXT,
    source         TEXT,
    fingerprint    TEXT,
    dup_of         INTEGER,
    PRIMARY KEY (batch_id, idx),
    FOREIGN KEY (batch_id, idx) REFERENCES replies(batch_id, idx)
);

-- A batch may be probed more than once (the replay tool); each time is a run.
CREATE TABLE probe_runs (
    id          INTEGER PRIMARY KEY,
    batch_id    INTEGER NOT NULL REFERENCES batches(id),
    mode        TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    wall_s      REAL,
    cpu_s       REAL
);

CREATE TABLE probe_verdicts (
    probe_run_id INTEGER NOT NULL REFERENCES probe_runs(id),
    batch_id     INTEGER NOT NULL,
    idx          INTEGER NOT NULL,
    verdict      TEXT NOT NULL,
    warnings     INTEGER NOT NULL,
    diagnostics  TEXT NOT NULL,
    error_file   TEXT,
    PRIMARY KEY (probe_run_id, idx)
);

CREATE TABLE scores (
    batch_id  INTEGER NOT NULL,
    idx       INTEGER NOT NULL,
    verdict   TEXT NOT NULL,
    passed    INTEGER NOT NULL,
    total     INTEGER NOT NULL,
    wall_ms   REAL NOT NULL,
    admitted  INTEGER NOT NULL CHECK (admitted IN (0, 1)),
    stderr    TEXT,
    PRIMARY KEY (batch_id, idx)
);

CREATE TABLE phases (
    batch_id   INTEGER NOT NULL REFERENCES batches(id),
    seq        INTEGER NOT NULL,
    phase      TEXT NOT NULL,
    wall_s     REAL NOT NULL,
    cpu_s      REAL NOT NULL,
    avg_busy   REAL NOT NULL,
    peak_busy  REAL NOT NULL,
    PRIMARY KEY (batch_id, seq)
);
