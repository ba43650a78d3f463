//! Store: the SQLite file, through sqlx. The only module that runs SQL.
//!
//! The schema is in `migrations/`, embedded and applied on open. Every write
//! is its own statement (or a small transaction) issued as the result
//! arrives, so a killed batch keeps everything it had. Verdicts are stored in
//! their stable string forms.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};

use crate::account::{Phase, PhaseFigures};
use crate::draw::Drawn;
use crate::extract::Extraction;
use crate::owner::Owner;
use crate::probe::Probed;
use crate::score::Scored;

mod suite;

pub use suite::{
    NewCompletion, NewProblem, NewSuite, SuiteCompletionRow, SuiteId, SuiteOrigin, SuiteOutcomeRow,
    SuiteProblemRow, SuiteRow,
};

pub type BatchId = i64;

#[derive(Debug, Clone)]
pub struct Store {
    pool: SqlitePool,
    path: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {message}")]
    Open { path: PathBuf, message: String },
    #[error("{path}: cannot migrate the database")]
    Migrate {
        path: PathBuf,
        source: sqlx::migrate::MigrateError,
    },
    #[error("{path}")]
    Sql { path: PathBuf, source: sqlx::Error },
    #[error("{path}: no batch {id}")]
    NoBatch { path: PathBuf, id: BatchId },
    #[error("{path}: no suite {id} (`assay suite list` names them)")]
    NoSuite { path: PathBuf, id: i64 },
    #[error("{path}: the database has schema version {found}, newer than this assay knows ({known}); use a newer assay")]
    TooNew {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error("{path}: the database is read-only")]
    ReadOnly { path: PathBuf },
    /// A reading command names a database that is not there: it never
    /// creates one.
    #[error("{path}: no such database (check --db or ASSAY_DB)")]
    Missing { path: PathBuf },
    #[error("{path}: batch {id} {why}")]
    NotResumable {
        path: PathBuf,
        id: BatchId,
        why: String,
    },
    #[error("{path}: batch {batch}, candidate {idx}: bad stored {field} `{value}`")]
    BadValue {
        path: PathBuf,
        batch: BatchId,
        idx: i64,
        field: &'static str,
        value: String,
    },
}

/// A batch about to start.
#[derive(Debug, Clone)]
pub struct NewBatch<'a> {
    pub task: &'a str,
    pub spec_path: &'a Path,
    pub pool: &'a str,
    pub n: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchStatus {
    Running,
    Finished,
    Interrupted,
    Failed,
}

/// A stored batch.
#[derive(Debug, Clone)]
pub struct BatchRow {
    pub id: BatchId,
    pub task: String,
    pub spec_path: String,
    pub pool: String,
    pub n: usize,
    pub status: BatchStatus,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub errors_dir: Option<String>,
    pub committed: Option<Scored>,
    pub failure: Option<String>,
    /// `exact` or `alpha` (exact for batches stored before it was recorded).
    pub dedup_by: crate::spec::DedupBy,
    /// What the scoring sandbox enforced, and what it warned about.
    pub sandbox: Option<String>,
    pub sandbox_warnings: Option<String>,
    /// blake3 (hex) of the committed file as the batch read it.
    pub committed_hash: Option<String>,
}

/// A stored candidate with what every stage made of it.
#[derive(Debug, Clone)]
pub struct CandidateRow {
    pub idx: usize,
    pub pool: String,
    pub model: Option<String>,
    pub completion_tokens: Option<u64>,
    pub extraction: Extraction,
    pub fingerprint: Option<String>,
    pub dup_of: Option<usize>,
    pub probe: Option<crate::probe::ProbeVerdict>,
    pub error_file: Option<String>,
    pub score: Option<Scored>,
    pub admitted: bool,
    pub alpha_fingerprint: Option<String>,
    /// First earlier candidate with the same exact / alpha fingerprint.
    pub exact_dup_of: Option<usize>,
    pub alpha_dup_of: Option<usize>,
    /// Rank among the admitted (1 = best).
    pub rank: Option<usize>,
    /// Admission's decision (`admitted(rank 1)`, `below_min_score`, ...).
    pub admission: Option<String>,
}

/// A recorded promotion.
#[derive(Debug, Clone, PartialEq)]
pub struct PromotionRow {
    pub batch_id: BatchId,
    pub idx: usize,
    pub path: String,
    pub replaced_hash: String,
    pub passed: usize,
    pub total: usize,
    pub reference_passed: usize,
    pub promoted_at: String,
}

/// A probe run's figures beyond wall and CPU-s.
#[derive(Debug, Clone)]
pub struct ProbeRunStats<'a> {
    pub avg_busy: f64,
    pub peak_busy: f64,
    pub probe: &'a crate::probe::ProbeStats,
    /// `batch` or `replay`.
    pub origin: &'a str,
    /// Replay: `warm` or `fresh`.
    pub work_dir: Option<&'a str>,
    /// The toolchain the run built with, if it could be asked.
    pub toolchain: Option<&'a crate::probe::Toolchain>,
}

/// One stored probe verdict.
#[derive(Debug, Clone)]
pub struct ProbeVerdictRow {
    pub idx: usize,
    pub verdict: crate::probe::ProbeVerdict,
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
    pub retries: Option<Vec<crate::probe::ProbeRetry>>,
    pub compiled: usize,
    pub probed: usize,
}

impl Store {
    /// Opens an existing database and brings its schema up to date; for
    /// commands that read, which never create a database (a mistyped
    /// `--db` would otherwise answer with an empty one).
    pub async fn open_existing(path: &Path) -> Result<Store, StoreError> {
        if !path.is_file() {
            return Err(StoreError::Missing {
                path: path.to_path_buf(),
            });
        }
        Store::open(path).await
    }

