-- Repair rounds (issue 28). Round 0 is a batch's first draw; round r is its
-- r-th repair round, whose prompts carry round r-1's failures (compiler
-- errors, failed visible cases) back to the pools. A repair round's replies
-- are numbered on from the last reply of the batch, so candidate N is still
-- reply N; each names the candidate it repairs. Round and parent are stored
-- on the reply (a candidate is its reply's code, and reads them from there).

ALTER TABLE replies ADD COLUMN round INTEGER NOT NULL DEFAULT 0 CHECK (round >= 0);
-- The candidate (same batch) whose repair this reply is; NULL in round 0.
ALTER TABLE replies ADD COLUMN parent INTEGER;

-- What the run asked of repair, as JSON (rounds, candidates per round, stop,
-- feedback, the repair pools, the output-token budget): a resume goes on
-- with the same. NULL: no repair and no budget.
ALTER TABLE batches ADD COLUMN repair TEXT;

-- One row per round of a batch that repairs, written before the round's draw
-- (round 0's when it ends): the replies it asks for (first_idx .. first_idx
-- + n - 1), and once it ends its wall time and, for the last one, why the
-- rounds stopped (all_pass, beats_committed, rounds_done, no_parents, budget).
CREATE TABLE repair_rounds (
    batch_id   INTEGER NOT NULL REFERENCES batches(id),
    round      INTEGER NOT NULL CHECK (round >= 0),
    first_idx  INTEGER NOT NULL,
    n          INTEGER NOT NULL CHECK (n >= 0),
    started_at TEXT NOT NULL,
    wall_s     REAL,
    stopped    TEXT,
    PRIMARY KEY (batch_id, round)
);

-- The parents of a round, each with its children's replies (first_idx ..
-- first_idx + children - 1) and the prompt they were asked with, exactly
-- as sent: what a model saw of the task's cases is on record.
CREATE TABLE repair_parents (
    batch_id   INTEGER NOT NULL REFERENCES batches(id),
    round      INTEGER NOT NULL CHECK (round >= 1),
    parent     INTEGER NOT NULL,
    first_idx  INTEGER NOT NULL,
    children   INTEGER NOT NULL CHECK (children >= 1),
    prompt     TEXT NOT NULL,
    PRIMARY KEY (batch_id, round, parent)
);

-- What a candidate's run answered on a failed *visible* case (the judge's
-- input, capped): the `got:` a repair prompt shows. Hidden cases' outputs
-- are never kept.
CREATE TABLE case_outputs (
    batch_id  INTEGER NOT NULL REFERENCES batches(id),
    idx       INTEGER NOT NULL,
    case_pos  INTEGER NOT NULL CHECK (case_pos >= 0),
    output    TEXT NOT NULL,
    PRIMARY KEY (batch_id, idx, case_pos)
);
