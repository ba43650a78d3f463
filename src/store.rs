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
use crate::probe::Probed;
use crate::score::Scored;

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
}

/// One stored probe verdict.
#[derive(Debug, Clone)]
pub struct ProbeVerdictRow {
    pub idx: usize,
    pub verdict: crate::probe::ProbeVerdict,
    pub warnings: usize,
    pub diagnostics: String,
}

/// A stored probe run. `None` figures predate migration 0003.
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
    pub compiled: usize,
    pub probed: usize,
}

impl Store {
    /// Opens (creating if missing) the database and brings its schema up to date.
    pub async fn open(path: &Path) -> Result<Store, StoreError> {
        let open_err = |message: String| StoreError::Open {
            path: path.to_path_buf(),
            message,
        };
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
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .map_err(|e| open_err(format!("cannot open the database: {e}")))?;
        sqlx::migrate!("./migrations")
            .run(&pool)
            .await
            .map_err(|source| StoreError::Migrate {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(Store {
            pool,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sql(&self) -> impl Fn(sqlx::Error) -> StoreError + '_ {
        move |source| StoreError::Sql {
            path: self.path.clone(),
            source,
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
                    waves = ?, deps_fresh = ?, deps_rebuilt = ?, origin = ?, work_dir = ?
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
        let rows = sqlx::query(&format!("{BATCH_SELECT} ORDER BY id"))
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
                stderr: String::new(),
            }),
            None => None,
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
        })
    }

    /// Every candidate of a batch with its verdicts, from the batch's own
    /// (first) probe run.
    pub async fn candidates(&self, batch: BatchId) -> Result<Vec<CandidateRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT c.idx, r.pool, r.model, r.completion_tokens, c.extract, c.extract_detail, c.source,
                    c.fingerprint, c.dup_of, pv.verdict AS probe, pv.error_file,
                    s.verdict AS score, s.passed, s.total, s.wall_ms, s.admitted
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

    fn bad(&self, batch: BatchId, idx: i64, field: &'static str, value: &str) -> StoreError {
        StoreError::BadValue {
            path: self.path.clone(),
            batch,
            idx,
            field,
            value: value.to_owned(),
        }
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

const BATCH_SELECT: &str =
    "SELECT id, task, spec_path, pool, n, status, started_at, finished_at, errors_dir,
        committed_verdict, committed_passed, committed_total, failure FROM batches";

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
            stderr: String::new(),
        };
        store.record_committed(batch, &committed).await.unwrap();
        store
            .finish_batch(batch, BatchStatus::Finished, None)
            .await
            .unwrap();

        let row = store.batch(batch).await.unwrap();
        assert_eq!(row.status, BatchStatus::Finished);
        assert_eq!(row.committed.unwrap().verdict, committed.verdict);
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