    /// Opens (creating if missing) the database and brings its schema up to date.
    pub async fn open(path: &Path) -> Result<Store, StoreError> {
        let open_err = |message: String| StoreError::Open {
            path: path.to_path_buf(),
            message,
        };
        // A device or a folder is no database: SQLite would write its
        // journal beside it (`/dev/full-journal`).
        if path.exists() && !path.is_file() {
            return Err(open_err("not a regular file".to_owned()));
        }
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            if !parent.is_dir() {
                return Err(open_err(format!(
                    "cannot create the database: directory {} does not exist",
                    parent.display()
                )));
            }
        }
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        // Held until the schema is current: creating the database, switching
        // it to WAL and migrating it happen in one opener at a time.
        let _opening = OpenLock::acquire(path).await?;
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .map_err(|e| {
                if is_read_only(&e) {
                    StoreError::ReadOnly {
                        path: path.to_path_buf(),
                    }
                } else if !path.exists() {
                    let dir = path
                        .parent()
                        .filter(|p| !p.as_os_str().is_empty())
                        .unwrap_or(Path::new("."));
                    open_err(format!(
                        "cannot create the database: directory {} is not writable",
                        dir.display()
                    ))
                } else {
                    open_err(format!("cannot open the database: {e}"))
                }
            })?;
        migrate(&pool, path).await?;
        Ok(Store {
            pool,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sql(&self) -> impl Fn(sqlx::Error) -> StoreError + '_ {
        // A write refused because the file is read-only is the user's
        // setup, wherever it surfaces.
        move |source| {
            if is_read_only(&source) {
                StoreError::ReadOnly {
                    path: self.path.clone(),
                }
            } else {
                StoreError::Sql {
                    path: self.path.clone(),
                    source,
                }
            }
        }
    }

    pub async fn begin_batch(&self, batch: &NewBatch<'_>) -> Result<BatchId, StoreError> {
        let row = sqlx::query(
            "INSERT INTO batches (task, spec_path, pool, n, status, started_at)
             VALUES (?, ?, ?, ?, 'running', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
             RETURNING id",
        )
        .bind(batch.task)
        .bind(batch.spec_path.display().to_string())
        .bind(batch.pool)
        .bind(batch.n as i64)
        .fetch_one(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(row.get(0))
    }

    pub async fn set_errors_dir(&self, batch: BatchId, dir: &Path) -> Result<(), StoreError> {
        sqlx::query("UPDATE batches SET errors_dir = ? WHERE id = ?")
            .bind(dir.display().to_string())
            .bind(batch)
            .execute(&self.pool)
            .await
            .map_err(self.sql())?;
        Ok(())
    }

    pub async fn record_reply(&self, batch: BatchId, drawn: &Drawn) -> Result<(), StoreError> {
        let r = &drawn.reply;
        sqlx::query(
            "INSERT INTO replies (batch_id, idx, pool, model, content, reasoning, finish_reason,
                                  prompt_tokens, completion_tokens, ttft_ms, latency_ms, received_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
        )
        .bind(batch)
        .bind(drawn.idx as i64)
        .bind(&drawn.pool)
        .bind(&r.model)
        .bind(&r.content)
        .bind(&r.reasoning)
        .bind(&r.finish_reason)
        .bind(r.prompt_tokens.map(|t| t as i64))
        .bind(r.completion_tokens.map(|t| t as i64))
        .bind(r.ttft_ms)
        .bind(r.latency_ms)
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    pub async fn record_candidate(
        &self,
        batch: BatchId,
        idx: usize,
        extraction: &Extraction,
        fingerprint: Option<&str>,
        dup_of: Option<usize>,
    ) -> Result<(), StoreError> {
        let (source, detail) = match extraction {
            Extraction::Source(src) => (Some(src.as_str()), None),
            Extraction::Failed(why) => (None, why.detail()),
        };
        sqlx::query(
            "INSERT INTO candidates (batch_id, idx, extract, extract_detail, source, fingerprint, dup_of)
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(batch)
        .bind(idx as i64)
        .bind(extraction.kind())
        .bind(detail)
        .bind(source)
        .bind(fingerprint)
        .bind(dup_of.map(|d| d as i64))
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    /// Stores both fingerprints' view of a candidate (after
    /// [`Store::record_candidate`], which stores the exact fingerprint and the
    /// grouping the batch used).
    pub async fn record_groups(
        &self,
        batch: BatchId,
        idx: usize,
        alpha_fingerprint: Option<&str>,
        grouping: &crate::dedup::Grouping,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE candidates SET alpha_fingerprint = ?, exact_dup_of = ?, alpha_dup_of = ?
             WHERE batch_id = ? AND idx = ?",
        )
        .bind(alpha_fingerprint)
        .bind(grouping.exact_dup_of.map(|d| d as i64))
        .bind(grouping.alpha_dup_of.map(|d| d as i64))
        .bind(batch)
        .bind(idx as i64)
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    /// Records how the batch deduplicates and what its sandbox enforces.
    pub async fn set_batch_setup(
        &self,
        batch: BatchId,
        dedup_by: crate::spec::DedupBy,
        sandbox: &str,
        sandbox_warnings: &[String],
        committed_hash: &str,
    ) -> Result<(), StoreError> {
        let warnings = (!sandbox_warnings.is_empty()).then(|| sandbox_warnings.join("\n"));
        sqlx::query(
            "UPDATE batches SET dedup_by = ?, sandbox = ?, sandbox_warnings = ?, committed_hash = ?
             WHERE id = ?",
        )
        .bind(dedup_by.as_str())
        .bind(sandbox)
        .bind(warnings)
        .bind(committed_hash)
        .bind(batch)
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    /// Stores a run's CPU time, case outcomes, restarts and peak processes
    /// (after [`Store::record_score`] or [`Store::record_committed`]).
    pub async fn record_run_details(
        &self,
        batch: BatchId,
        scored: &Scored,
    ) -> Result<(), StoreError> {
        let cpu_ms = scored.cpu.as_secs_f64() * 1e3;
        let cases = crate::score::case_letters(&scored.cases);
        let query = match scored.key {
            crate::package::ModuleKey::Committed => sqlx::query(
                "UPDATE batches SET committed_cpu_ms = ?, committed_cases = ? WHERE id = ?",
            )
            .bind(cpu_ms)
            .bind(cases)
            .bind(batch),
            crate::package::ModuleKey::Candidate(idx) => sqlx::query(
                "UPDATE scores SET cpu_ms = ?, cases = ?, restarts = ?, peak_processes = ?
                 WHERE batch_id = ? AND idx = ?",
            )
            .bind(cpu_ms)
            .bind(cases)
            .bind(scored.restarts as i64)
            .bind(scored.peak_processes.map(|p| p as i64))
            .bind(batch)
            .bind(idx as i64),
        };
        query.execute(&self.pool).await.map_err(self.sql())?;
        Ok(())
    }

    /// Stores every candidate's admission in one transaction.
    pub async fn record_admissions(
        &self,
        batch: BatchId,
        decisions: &[(usize, crate::admit::Admission)],
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        for (idx, decision) in decisions {
            sqlx::query(
                "UPDATE scores SET admitted = ?, rank = ?, admission = ? WHERE batch_id = ? AND idx = ?",
            )
            .bind(decision.admitted())
            .bind(decision.rank().map(|r| r as i64))
            .bind(decision.to_string())
            .bind(batch)
            .bind(*idx as i64)
            .execute(&mut *tx)
            .await
            .map_err(self.sql())?;
        }
        tx.commit().await.map_err(self.sql())
    }

    pub async fn record_promotion(&self, promotion: &PromotionRow) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO promotions (batch_id, idx, path, replaced_hash, passed, total, reference_passed, promoted_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(promotion.batch_id)
        .bind(promotion.idx as i64)
        .bind(&promotion.path)
        .bind(&promotion.replaced_hash)
        .bind(promotion.passed as i64)
        .bind(promotion.total as i64)
        .bind(promotion.reference_passed as i64)
        .bind(&promotion.promoted_at)
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    /// Promotions made from a batch, oldest first.
    pub async fn promotions(&self, batch: BatchId) -> Result<Vec<PromotionRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT batch_id, idx, path, replaced_hash, passed, total, reference_passed, promoted_at
             FROM promotions WHERE batch_id = ? ORDER BY id",
        )
        .bind(batch)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(rows
            .iter()
            .map(|r| PromotionRow {
                batch_id: r.get("batch_id"),
                idx: r.get::<i64, _>("idx") as usize,
                path: r.get("path"),
                replaced_hash: r.get("replaced_hash"),
                passed: r.get::<i64, _>("passed") as usize,
                total: r.get::<i64, _>("total") as usize,
                reference_passed: r.get::<i64, _>("reference_passed") as usize,
                promoted_at: r.get("promoted_at"),
            })
            .collect())
    }

    pub async fn begin_probe_run(&self, batch: BatchId, mode: &str) -> Result<i64, StoreError> {
        let row = sqlx::query(
            "INSERT INTO probe_runs (batch_id, mode, started_at)
             VALUES (?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) RETURNING id",
        )
        .bind(batch)
        .bind(mode)
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
                 VALUES (?, ?, ?, ?, ?, ?, ?)",
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
        sqlx::query("UPDATE probe_runs SET wall_s = ?, cpu_s = ? WHERE id = ?")
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
            "UPDATE probe_runs SET avg_busy = ?, peak_busy = ?, builds = ?, passes = ?, fallbacks = ?,
                    waves = ?, deps_fresh = ?, deps_rebuilt = ?, origin = ?, work_dir = ?,
                    rustc_version = ?, cargo_version = ?, retries = ?
             WHERE id = ?",
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
             FROM probe_runs r WHERE batch_id = ? ORDER BY id",
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
             WHERE probe_run_id = ? ORDER BY idx",
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

    pub async fn record_score(
        &self,
        batch: BatchId,
        idx: usize,
        scored: &Scored,
        admitted: bool,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO scores (batch_id, idx, verdict, passed, total, wall_ms, admitted, stderr)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(batch)
        .bind(idx as i64)
        .bind(scored.verdict.to_string())
        .bind(scored.passed as i64)
        .bind(scored.total as i64)
        .bind(scored.wall.as_secs_f64() * 1e3)
        .bind(admitted)
        .bind(Some(scored.stderr.as_str()).filter(|s| !s.is_empty()))
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    pub async fn record_committed(
        &self,
        batch: BatchId,
        scored: &Scored,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE batches SET committed_verdict = ?, committed_passed = ?, committed_total = ? WHERE id = ?",
        )
        .bind(scored.verdict.to_string())
        .bind(scored.passed as i64)
        .bind(scored.total as i64)
        .bind(batch)
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    pub async fn record_phase(
        &self,
        batch: BatchId,
        figures: &PhaseFigures,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO phases (batch_id, seq, phase, wall_s, cpu_s, avg_busy, peak_busy)
             VALUES (?, (SELECT COUNT(*) FROM phases WHERE batch_id = ?), ?, ?, ?, ?, ?)",
        )
        .bind(batch)
        .bind(batch)
        .bind(figures.phase.as_str())
        .bind(figures.wall_s)
        .bind(figures.cpu_s)
        .bind(figures.avg_busy)
        .bind(figures.peak_busy)
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    pub async fn finish_batch(
        &self,
        batch: BatchId,
        status: BatchStatus,
        failure: Option<&str>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE batches SET status = ?, failure = ?, finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
             WHERE id = ?",
        )
        .bind(status.as_str())
        .bind(failure)
        .bind(batch)
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    pub async fn batches(&self) -> Result<Vec<BatchRow>, StoreError> {
        // A suite's problems are batches too, listed by `assay suite`.
        let rows = sqlx::query(&format!(
            "{BATCH_SELECT} WHERE id NOT IN (SELECT batch_id FROM suite_problems) ORDER BY id"
        ))
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        rows.iter().map(|r| self.batch_row(r)).collect()
    }

    pub async fn batch(&self, id: BatchId) -> Result<BatchRow, StoreError> {
        let row = sqlx::query(&format!("{BATCH_SELECT} WHERE id = ?"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(self.sql())?
            .ok_or_else(|| StoreError::NoBatch {
                path: self.path.clone(),
                id,
            })?;
        self.batch_row(&row)
    }

    fn batch_row(&self, r: &sqlx::sqlite::SqliteRow) -> Result<BatchRow, StoreError> {
        let id: i64 = r.get("id");
        let committed = match r.get::<Option<String>, _>("committed_verdict") {
            Some(v) => Some(Scored {
                key: crate::package::ModuleKey::Committed,
                verdict: self.parse(id, -1, "committed verdict", &v)?,
                passed: r.get::<i64, _>("committed_passed") as usize,
                total: r.get::<i64, _>("committed_total") as usize,
                wall: Duration::ZERO,
                cpu: Duration::from_secs_f64(
                    r.get::<Option<f64>, _>("committed_cpu_ms").unwrap_or(0.0) / 1e3,
                ),
                cases: self.cases(id, -1, r.get("committed_cases"))?,
                restarts: 0,
                peak_processes: None,
                stderr: String::new(),
            }),
            None => None,
        };
        let dedup_by = match r.get::<Option<String>, _>("dedup_by") {
            Some(v) => self.parse(id, -1, "dedup_by", &v)?,
            None => crate::spec::DedupBy::Exact,
        };
        Ok(BatchRow {
            id,
            task: r.get("task"),
            spec_path: r.get("spec_path"),
            pool: r.get("pool"),
            n: r.get::<i64, _>("n") as usize,
            status: self.parse(id, -1, "status", &r.get::<String, _>("status"))?,
            started_at: r.get("started_at"),
            finished_at: r.get("finished_at"),
            errors_dir: r.get("errors_dir"),
            committed,
            failure: r.get("failure"),
            dedup_by,
            sandbox: r.get("sandbox"),
            sandbox_warnings: r.get("sandbox_warnings"),
            committed_hash: r.get("committed_hash"),
        })
    }

    /// Every candidate of a batch with its verdicts, from the batch's own
    /// (first) probe run.
    pub async fn candidates(&self, batch: BatchId) -> Result<Vec<CandidateRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT c.idx, r.pool, r.model, r.completion_tokens, c.extract, c.extract_detail, c.source,
                    c.fingerprint, c.dup_of, pv.verdict AS probe, pv.error_file,
                    s.verdict AS score, s.passed, s.total, s.wall_ms, s.admitted,
                    c.alpha_fingerprint, c.exact_dup_of, c.alpha_dup_of,
                    s.cpu_ms, s.cases, s.restarts, s.peak_processes, s.rank, s.admission
             FROM candidates c
             JOIN replies r ON r.batch_id = c.batch_id AND r.idx = c.idx
             LEFT JOIN probe_verdicts pv ON pv.batch_id = c.batch_id AND pv.idx = c.idx
                  AND pv.probe_run_id = (SELECT MIN(id) FROM probe_runs WHERE batch_id = c.batch_id)
             LEFT JOIN scores s ON s.batch_id = c.batch_id AND s.idx = c.idx
             WHERE c.batch_id = ?
             ORDER BY c.idx",
        )
        .bind(batch)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        rows.iter().map(|r| self.candidate_row(batch, r)).collect()
    }

    fn candidate_row(
        &self,
        batch: BatchId,
        r: &sqlx::sqlite::SqliteRow,
    ) -> Result<CandidateRow, StoreError> {
        let idx: i64 = r.get("idx");
        let kind: String = r.get("extract");
        let extraction = match r.get::<Option<String>, _>("source") {
            Some(source) if kind == "extracted" => Extraction::Source(source),
            _ => Extraction::Failed(
                crate::extract::NoCode::from_stored(
                    &kind,
                    r.get::<Option<&str>, _>("extract_detail"),
                )
                .ok_or_else(|| self.bad(batch, idx, "extraction", &kind))?,
            ),
        };
        let probe = match r.get::<Option<String>, _>("probe") {
            Some(v) => Some(self.parse(batch, idx, "probe verdict", &v)?),
            None => None,
        };
        let score = match r.get::<Option<String>, _>("score") {
            Some(v) => Some(Scored {
                key: crate::package::ModuleKey::Candidate(idx as usize),
                verdict: self.parse(batch, idx, "score verdict", &v)?,
                passed: r.get::<i64, _>("passed") as usize,
                total: r.get::<i64, _>("total") as usize,
                wall: Duration::from_secs_f64(r.get::<f64, _>("wall_ms") / 1e3),
                cpu: Duration::from_secs_f64(
                    r.get::<Option<f64>, _>("cpu_ms").unwrap_or(0.0) / 1e3,
                ),
                cases: self.cases(batch, idx, r.get("cases"))?,
                restarts: r.get::<Option<i64>, _>("restarts").unwrap_or(0) as usize,
                peak_processes: r.get::<Option<i64>, _>("peak_processes").map(|p| p as u64),
                stderr: String::new(),
            }),
            None => None,
        };
        Ok(CandidateRow {
            idx: idx as usize,
            pool: r.get("pool"),
            model: r.get("model"),
            completion_tokens: r
                .get::<Option<i64>, _>("completion_tokens")
                .map(|t| t as u64),
            extraction,
            fingerprint: r.get("fingerprint"),
            dup_of: r.get::<Option<i64>, _>("dup_of").map(|d| d as usize),
            probe,
            error_file: r.get("error_file"),
            admitted: r.get::<Option<bool>, _>("admitted").unwrap_or(false),
            score,
            alpha_fingerprint: r.get("alpha_fingerprint"),
            exact_dup_of: r.get::<Option<i64>, _>("exact_dup_of").map(|d| d as usize),
            alpha_dup_of: r.get::<Option<i64>, _>("alpha_dup_of").map(|d| d as usize),
            rank: r.get::<Option<i64>, _>("rank").map(|d| d as usize),
            admission: r.get("admission"),
        })
    }

    pub async fn phases(&self, batch: BatchId) -> Result<Vec<PhaseFigures>, StoreError> {
        let rows = sqlx::query(
            "SELECT phase, wall_s, cpu_s, avg_busy, peak_busy FROM phases WHERE batch_id = ? ORDER BY seq",
        )
        .bind(batch)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        rows.iter()
            .map(|r| {
                let name: String = r.get("phase");
                Ok(PhaseFigures {
                    phase: Phase::from_stored(&name)
                        .ok_or_else(|| self.bad(batch, -1, "phase", &name))?,
                    wall_s: r.get("wall_s"),
                    cpu_s: r.get("cpu_s"),
                    avg_busy: r.get("avg_busy"),
                    peak_busy: r.get("peak_busy"),
                })
            })
            .collect()
    }

    fn parse<T: FromStr>(
        &self,
        batch: BatchId,
        idx: i64,
        field: &'static str,
        value: &str,
    ) -> Result<T, StoreError> {
        value
            .parse()
            .map_err(|_| self.bad(batch, idx, field, value))
    }

    /// Stored case letters; none stored (an older batch) reads as no cases.
    fn cases(
        &self,
        batch: BatchId,
        idx: i64,
        text: Option<String>,
    ) -> Result<Vec<crate::score::CaseOutcome>, StoreError> {
        match text {
            None => Ok(Vec::new()),
            Some(t) => crate::score::parse_case_letters(&t)
                .ok_or_else(|| self.bad(batch, idx, "cases", &t)),
        }
    }

    fn bad(&self, batch: BatchId, idx: i64, field: &'static str, value: &str) -> StoreError {
        StoreError::BadValue {
            path: self.path.clone(),
            batch,
            idx,
            field,
            value: value.to_owned(),
        }
    }

    /// Seconds from a batch's start to its end (`None` while it has no end).
    pub async fn batch_wall_s(&self, batch: BatchId) -> Result<Option<f64>, StoreError> {
        let row = sqlx::query(
            "SELECT (julianday(finished_at) - julianday(started_at)) * 86400.0 AS wall
             FROM batches WHERE id = ?",
        )
        .bind(batch)
        .fetch_optional(&self.pool)
        .await
        .map_err(self.sql())?
        .ok_or_else(|| StoreError::NoBatch {
            path: self.path.clone(),
            id: batch,
        })?;
        Ok(row.get("wall"))
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Stores a drawn reply with all its draw figures and every attempt, in
    /// one transaction.
    pub async fn record_draw(&self, batch: BatchId, drawn: &Drawn) -> Result<(), StoreError> {
        self.record_draws(batch, std::slice::from_ref(drawn)).await
    }

    /// Stores replies that arrived together in one transaction (one commit
    /// instead of one per reply, so storing keeps up with hundreds of
    /// streams finishing at once).
    pub async fn record_draws(&self, batch: BatchId, drawn: &[Drawn]) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        for d in drawn {
            self.insert_draw(&mut tx, batch, d).await?;
        }
        tx.commit().await.map_err(self.sql())
    }

    async fn insert_draw(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
        batch: BatchId,
        drawn: &Drawn,
    ) -> Result<(), StoreError> {
        let r = &drawn.reply;
        sqlx::query(
            "INSERT INTO replies (batch_id, idx, pool, model, content, reasoning, finish_reason,
                                  prompt_tokens, completion_tokens, ttft_ms, latency_ms, received_at,
                                  outcome, http_status, error_message, error_body, ttft_reasoning_ms,
                                  chunks, hit_cap, cut_early, cap_tokens_left, attempts,
                                  cached_prompt_tokens)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
                     ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(batch)
        .bind(drawn.idx as i64)
        .bind(&drawn.pool)
        .bind(&r.model)
        .bind(&r.content)
        .bind(&r.reasoning)
        .bind(&r.finish_reason)
        .bind(r.prompt_tokens.map(|t| t as i64))
        .bind(r.completion_tokens.map(|t| t as i64))
        .bind(r.ttft_ms)
        .bind(r.latency_ms)
        .bind(r.outcome.to_string())
        .bind(r.outcome.status().map(i64::from))
        .bind(r.error.as_ref().map(|e| e.message.as_str()))
        .bind(r.error.as_ref().and_then(|e| e.body.as_deref()))
        .bind(r.ttft_reasoning_ms)
        .bind(r.chunks.map(|c| c as i64))
        .bind(r.hit_cap)
        .bind(r.cut_early)
        .bind(r.cap_tokens_left.map(|t| t as i64))
        .bind(r.attempts.len() as i64)
        .bind(r.cached_prompt_tokens.map(|t| t as i64))
        .execute(&mut **tx)
        .await
        .map_err(self.sql())?;
        for a in &r.attempts {
            self.insert_attempt(tx, batch, Some(drawn.idx), &drawn.pool, a)
                .await?;
        }
        Ok(())
    }

    /// Stores the attempts of a request that became no reply (cancelled
    /// when a race was full).
    pub async fn record_cancelled(
        &self,
        batch: BatchId,
        pool: &str,
        attempts: &[crate::draw::Attempt],
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        for a in attempts {
            self.insert_attempt(&mut tx, batch, None, pool, a).await?;
        }
        tx.commit().await.map_err(self.sql())
    }

    async fn insert_attempt(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
        batch: BatchId,
        idx: Option<usize>,
        pool: &str,
        a: &crate::draw::Attempt,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO draw_attempts (batch_id, idx, pool, attempt, started_ms, duration_ms, outcome,
                                        http_status, error_message, error_body, retry_after_ms, delay_ms)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(batch)
        .bind(idx.map(|i| i as i64))
        .bind(pool)
        .bind(i64::from(a.number))
        .bind(a.started_ms)
        .bind(a.duration_ms)
        .bind(a.outcome.to_string())
        .bind(a.outcome.status().map(i64::from))
        .bind(a.error.as_ref().map(|e| e.message.as_str()))
        .bind(a.error.as_ref().and_then(|e| e.body.as_deref()))
        .bind(a.retry_after_ms)
        .bind(a.delay_ms)
        .execute(&mut **tx)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    /// Every reply of a batch with its draw figures, by index.
    pub async fn draw_replies(&self, batch: BatchId) -> Result<Vec<Drawn>, StoreError> {
        let rows = sqlx::query(
            "SELECT idx, pool, model, content, reasoning, finish_reason, prompt_tokens,
                    completion_tokens, ttft_ms, latency_ms, outcome, error_message, error_body,
                    ttft_reasoning_ms, chunks, hit_cap, cut_early, cap_tokens_left,
                    cached_prompt_tokens
             FROM replies WHERE batch_id = ? ORDER BY idx",
        )
        .bind(batch)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        let attempts = self.draw_attempts(batch).await?;
        rows.iter()
            .map(|r| {
                let idx: i64 = r.get("idx");
                let attempts = attempts
                    .iter()
                    .filter(|(i, _, _)| *i == Some(idx as usize))
                    .map(|(_, _, a)| a.clone())
                    .collect();
                Ok(Drawn {
                    idx: idx as usize,
                    pool: r.get("pool"),
                    reply: self.reply_of_row(r, batch, "outcome", attempts)?,
                })
            })
            .collect()
    }

    /// A stored reply from its row of `replies` (selected with the columns
    /// `draw_replies` names; its outcome in `outcome_column`).
    pub(crate) fn reply_of_row(
        &self,
        r: &sqlx::sqlite::SqliteRow,
        batch: BatchId,
        outcome_column: &str,
        attempts: Vec<crate::draw::Attempt>,
    ) -> Result<crate::draw::Reply, StoreError> {
        let idx: i64 = r.get("idx");
        let outcome: String = r.get(outcome_column);
        let u = |name: &str| r.get::<Option<i64>, _>(name).map(|v| v as u64);
        Ok(crate::draw::Reply {
            content: r.get("content"),
            reasoning: r.get("reasoning"),
            finish_reason: r.get("finish_reason"),
            prompt_tokens: u("prompt_tokens"),
            cached_prompt_tokens: u("cached_prompt_tokens"),
            completion_tokens: u("completion_tokens"),
            model: r.get("model"),
            ttft_ms: r.get("ttft_ms"),
            ttft_reasoning_ms: r.get("ttft_reasoning_ms"),
            latency_ms: r.get("latency_ms"),
            chunks: u("chunks"),
            hit_cap: r.get("hit_cap"),
            cut_early: r.get("cut_early"),
            cap_tokens_left: u("cap_tokens_left"),
            outcome: self.parse(batch, idx, "reply outcome", &outcome)?,
            error: r.get::<Option<String>, _>("error_message").map(|message| {
                crate::draw::ErrorText {
                    message,
                    body: r.get("error_body"),
                }
            }),
            attempts,
        })
    }

    /// Every attempt of a batch: (reply index or `None` when cancelled,
    /// pool, attempt), in the order written.
    pub async fn draw_attempts(
        &self,
        batch: BatchId,
    ) -> Result<Vec<(Option<usize>, String, crate::draw::Attempt)>, StoreError> {
        let rows = sqlx::query(
            "SELECT idx, pool, attempt, started_ms, duration_ms, outcome, error_message, error_body,
                    retry_after_ms, delay_ms
             FROM draw_attempts WHERE batch_id = ? ORDER BY id",
        )
        .bind(batch)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        rows.iter()
            .map(|r| {
                let idx = r.get::<Option<i64>, _>("idx");
                let outcome: String = r.get("outcome");
                Ok((
                    idx.map(|i| i as usize),
                    r.get("pool"),
                    crate::draw::Attempt {
                        number: r.get::<i64, _>("attempt") as u32,
                        started_ms: r.get("started_ms"),
                        duration_ms: r.get("duration_ms"),
                        outcome: self.parse(
                            batch,
                            idx.unwrap_or(-1),
                            "attempt outcome",
                            &outcome,
                        )?,
                        error: r.get::<Option<String>, _>("error_message").map(|message| {
                            crate::draw::ErrorText {
                                message,
                                body: r.get("error_body"),
                            }
                        }),
                        retry_after_ms: r.get("retry_after_ms"),
                        delay_ms: r.get("delay_ms"),
                    },
                ))
            })
            .collect()
    }
}

/// Brings the schema up to date, refusing a database from a newer assay.
///
/// SQLite has no migration lock (sqlx's is a no-op there), so two processes
/// opening a new database at once can both try to apply a migration; the
/// loser's transaction fails and rolls back. Each migration commits with its
/// `_sqlx_migrations` row, so running the migrator again finds it applied.
async fn migrate(pool: &SqlitePool, path: &Path) -> Result<(), StoreError> {
    let migrator = sqlx::migrate!("./migrations");
    let known = migrator.iter().map(|m| m.version).max().unwrap_or(0);
    let found: Option<i64> = match sqlx::query_scalar::<_, i64>(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
    )
    .fetch_one(pool)
    .await
    {
        Ok(0) => None,
        Ok(_) => sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations")
            .fetch_one(pool)
            .await
            .ok()
            .flatten(),
        Err(e) => {
            return Err(StoreError::Open {
                path: path.to_path_buf(),
                message: format!("cannot read the database: {e}"),
            })
        }
    };
    if let Some(found) = found.filter(|v| *v > known) {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found,
            known,
        });
    }
    // No other opener is in here (see `OpenLock`), so a failure is real.
    migrator
        .run(pool)
        .await
        .map_err(|source| StoreError::Migrate {
            path: path.to_path_buf(),
            source,
        })
}

/// A batch the database says is running, with its owner where known.
#[derive(Debug, Clone)]
pub struct RunningBatch {
    pub id: BatchId,
    pub owner: Option<Owner>,
}

/// Whether `claim_for_resume` took the batch.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// Now running, owned by the caller; `failure` cleared.
    Claimed,
    Finished,
    /// Another process owns it (or did, and nobody has found it dead yet).
    Running(Option<Owner>),
}

/// One `--resume` of a batch: what was kept from earlier attempts.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ResumeRow {
    pub attempt: u32,
    pub started_at: String,
    /// Index into the batch's phase rows where this attempt's begin.
    pub first_phase: usize,
    pub replies_kept: usize,
    pub extracted_kept: usize,
    pub probed_kept: usize,
    pub scored_kept: usize,
    pub committed_kept: bool,
}

/// Counts for a new `resumes` row.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Kept {
    pub replies: usize,
    pub extracted: usize,
    pub probed: usize,
    pub scored: usize,
    pub committed: bool,
}

/// Crash safety and `--resume` (issue 7).
impl Store {
    /// Like `begin_batch`, with the owner and the spec digest written in the
    /// same statement, so no other process ever sees this batch running
    /// without an owner.
    pub async fn begin_owned_batch(
        &self,
        batch: &NewBatch<'_>,
        owner: &Owner,
        spec_digest: &str,
    ) -> Result<BatchId, StoreError> {
        let spec_path =
            std::path::absolute(batch.spec_path).unwrap_or_else(|_| batch.spec_path.to_path_buf());
        let row = sqlx::query(
            "INSERT INTO batches (task, spec_path, pool, n, status, started_at,
                                  owner_host, owner_boot, owner_pid, owner_start, spec_digest)
             VALUES (?, ?, ?, ?, 'running', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), ?, ?, ?, ?, ?)
             RETURNING id",
        )
        .bind(batch.task)
        .bind(spec_path.display().to_string())
        .bind(batch.pool)
        .bind(batch.n as i64)
        .bind(&owner.host)
        .bind(&owner.boot)
        .bind(owner.pid as i64)
        .bind(owner.start as i64)
        .bind(spec_digest)
        .fetch_one(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(row.get(0))
    }

    /// Fails with `ReadOnly` if nothing can be written (a write lock is
    /// taken and given back; nothing changes).
    pub async fn check_writable(&self) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await.map_err(self.sql())?;
        let result = sqlx::query("BEGIN IMMEDIATE").execute(&mut *conn).await;
        match result {
            Ok(_) => {
                sqlx::query("ROLLBACK")
                    .execute(&mut *conn)
                    .await
                    .map_err(self.sql())?;
                Ok(())
            }
            Err(e) if is_read_only(&e) => Err(StoreError::ReadOnly {
                path: self.path.clone(),
            }),
            Err(e) => Err(self.sql()(e)),
        }
    }

    /// Batches whose status is `running`, with their owners.
    pub async fn running_batches(&self) -> Result<Vec<RunningBatch>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, owner_host, owner_boot, owner_pid, owner_start FROM batches
             WHERE status = 'running' ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(rows
            .iter()
            .map(|r| RunningBatch {
                id: r.get("id"),
                owner: owner_of(r),
            })
            .collect())
    }

    /// Marks a running batch interrupted, but only if `owner` still owns it
    /// (a resume may have taken it over since it was read). True if marked.
    pub async fn interrupt_if_owned(
        &self,
        batch: BatchId,
        owner: Option<&Owner>,
        reason: &str,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE batches SET status = 'interrupted', failure = ?,
                    finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
             WHERE id = ? AND status = 'running' AND owner_pid IS ? AND owner_start IS ?
                   AND owner_boot IS ?",
        )
        .bind(reason)
        .bind(batch)
        .bind(owner.map(|o| o.pid as i64))
        .bind(owner.map(|o| o.start as i64))
        .bind(owner.map(|o| o.boot.as_str()))
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(done.rows_affected() == 1)
    }

