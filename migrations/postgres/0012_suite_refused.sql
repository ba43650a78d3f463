-- Programs assay refuses to run for a verdict (issue 26): one syn cannot
-- read is never run as it stands and judged by its exit status (an early
-- `exit(0)` would pass); its status is `SyntaxError`. `refused` says why
-- (`unparsed`, `broken_tests`); `outcome`, `whole` and `cases` then hold
-- MultiPL-E's reading of the program as it stands, which
-- `multiple_status` reports. NULL for every program laid out and run.
ALTER TABLE suite_outcomes ADD COLUMN refused TEXT;
