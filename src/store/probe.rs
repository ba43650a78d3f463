//! The `probe_runs` and `probe_verdicts` tables.

use std::path::PathBuf;

use sqlx::Row;

use super::{BatchId, Store, StoreError};
use crate::build::probe::Probed;
use crate::support::account::PhaseFigures;

/// A probe run's figures beyond wall and CPU-s.
#[derive(Debug, Clone)]
pub struct ProbeRunStats<'a> {
    pub avg_busy: f64,
    pub peak_busy: f64,
    pub probe: &'a crate::build::probe::ProbeStats,
    /// `batch` or `replay`.
    pub origin: &'a str,
    /// Replay: `warm` or `fresh`.
    pub work_dir: Option<&'a str>,
    /// The toolchain the run built with, if it could be asked.
    pub toolchain: Option<&'a crate::build::probe::Toolchain>,
}

/// One stored probe verdict.
#[derive(Debug, Clone)]
pub struct ProbeVerdictRow {
    pub idx: usize,
    pub verdict: crate::build::probe::ProbeVerdict,
    pub warnings: usize,
    pub diagnostics: String,
}

/// A stored probe run. `None` figures predate migration 0003; `None`
/// toolchain and retries predate migration 0006.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProbeRunRow {
    pub id: i64,
    pub mode: String,
    pub origin: String,
    pub work_dir: Option<String>,
    pub started_at: String,
    pub wall_s: Option<f64>,
    pub cpu_s: Option<f64>,
    pub avg_busy: Option<f64>,
    pub peak_busy: Option<f64>,
    pub builds: Option<usize>,
    pub passes: Option<usize>,
    pub fallbacks: Option<usize>,
    pub waves: Option<usize>,
    pub deps_fresh: Option<usize>,
    pub deps_rebuilt: Option<Vec<String>>,
    /// `rustc -vV` and `cargo -V` of the toolchain the run built with.
    pub rustc_version: Option<String>,
    pub cargo_version: Option<String>,
    /// Candidates probed again after a failure that can be transient.
    pub retries: Option<Vec<crate::build::probe::ProbeRetry>>,
    pub compiled: usize,
    pub probed: usize,
}

impl ProbeRunRow {
    /// What the run stored as figures and stats, for a repair round to add
    /// its own to (`PhaseFigures::then`, `ProbeStats::absorb`): a figure
    /// an older assay did not record counts as nothing.
    pub fn so_far(
        &self,
    ) -> (
        crate::support::account::PhaseFigures,
        crate::build::probe::ProbeStats,
    ) {
        let figures = crate::support::account::PhaseFigures {
            phase: crate::support::account::Phase::Probe,
            wall_s: self.wall_s.unwrap_or(0.0),
            cpu_s: self.cpu_s.unwrap_or(0.0),
            avg_busy: self.avg_busy.unwrap_or(0.0),
            peak_busy: self.peak_busy.unwrap_or(0.0),
        };
        let stats = crate::build::probe::ProbeStats {
            builds: self.builds.unwrap_or(0),
            passes: self.passes.unwrap_or(0),
            fallbacks: self.fallbacks.unwrap_or(0),
            deps_fresh: self.deps_fresh.unwrap_or(0),
            deps_rebuilt: self.deps_rebuilt.clone().unwrap_or_default(),
            waves: self.waves.unwrap_or(0),
            retries: self.retries.clone().unwrap_or_default(),
        };
        (figures, stats)
    }
}