    /// Takes an interrupted or failed batch over for `owner`, atomically: of
    /// two processes resuming one batch, one wins.
    pub async fn claim_for_resume(
        &self,
        batch: BatchId,
        owner: &Owner,
    ) -> Result<Claim, StoreError> {
        let done = sqlx::query(
            "UPDATE batches SET status = 'running', failure = NULL, finished_at = NULL,
                    owner_host = ?, owner_boot = ?, owner_pid = ?, owner_start = ?
             WHERE id = ? AND status IN ('interrupted', 'failed')",
        )
        .bind(&owner.host)
        .bind(&owner.boot)
        .bind(owner.pid as i64)
        .bind(owner.start as i64)
        .bind(batch)
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        if done.rows_affected() == 1 {
            return Ok(Claim::Claimed);
        }
        let row = sqlx::query(
            "SELECT status, owner_host, owner_boot, owner_pid, owner_start FROM batches WHERE id = ?",
        )
        .bind(batch)
        .fetch_optional(&self.pool)
        .await
        .map_err(self.sql())?
        .ok_or_else(|| StoreError::NoBatch {
            path: self.path.clone(),
            id: batch,
        })?;
        Ok(match row.get::<String, _>("status").as_str() {
            "finished" => Claim::Finished,
            _ => Claim::Running(owner_of(&row)),
        })
    }

