-- Probe runs carry what the replay tool and the benchmarks compare. A batch's
-- own probe is origin 'batch'; `assay replay` adds runs with origin 'replay'.
-- NULL in a new column means the run predates this migration (unknown).

-- Busy CPUs over the run: CPU-s / wall, and the largest rate sampled.
ALTER TABLE probe_runs ADD COLUMN avg_busy REAL;
ALTER TABLE probe_runs ADD COLUMN peak_busy REAL;
-- cargo invocations; fast mode's passes over its shared crate and the
-- candidates it sent to wide instead; streaming waves.
ALTER TABLE probe_runs ADD COLUMN builds INTEGER;
ALTER TABLE probe_runs ADD COLUMN passes INTEGER;
ALTER TABLE probe_runs ADD COLUMN fallbacks INTEGER;
ALTER TABLE probe_runs ADD COLUMN waves INTEGER;
-- Dependency units cargo reported fresh, and a JSON array of those it
-- rebuilt ('[]' when the target directory stayed warm), read from cargo's
-- `fresh` flags.
ALTER TABLE probe_runs ADD COLUMN deps_fresh INTEGER;
ALTER TABLE probe_runs ADD COLUMN deps_rebuilt TEXT;
ALTER TABLE probe_runs ADD COLUMN origin TEXT NOT NULL DEFAULT 'batch'
    CHECK (origin IN ('batch', 'replay'));
-- Replay only: 'warm' (the shared work directory) or 'fresh' (a new one).
ALTER TABLE probe_runs ADD COLUMN work_dir TEXT;
