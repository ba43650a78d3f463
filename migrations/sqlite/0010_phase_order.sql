-- Phase rows numbered by the store, not by their writer (issue 25).
--
-- A phase row's `seq` was computed by its INSERT (`COUNT(*)` or
-- `MAX(seq) + 1` of the rows already there) under PRIMARY KEY (owner, seq),
-- so two writers ending at once (the parts of one suite, run by lanes on
-- several machines) computed the same number and one of them failed on the
-- key. Now each row gets an id from the store as it is inserted, and a
-- batch's or a suite's phases read in the order of their ids: the order
-- they were recorded in. The old rows keep their order (their ids follow
-- (owner, seq)), and `resumes.first_phase_seq` keeps its meaning: the
-- number of the batch's phase rows recorded before that attempt began.
--
-- A suite's phases also name the part that recorded them (`part_start`,
-- `part_end`: problem positions START..END, the whole suite 0..2^63-1, as
-- `assay suite run --part` takes them; NULL for rows recorded before this
-- migration). Parts run at once interleave in time, so a suite's phases
-- are read part by part (parts in the order they began), each part's rows
-- in the order it recorded them.
--
-- SQLite cannot drop a primary key, so both tables are rebuilt.

CREATE TABLE phases_0010 (
    id         INTEGER PRIMARY KEY,
    batch_id   INTEGER NOT NULL REFERENCES batches(id),
    phase      TEXT NOT NULL,
    wall_s     REAL NOT NULL,
    cpu_s      REAL NOT NULL,
    avg_busy   REAL NOT NULL,
    peak_busy  REAL NOT NULL
);
INSERT INTO phases_0010 (id, batch_id, phase, wall_s, cpu_s, avg_busy, peak_busy)
SELECT ROW_NUMBER() OVER (ORDER BY batch_id, seq), batch_id, phase, wall_s, cpu_s,
       avg_busy, peak_busy
  FROM phases;
DROP TABLE phases;
ALTER TABLE phases_0010 RENAME TO phases;
CREATE INDEX phases_batch ON phases (batch_id, id);

CREATE TABLE suite_phases_0010 (
    id         INTEGER PRIMARY KEY,
    suite_id   INTEGER NOT NULL REFERENCES suites(id),
    part_start INTEGER,
    part_end   INTEGER,
    phase      TEXT NOT NULL,
    wall_s     REAL NOT NULL,
    cpu_s      REAL NOT NULL,
    avg_busy   REAL NOT NULL,
    peak_busy  REAL NOT NULL,
    CHECK ((part_start IS NULL) = (part_end IS NULL)),
    CHECK (part_start IS NULL OR (part_start >= 0 AND part_start < part_end))
);
INSERT INTO suite_phases_0010 (id, suite_id, phase, wall_s, cpu_s, avg_busy, peak_busy)
SELECT ROW_NUMBER() OVER (ORDER BY suite_id, seq), suite_id, phase, wall_s, cpu_s,
       avg_busy, peak_busy
  FROM suite_phases;
DROP TABLE suite_phases;
ALTER TABLE suite_phases_0010 RENAME TO suite_phases;
CREATE INDEX suite_phases_suite ON suite_phases (suite_id, id);