    /// The spec digest recorded when the batch began (None before schema 5).
    pub async fn spec_digest(&self, batch: BatchId) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar("SELECT spec_digest FROM batches WHERE id = ?")
            .bind(batch)
            .fetch_optional(&self.pool)
            .await
            .map_err(self.sql())?
            .ok_or_else(|| StoreError::NoBatch {
                path: self.path.clone(),
                id: batch,
            })
    }

    /// Every stored reply of a batch, in index order (what a resume keeps).
    pub async fn replies(&self, batch: BatchId) -> Result<Vec<Drawn>, StoreError> {
        self.draw_replies(batch).await
    }

    /// The batch's own (first) probe run, which `candidates` reads.
    pub async fn first_probe_run(&self, batch: BatchId) -> Result<Option<i64>, StoreError> {
        sqlx::query_scalar("SELECT MIN(id) FROM probe_runs WHERE batch_id = ?")
            .bind(batch)
            .fetch_one(&self.pool)
            .await
            .map_err(self.sql())
    }

    /// Records that an attempt resumes the batch now; returns its number.
    pub async fn record_resume(&self, batch: BatchId, kept: &Kept) -> Result<u32, StoreError> {
        let attempt: i64 = sqlx::query_scalar(
            "INSERT INTO resumes (batch_id, attempt, started_at, first_phase_seq, replies_kept,
                                  extracted_kept, probed_kept, scored_kept, committed_kept)
             VALUES (?, (SELECT COUNT(*) + 1 FROM resumes WHERE batch_id = ?),
                     strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
                     (SELECT COUNT(*) FROM phases WHERE batch_id = ?), ?, ?, ?, ?, ?)
             RETURNING attempt",
        )
        .bind(batch)
        .bind(batch)
        .bind(batch)
        .bind(kept.replies as i64)
        .bind(kept.extracted as i64)
        .bind(kept.probed as i64)
        .bind(kept.scored as i64)
        .bind(kept.committed)
        .fetch_one(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(attempt as u32)
    }

    /// Every resume of a batch, in order.
    pub async fn resumes(&self, batch: BatchId) -> Result<Vec<ResumeRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT attempt, started_at, first_phase_seq, replies_kept, extracted_kept,
                    probed_kept, scored_kept, committed_kept
             FROM resumes WHERE batch_id = ? ORDER BY attempt",
        )
        .bind(batch)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(rows
            .iter()
            .map(|r| ResumeRow {
                attempt: r.get::<i64, _>("attempt") as u32,
                started_at: r.get("started_at"),
                first_phase: r.get::<i64, _>("first_phase_seq") as usize,
                replies_kept: r.get::<i64, _>("replies_kept") as usize,
                extracted_kept: r.get::<i64, _>("extracted_kept") as usize,
                probed_kept: r.get::<i64, _>("probed_kept") as usize,
                scored_kept: r.get::<i64, _>("scored_kept") as usize,
                committed_kept: r.get("committed_kept"),
            })
            .collect())
    }
}

