-- What a probe run was built with, and what it had to try again (issue 4's
-- loose ends). NULL in these columns means the run predates this migration
-- (unknown), or, for the toolchain, that the toolchain could not be asked.

-- `rustc -vV` and `cargo -V` of the toolchain the probe's cargo ran with,
-- asked through the same scrubbed environment and ASSAY_TOOLCHAIN choice as
-- the builds, trimmed. Kept whole: release, commit, host and LLVM version
-- each can change a verdict.
ALTER TABLE probe_runs ADD COLUMN rustc_version TEXT;
ALTER TABLE probe_runs ADD COLUMN cargo_version TEXT;
-- Candidates probed again after a build failure that can be transient
-- (killed, cargo failed without a word about the target), as a JSON array
-- of {"idx", "after" (the failure), "attempt" (1-based)}; '[]' when none.
ALTER TABLE probe_runs ADD COLUMN retries TEXT;
