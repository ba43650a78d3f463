-- What rustc said of a suite's program that did not build (its errors,
-- capped as an error file is), kept in the store as a task candidate's
-- are (`probe_verdicts.diagnostics`): a repair round reads them from here,
-- and any machine that reaches the store can show them, whichever lane's
-- disk holds the error file. NULL for programs that built, and for rows
-- stored before this column.
ALTER TABLE suite_outcomes ADD COLUMN diagnostics TEXT;