fn owner_of(r: &sqlx::sqlite::SqliteRow) -> Option<Owner> {
    Some(Owner {
        host: r.get::<Option<String>, _>("owner_host")?,
        boot: r.get::<Option<String>, _>("owner_boot")?,
        pid: r.get::<Option<i64>, _>("owner_pid")? as u32,
        start: r.get::<Option<i64>, _>("owner_start")? as u64,
    })
}

/// How long a connection waits for a lock another connection holds.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Serialises `Store::open` across connections, tasks and processes.
///
/// SQLite's busy handler does not cover opening a new database from several
/// connections at once: switching it to WAL and a deferred migration
/// transaction that upgrades to a write can get `SQLITE_BUSY` at once,
/// without waiting, and two openers that both find the schema missing both
/// try to apply it. So every opener takes an exclusive `flock` first and
/// holds it until the schema is current; later opens find a WAL database
/// with every migration applied, which needs only ordinary locks.
///
/// The lock is on the database's directory, not on the database file: a
/// second descriptor on the database file, when closed, would drop the
/// POSIX locks SQLite holds on it in this process. `flock` locks are per
/// open file description, so two opens in one process exclude each other
/// as two processes do.
struct OpenLock {
    // Unlocked when closed, on drop.
    _dir: std::fs::File,
}