impl Store {
    pub async fn begin_probe_run(&self, batch: BatchId, mode: &str) -> Result<i64, StoreError> {
        let row = sqlx::query(
            "INSERT INTO probe_runs (batch_id, mode, started_at)
             VALUES ($1, $2, $3) RETURNING id",
        )
        .bind(batch)
        .bind(mode)
        .bind(crate::support::clock::utc_now())
        .fetch_one(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(row.get(0))
    }

    /// Stores a whole probe run's verdicts in one transaction.
    pub async fn record_probe_verdicts(
        &self,
        run: i64,
        batch: BatchId,
        verdicts: &[(Probed, Option<PathBuf>)],
        figures: &PhaseFigures,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        for (probed, error_file) in verdicts {
            sqlx::query(
                "INSERT INTO probe_verdicts (probe_run_id, batch_id, idx, verdict, warnings, diagnostics, error_file)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(run)
            .bind(batch)
            .bind(probed.idx as i64)
            .bind(probed.verdict.to_string())
            .bind(probed.warnings as i64)
            .bind(&probed.diagnostics)
            .bind(error_file.as_ref().map(|p| p.display().to_string()))
            .execute(&mut *tx)
            .await
            .map_err(self.sql())?;
        }
        sqlx::query("UPDATE probe_runs SET wall_s = $1, cpu_s = $2 WHERE id = $3")
            .bind(figures.wall_s)
            .bind(figures.cpu_s)
            .bind(run)
            .execute(&mut *tx)
            .await
            .map_err(self.sql())?;
        tx.commit().await.map_err(self.sql())
    }

    /// Stores what a probe run did beyond its verdicts (migration 0003).
    pub async fn record_probe_run_stats(
        &self,
        run: i64,
        stats: &ProbeRunStats<'_>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE probe_runs SET avg_busy = $1, peak_busy = $2, builds = $3, passes = $4, fallbacks = $5,
                    waves = $6, deps_fresh = $7, deps_rebuilt = $8, origin = $9, work_dir = $10,
                    rustc_version = $11, cargo_version = $12, retries = $13
             WHERE id = $14",
        )
        .bind(stats.avg_busy)
        .bind(stats.peak_busy)
        .bind(stats.probe.builds as i64)
        .bind(stats.probe.passes as i64)
        .bind(stats.probe.fallbacks as i64)
        .bind(stats.probe.waves as i64)
        .bind(stats.probe.deps_fresh as i64)
        .bind(serde_json::to_string(&stats.probe.deps_rebuilt).unwrap_or_default())
        .bind(stats.origin)
        .bind(stats.work_dir)
        .bind(stats.toolchain.map(|t| t.rustc.as_str()))
        .bind(stats.toolchain.map(|t| t.cargo.as_str()))
        .bind(serde_json::to_string(&stats.probe.retries).unwrap_or_default())
        .bind(run)
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    /// Every probe run of a batch, oldest first.
    pub async fn probe_runs(&self, batch: BatchId) -> Result<Vec<ProbeRunRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, mode, origin, work_dir, started_at, wall_s, cpu_s, avg_busy, peak_busy,
                    builds, passes, fallbacks, waves, deps_fresh, deps_rebuilt,
                    rustc_version, cargo_version, retries,
                    (SELECT COUNT(*) FROM probe_verdicts v WHERE v.probe_run_id = r.id AND v.verdict = 'compiled') AS compiled,
                    (SELECT COUNT(*) FROM probe_verdicts v WHERE v.probe_run_id = r.id) AS probed
             FROM probe_runs r WHERE batch_id = $1 ORDER BY id",
        )
        .bind(batch)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        rows.iter()
            .map(|r| {
                let rebuilt: Option<String> = r.get("deps_rebuilt");
                let retries: Option<String> = r.get("retries");
                Ok(ProbeRunRow {
                    id: r.get("id"),
                    mode: r.get("mode"),
                    origin: r.get("origin"),
                    work_dir: r.get("work_dir"),
                    started_at: r.get("started_at"),
                    wall_s: r.get("wall_s"),
                    cpu_s: r.get("cpu_s"),
                    avg_busy: r.get("avg_busy"),
                    peak_busy: r.get("peak_busy"),
                    builds: r.get::<Option<i64>, _>("builds").map(|n| n as usize),
                    passes: r.get::<Option<i64>, _>("passes").map(|n| n as usize),
                    fallbacks: r.get::<Option<i64>, _>("fallbacks").map(|n| n as usize),
                    waves: r.get::<Option<i64>, _>("waves").map(|n| n as usize),
                    deps_fresh: r.get::<Option<i64>, _>("deps_fresh").map(|n| n as usize),
                    deps_rebuilt: match rebuilt {
                        Some(text) => Some(
                            serde_json::from_str(&text)
                                .map_err(|_| self.bad(batch, -1, "deps_rebuilt", &text))?,
                        ),
                        None => None,
                    },
                    rustc_version: r.get("rustc_version"),
                    cargo_version: r.get("cargo_version"),
                    retries: match retries {
                        Some(text) => Some(
                            serde_json::from_str(&text)
                                .map_err(|_| self.bad(batch, -1, "retries", &text))?,
                        ),
                        None => None,
                    },
                    compiled: r.get::<i64, _>("compiled") as usize,
                    probed: r.get::<i64, _>("probed") as usize,
                })
            })
            .collect()
    }

    /// One probe run's verdicts, by candidate.
    pub async fn probe_verdicts(
        &self,
        batch: BatchId,
        run: i64,
    ) -> Result<Vec<ProbeVerdictRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT idx, verdict, warnings, diagnostics FROM probe_verdicts
             WHERE probe_run_id = $1 ORDER BY idx",
        )
        .bind(run)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        rows.iter()
            .map(|r| {
                let idx: i64 = r.get("idx");
                let verdict: String = r.get("verdict");
                Ok(ProbeVerdictRow {
                    idx: idx as usize,
                    verdict: self.parse(batch, idx, "probe verdict", &verdict)?,
                    warnings: r.get::<i64, _>("warnings") as usize,
                    diagnostics: r.get("diagnostics"),
                })
            })
            .collect()
    }

    /// The batch's own (first) probe run, which `candidates` reads.
    pub async fn first_probe_run(&self, batch: BatchId) -> Result<Option<i64>, StoreError> {
        sqlx::query_scalar("SELECT MIN(id) FROM probe_runs WHERE batch_id = $1")
            .bind(batch)
            .fetch_one(&self.pool)
            .await
            .map_err(self.sql())
    }
}
