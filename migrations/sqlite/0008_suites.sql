-- Suites (issue 14): a problem set in MultiPL-E's schema, run as one scheme.
--
-- The single-task batch stays the unit of storage and resume: each problem
-- of a suite is a batch of its own (`task` is the problem's name,
-- `spec_path` the problems file), its completions are the batch's replies
-- (`pool` is `completions` when they were read from a file), and its
-- programs are the batch's candidates (`source` is the program as built,
-- `dup_of` its representative within the problem). A batch belongs to a
-- suite through `suite_problems`; `assay batches` lists only batches that
-- belong to none.

CREATE TABLE suites (
    id               INTEGER PRIMARY KEY,
    problems_path    TEXT NOT NULL,
    -- blake3 (hex) of the problems file as read.
    problems_digest  TEXT NOT NULL,
    -- `completions` (read from `source`, a JSONL file or MultiPL-E's
    -- output directory) or `pool` (drawn live; `source` is the plan's label).
    origin           TEXT NOT NULL CHECK (origin IN ('completions', 'pool')),
    source           TEXT NOT NULL,
    -- How a completion becomes a program: `completion` (prompt + the
    -- completion cut at a stop token + tests) or `chat` (the extracted
    -- function + tests without their leading brace).
    mode             TEXT NOT NULL CHECK (mode IN ('completion', 'chat')),
    problems         INTEGER NOT NULL CHECK (problems > 0),
    started_at       TEXT NOT NULL,
    finished_at      TEXT,
    -- What confined the programs' runs, as `batches.sandbox` says it.
    sandbox          TEXT,
    sandbox_warnings TEXT
);

-- One row per problem: the problem as the suite read it (so reports and
-- resumes need no file), and its batch.
CREATE TABLE suite_problems (
    batch_id    INTEGER PRIMARY KEY REFERENCES batches(id),
    suite_id    INTEGER NOT NULL REFERENCES suites(id),
    -- The problem's place in the problems file (0-based): every report's order.
    pos         INTEGER NOT NULL,
    name        TEXT NOT NULL,
    prompt      TEXT NOT NULL,
    tests       TEXT NOT NULL,
    -- A JSON array of strings.
    stop_tokens TEXT NOT NULL,
    UNIQUE (suite_id, pos),
    UNIQUE (suite_id, name)
);
CREATE INDEX suite_problems_suite ON suite_problems (suite_id, pos);

-- What each completion's program came to, one row per completion (a
-- duplicate gets its representative's row, written with it). Missing rows
-- are what a resume still has to do.
CREATE TABLE suite_outcomes (
    batch_id        INTEGER NOT NULL,
    idx             INTEGER NOT NULL,
    -- The probe's verdict (`compiled`, `compile_error(E0308)`,
    -- `forbidden(unsafe_code)`, `compile_timeout`, ...) and, when the
    -- program did not build, the file holding rustc's words. NULL when the
    -- completion gave no program (a failed request, a chat reply without
    -- code): nothing was built, and its status is `SyntaxError`.
    probe           TEXT,
    error_file      TEXT,
    -- `compile_error`, `compile_timeout` or `ran`; for `ran`, how the whole
    -- `main` ended and how each case ended alone (`passed`, `exited_early`,
    -- `failed(101)`, `signalled(6)`, `timed_out`; comma-separated in
    -- the order of the asserts).
    outcome         TEXT NOT NULL CHECK (outcome IN ('compile_error', 'compile_timeout', 'ran')),
    whole           TEXT,
    cases           TEXT,
    -- assay's status and MultiPL-E's reading of the same runs.
    status          TEXT NOT NULL CHECK (status IN ('OK', 'SyntaxError', 'Exception', 'Timeout')),
    multiple_status TEXT NOT NULL CHECK (multiple_status IN ('OK', 'SyntaxError', 'Exception', 'Timeout')),
    -- The runs' wall (summed) and CPU time (user + system, from wait4).
    run_wall_ms     REAL,
    run_cpu_ms      REAL,
    PRIMARY KEY (batch_id, idx),
    FOREIGN KEY (batch_id, idx) REFERENCES replies(batch_id, idx)
);

-- A suite's phases, measured as batches' are (`phases`): the probe and the
-- runs stream over the whole suite, so they are the suite's, not a
-- problem's.
CREATE TABLE suite_phases (
    suite_id   INTEGER NOT NULL REFERENCES suites(id),
    seq        INTEGER NOT NULL,
    phase      TEXT NOT NULL,
    wall_s     REAL NOT NULL,
    cpu_s      REAL NOT NULL,
    avg_busy   REAL NOT NULL,
    peak_busy  REAL NOT NULL,
    PRIMARY KEY (suite_id, seq)
);