impl OpenLock {
    async fn acquire(db: &Path) -> Result<OpenLock, StoreError> {
        let dir = db
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        let db = db.to_path_buf();
        tokio::task::spawn_blocking(move || {
            let lock = |e: std::io::Error| StoreError::Open {
                path: db.clone(),
                message: format!(
                    "cannot lock directory {} to open the database: {e}",
                    dir.display()
                ),
            };
            let file = std::fs::File::open(&dir).map_err(lock)?;
            file.lock().map_err(lock)?;
            Ok(OpenLock { _dir: file })
        })
        .await
        .expect("taking the open lock does not panic")
    }
}

fn is_read_only(e: &sqlx::Error) -> bool {
    // SQLITE_READONLY is 8; its extended codes keep 8 in the low byte.
    e.as_database_error()
        .and_then(|d| d.code())
        .and_then(|c| c.parse::<i32>().ok())
        .is_some_and(|c| c & 0xff == 8)
}

const BATCH_SELECT: &str =
    "SELECT id, task, spec_path, pool, n, status, started_at, finished_at, errors_dir,
        committed_verdict, committed_passed, committed_total, failure,
        dedup_by, sandbox, sandbox_warnings, committed_hash, committed_cpu_ms, committed_cases
     FROM batches";

impl BatchStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            BatchStatus::Running => "running",
            BatchStatus::Finished => "finished",
            BatchStatus::Interrupted => "interrupted",
            BatchStatus::Failed => "failed",
        }
    }
}

