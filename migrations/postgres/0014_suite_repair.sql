-- PostgreSQL twin of migrations/sqlite/0014_suite_repair.sql: same tables, columns and
-- checks (store::tests compares the two schemas).
-- Repair rounds of suites (issue 28). A suite's completions are its problems'
-- replies, so each already has its round and parent (0013: `replies.round`,
-- `replies.parent`), and each problem's round plan (its parents and the
-- prompts they were asked with) is its batch's `repair_rounds` and
-- `repair_parents` rows. A round of a suite spans every problem, so its
-- start, wall time and why the rounds stopped are the suite's.

-- What the run asked of repair, as JSON (rounds, feedback, the repair
-- pools, the output-token budget): a resume goes on with the same. NULL: a
-- suite without repair rounds.
ALTER TABLE suites ADD COLUMN repair TEXT;

-- One row per round of a suite that repairs: round 0 (the first draw) when
-- the suite begins, round r when its plan is stored (before any of its
-- requests is sent). `wall_s` once every completion of the round has its
-- outcome; `stopped` on the last round that ended: why no round follows
-- (all_pass, rounds_done, no_parents, budget).
CREATE TABLE suite_rounds (
    suite_id   BIGINT NOT NULL REFERENCES suites(id),
    round      BIGINT NOT NULL CHECK (round >= 0),
    started_at TEXT NOT NULL,
    wall_s     DOUBLE PRECISION,
    stopped    TEXT,
    PRIMARY KEY (suite_id, round)
);

-- What each failed case's run said when it panicked (the panic message,
-- capped): a JSON array by case, `null` for a case that passed or said
-- nothing. What a full-feedback repair prompt shows beside the failed
-- assert. NULL for programs that did not run, and for older rows.
ALTER TABLE suite_outcomes ADD COLUMN messages TEXT;