impl FromStr for BatchStatus {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Ok(match s {
            "running" => BatchStatus::Running,
            "finished" => BatchStatus::Finished,
            "interrupted" => BatchStatus::Interrupted,
            "failed" => BatchStatus::Failed,
            _ => return Err(()),
        })
    }
}

impl serde::Serialize for BatchStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl std::fmt::Display for BatchStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::draw::Reply;
    use crate::package::ModuleKey;
    use crate::probe::ProbeVerdict;
    use crate::score::ScoreVerdict;

    async fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).await.unwrap();
        (dir, store)
    }

    #[tokio::test]
    async fn a_batch_round_trips() {
        let (_d, store) = store().await;
        let batch = store
            .begin_batch(&NewBatch {
                task: "demo",
                spec_path: Path::new("specs/demo/spec.toml"),
                pool: "replay",
                n: 2,
            })
            .await
            .unwrap();
        for idx in 0..2 {
            let drawn = Drawn {
                idx,
                pool: "replay".into(),
                reply: Reply {
                    content: Some(format!("reply {idx}")),
                    completion_tokens: (idx == 0).then_some(42),
                    ..Reply::default()
                },
            };
            store.record_reply(batch, &drawn).await.unwrap();
        }
        store
            .record_candidate(
                batch,
                0,
                &Extraction::Source("fn f() {}".into()),
                Some("ab"),
                None,
            )
            .await
            .unwrap();
        store
            .record_candidate(
                batch,
                1,
                &Extraction::Failed(crate::extract::NoCode::Unparsable {
                    detail: "line 1: x".into(),
                }),
                None,
                None,
            )
            .await
            .unwrap();
        let run = store.begin_probe_run(batch, "wide").await.unwrap();
        let probed = Probed {
            idx: 0,
            verdict: ProbeVerdict::CompileError {
                codes: vec!["E0308".into()],
            },
            diagnostics: "error[E0308]".into(),
            warnings: 1,
        };
        let figures = PhaseFigures {
            phase: Phase::Probe,
            wall_s: 1.0,
            cpu_s: 1.5,
            avg_busy: 1.5,
            peak_busy: 2.0,
        };
        store
            .record_probe_verdicts(run, batch, &[(probed, Some("e/c0.txt".into()))], &figures)
            .await
            .unwrap();
        store.record_phase(batch, &figures).await.unwrap();
        let committed = Scored {
            key: ModuleKey::Committed,
            verdict: ScoreVerdict::Scored {
                passed: 3,
                total: 4,
            },
            passed: 3,
            total: 4,
            wall: Duration::from_millis(5),
            cpu: Duration::from_millis(4),
            cases: crate::score::parse_case_letters("ppfp").unwrap(),
            restarts: 0,
            peak_processes: None,
            stderr: String::new(),
        };
        store.record_committed(batch, &committed).await.unwrap();
        store.record_run_details(batch, &committed).await.unwrap();
        store
            .finish_batch(batch, BatchStatus::Finished, None)
            .await
            .unwrap();

        let row = store.batch(batch).await.unwrap();
        assert_eq!(row.status, BatchStatus::Finished);
        let stored = row.committed.unwrap();
        assert_eq!(stored.verdict, committed.verdict);
        assert_eq!(stored.cases, committed.cases);
        assert_eq!(stored.cpu, committed.cpu);
        let cands = store.candidates(batch).await.unwrap();
        assert_eq!(cands.len(), 2);
        assert_eq!(cands[0].completion_tokens, Some(42));
        assert_eq!(cands[1].completion_tokens, None, "unknown stays unknown");
        assert_eq!(
            cands[0].probe.as_ref().unwrap().to_string(),
            "compile_error(E0308)"
        );
        assert_eq!(cands[0].error_file.as_deref(), Some("e/c0.txt"));
        assert_eq!(cands[1].extraction.kind(), "unparsable");
        assert_eq!(store.phases(batch).await.unwrap(), vec![figures]);
        assert!(matches!(
            store.batch(99).await,
            Err(StoreError::NoBatch { .. })
        ));
    }

    fn new_batch() -> NewBatch<'static> {
        NewBatch {
            task: "demo",
            spec_path: Path::new("/specs/demo/spec.toml"),
            pool: "replay",
            n: 3,
        }
    }

    #[tokio::test]
    async fn an_owned_batch_is_claimed_once_and_only_when_stopped() {
        let (_d, store) = store().await;
        let me = Owner::current();
        let batch = store
            .begin_owned_batch(&new_batch(), &me, "d1")
            .await
            .unwrap();
        assert_eq!(
            store.spec_digest(batch).await.unwrap().as_deref(),
            Some("d1")
        );
        let running = store.running_batches().await.unwrap();
        assert_eq!(running.len(), 1);
        assert_eq!(running[0].owner.as_ref(), Some(&me));

        // A running batch is not taken over.
        assert_eq!(
            store.claim_for_resume(batch, &me).await.unwrap(),
            Claim::Running(Some(me.clone()))
        );
        // Marking it interrupted needs the owner that was read.
        let other = Owner {
            pid: me.pid + 1,
            ..me.clone()
        };
        assert!(!store
            .interrupt_if_owned(batch, Some(&other), "x")
            .await
            .unwrap());
        assert!(store
            .interrupt_if_owned(batch, Some(&me), "gone")
            .await
            .unwrap());
        let row = store.batch(batch).await.unwrap();
        assert_eq!(row.status, BatchStatus::Interrupted);
        assert_eq!(row.failure.as_deref(), Some("gone"));

        // Of two claims at once, one wins.
        let (a, b) = tokio::join!(
            store.claim_for_resume(batch, &me),
            store.claim_for_resume(batch, &other)
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(
            (a == Claim::Claimed) != (b == Claim::Claimed),
            "{a:?} {b:?}"
        );
        let row = store.batch(batch).await.unwrap();
        assert_eq!(row.status, BatchStatus::Running);
        assert_eq!(row.failure, None);

        // A failed batch may be resumed too, once its cause is fixed.
        store
            .finish_batch(batch, BatchStatus::Failed, Some("disk full"))
            .await
            .unwrap();
        assert_eq!(
            store.claim_for_resume(batch, &me).await.unwrap(),
            Claim::Claimed
        );
        store
            .finish_batch(batch, BatchStatus::Finished, None)
            .await
            .unwrap();
        assert_eq!(
            store.claim_for_resume(batch, &me).await.unwrap(),
            Claim::Finished
        );
        assert!(matches!(
            store.claim_for_resume(99, &me).await,
            Err(StoreError::NoBatch { .. })
        ));
    }

    #[tokio::test]
    async fn resumes_are_numbered_and_remember_where_their_phases_begin() {
        let (_d, store) = store().await;
        let batch = store
            .begin_owned_batch(&new_batch(), &Owner::current(), "d")
            .await
            .unwrap();
        let figures = PhaseFigures {
            phase: Phase::Draw,
            wall_s: 1.0,
            cpu_s: 1.0,
            avg_busy: 1.0,
            peak_busy: 1.0,
        };
        store.record_phase(batch, &figures).await.unwrap();
        let kept = Kept {
            replies: 2,
            extracted: 1,
            probed: 0,
            scored: 0,
            committed: false,
        };
        assert_eq!(store.record_resume(batch, &kept).await.unwrap(), 1);
        store.record_phase(batch, &figures).await.unwrap();
        store.record_phase(batch, &figures).await.unwrap();
        assert_eq!(
            store.record_resume(batch, &Kept::default()).await.unwrap(),
            2
        );
        let resumes = store.resumes(batch).await.unwrap();
        assert_eq!(resumes.len(), 2);
        assert_eq!(
            (
                resumes[0].attempt,
                resumes[0].first_phase,
                resumes[0].replies_kept
            ),
            (1, 1, 2)
        );
        assert_eq!((resumes[1].attempt, resumes[1].first_phase), (2, 3));
    }

    #[tokio::test]
    async fn replies_read_back_as_drawn() {
        let (_d, store) = store().await;
        let batch = store
            .begin_owned_batch(&new_batch(), &Owner::current(), "d")
            .await
            .unwrap();
        let drawn = Drawn {
            idx: 1,
            pool: "replay".into(),
            reply: crate::draw::Reply {
                content: Some("x".into()),
                reasoning: Some("r".into()),
                finish_reason: Some("length".into()),
                prompt_tokens: Some(7),
                completion_tokens: None,
                model: Some("m".into()),
                ttft_ms: Some(1.5),
                latency_ms: Some(9.0),
                ..crate::draw::Reply::default()
            },
        };
        store.record_reply(batch, &drawn).await.unwrap();
        assert_eq!(store.replies(batch).await.unwrap(), vec![drawn]);
    }

    #[tokio::test]
    async fn a_newer_schema_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let store = Store::open(&path).await.unwrap();
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
             VALUES (42, 'future', 1, x'00', 0)",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        store.close().await;
        let err = Store::open(&path).await.unwrap_err();
        assert!(matches!(err, StoreError::TooNew { found: 42, .. }), "{err}");
        assert!(
            err.to_string().contains("schema version 42, newer than"),
            "{err}"
        );
    }

    /// Two processes opening a new database at once both try to migrate it.
    #[tokio::test]
    async fn opening_a_new_database_from_many_connections_at_once_works() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let opens: Vec<_> = (0..6)
            .map(|_| {
                let path = path.clone();
                tokio::spawn(async move { Store::open(&path).await })
            })
            .collect();
        for open in opens {
            open.await.unwrap().unwrap();
        }
        assert_migrated_once(&path).await;
    }

    /// The same race between processes: each child is this test binary
    /// running `open_the_database_named_in_the_environment`.
    #[test]
    fn opening_a_new_database_from_many_processes_at_once_works() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let exe = std::env::current_exe().unwrap();
        let children: Vec<_> = (0..6)
            .map(|_| {
                std::process::Command::new(&exe)
                    .args([
                        "--exact",
                        "store::tests::open_the_database_named_in_the_environment",
                        "--ignored",
                        "--nocapture",
                    ])
                    .env(CHILD_DB, &path)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && stdout.contains("1 passed"),
                "{stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(assert_migrated_once(&path));
    }

    const CHILD_DB: &str = "ASSAY_TEST_OPEN_DB";

    /// A child of `opening_a_new_database_from_many_processes_at_once_works`.
    #[tokio::test]
    #[ignore = "run as a child process by opening_a_new_database_from_many_processes_at_once_works"]
    async fn open_the_database_named_in_the_environment() {
        let path = std::env::var_os(CHILD_DB).expect("run by the many-processes test");
        let store = Store::open(Path::new(&path)).await.unwrap();
        store.close().await;
    }

    /// Every migration is recorded exactly once, as applied.
    async fn assert_migrated_once(path: &Path) {
        let store = Store::open(path).await.unwrap();
        let rows: Vec<(i64, bool)> =
            sqlx::query_as("SELECT version, success FROM _sqlx_migrations ORDER BY version")
                .fetch_all(&store.pool)
                .await
                .unwrap();
        let known: Vec<(i64, bool)> = sqlx::migrate!("./migrations")
            .iter()
            .map(|m| (m.version, true))
            .collect();
        assert_eq!(rows, known);
        store.close().await;
    }

    #[tokio::test]
    async fn draw_figures_and_attempts_round_trip() {
        use crate::draw::{Attempt, ErrorText, Outcome};
        let (_d, store) = store().await;
        let batch = store
            .begin_batch(&NewBatch {
                task: "demo",
                spec_path: Path::new("s.toml"),
                pool: "fast",
                n: 2,
            })
            .await
            .unwrap();
        let attempt = |number, outcome, delay_ms| Attempt {
            number,
            started_ms: 1.0,
            duration_ms: 2.0,
            outcome,
            error: (outcome != Outcome::Ok).then(|| ErrorText {
                message: "slow down".into(),
                body: Some("{\"message\":\"slow down\"}".into()),
            }),
            retry_after_ms: (outcome != Outcome::Ok).then_some(1000.0),
            delay_ms,
        };
        let ok = Drawn {
            idx: 0,
            pool: "fast".into(),
            reply: Reply {
                content: Some("x".into()),
                reasoning: Some("hm".into()),
                completion_tokens: Some(12),
                ttft_ms: Some(5.0),
                ttft_reasoning_ms: Some(2.0),
                latency_ms: Some(9.0),
                chunks: Some(4),
                hit_cap: true,
                attempts: vec![
                    attempt(1, Outcome::HttpError { status: 429 }, Some(1000.0)),
                    attempt(2, Outcome::Ok, None),
                ],
                ..Reply::default()
            },
        };
        let failed = Drawn {
            idx: 1,
            pool: "fast".into(),
            reply: Reply {
                outcome: Outcome::HttpError { status: 500 },
                error: Some(ErrorText {
                    message: "boom".into(),
                    body: Some("boom".into()),
                }),
                ..Reply::default()
            },
        };
        store.record_draw(batch, &ok).await.unwrap();
        store.record_draw(batch, &failed).await.unwrap();
        store
            .record_cancelled(batch, "fast", &[attempt(1, Outcome::Cancelled, None)])
            .await
            .unwrap();
        let back = store.draw_replies(batch).await.unwrap();
        assert_eq!(back, vec![ok.clone(), failed]);
        let attempts = store.draw_attempts(batch).await.unwrap();
        assert_eq!(attempts.len(), 3);
        assert_eq!(attempts[2].0, None, "a cancelled request is no reply");
        // The old reader still sees both replies, unknown tokens unknown.
        let want = vec![(0, ok.reply.completion_tokens), (1, None)];
        let old: Vec<(usize, Option<u64>)> = store
            .replies(batch)
            .await
            .unwrap()
            .iter()
            .map(|d| (d.idx, d.reply.completion_tokens))
            .collect();
        assert_eq!(old, want);
        // Replies are not candidates: the candidate reader lists none.
        let cands = store.candidates(batch).await;
        assert!(cands.unwrap().is_empty(), "no candidates were recorded");
    }

    #[tokio::test]
    async fn a_missing_directory_is_named() {
        let err = Store::open(Path::new("/nonexistent-dir/x.db"))
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent-dir does not exist"),
            "{err}"
        );
    }
}
