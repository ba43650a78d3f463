//! The store's side of suites (migration 0008): a suite row, one batch per
//! problem (its completions the batch's replies, its programs the batch's
//! candidates) and one outcome row per completion (the suite's phases are
//! in `phases`).
//!
//! A suite's input (problems, completions, programs and their dedup
//! groups) is written in one transaction, so bad input or a kill before it
//! commits leaves nothing; outcomes are written one program at a time (the
//! representative and its duplicates in one transaction) as they finish.
//! A suite's status is its batches': each batch has the owner that runs
//! it, so a dead owner marks them interrupted like any batch.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use strum::{Display, EnumString, IntoStaticStr};

use super::draws::{ReplyRecord, REPLY_COLUMNS};
use super::{millis, BatchId, BatchStatus, Store, StoreError};
use crate::build::probe::ProbeVerdict;
use crate::draw::Drawn;
use crate::spec::Edition;
use crate::suite::{CompletionOutcome, Problem, ProgramMode};
use crate::support::owner::Owner;
use crate::text::extract::{Extraction, NoCode};

pub type SuiteId = i64;

/// Where a suite's completions came from, stored as its snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Display, EnumString, IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum SuiteOrigin {
    /// Read from a file or a MultiPL-E output directory.
    Completions,
    /// Drawn live from model pools.
    Pool,
}

/// A suite about to start.
#[derive(Debug, Clone)]
pub struct NewSuite<'a> {
    pub problems_path: &'a Path,
    pub problems_digest: &'a str,
    pub origin: SuiteOrigin,
    /// The completions' path, or the draw plan's label.
    pub source: &'a str,
    pub mode: ProgramMode,
    /// The edition its programs are built in.
    pub edition: Edition,
    pub problems: &'a [NewProblem<'a>],
}

/// One problem of a new suite, with the completions known at its start
/// (all of them when read from a file, none for a live draw).
#[derive(Debug, Clone)]
pub struct NewProblem<'a> {
    pub problem: &'a Problem,
    /// Completions the problem's batch will hold.
    pub n: usize,
    pub completions: Vec<NewCompletion<'a>>,
}

/// One completion: the reply it came in, the program made of it (or why
/// none could be), its fingerprint and its representative within the
/// problem.
#[derive(Debug, Clone)]
pub struct NewCompletion<'a> {
    pub drawn: &'a Drawn,
    pub extraction: &'a Extraction,
    pub fingerprint: Option<String>,
    pub dup_of: Option<usize>,
}

/// A stored suite.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SuiteRow {
    pub id: SuiteId,
    pub problems_path: String,
    pub problems_digest: String,
    pub origin: SuiteOrigin,
    pub source: String,
    pub mode: ProgramMode,
    /// The edition its programs are built in (2021 for a suite stored
    /// before editions were).
    pub edition: Edition,
    pub problems: usize,
    /// From its batches: running while one runs, else failed or
    /// interrupted if one is, else finished.
    pub status: BatchStatus,
    /// The first failure among its batches.
    pub failure: Option<String>,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub sandbox: Option<String>,
    pub sandbox_warnings: Option<String>,
}

/// One problem of a stored suite.
#[derive(Debug, Clone)]
pub struct SuiteProblemRow {
    pub batch_id: BatchId,
    pub pos: usize,
    pub problem: Problem,
    pub n: usize,
    pub status: BatchStatus,
}

/// One completion of a stored suite, with what became of it.
#[derive(Debug, Clone)]
pub struct SuiteCompletionRow {
    pub batch_id: BatchId,
    pub idx: usize,
    pub drawn: Drawn,
    /// The program, or why no program could be made (a chat reply without
    /// code). `None` before the completion was stored as a candidate.
    pub extraction: Option<Extraction>,
    pub dup_of: Option<usize>,
    pub outcome: Option<SuiteOutcomeRow>,
    /// 0 for the first draw, r for the r-th repair round (issue 28).
    pub round: u32,
    /// The completion (same problem) whose repair this one is.
    pub parent: Option<usize>,
}

impl SuiteCompletionRow {
    /// The server failed its request: no completion of the model's. Suites
    /// stored before this rule gave it `SyntaxError`; that status is not read.
    pub fn server_failed(&self) -> bool {
        self.extraction == Some(Extraction::Failed(NoCode::DrawFailed))
    }
}

/// What a program came to.
#[derive(Debug, Clone, PartialEq)]
pub struct SuiteOutcomeRow {
    /// `None` when nothing was built: the completion gave no program (a
    /// failed request, a chat reply without code).
    pub probe: Option<ProbeVerdict>,
    pub error_file: Option<String>,
    /// What rustc said of a program that did not build.
    pub diagnostics: Option<String>,
    pub outcome: CompletionOutcome,
    pub run_wall: Duration,
    pub run_cpu: Duration,
    /// What each failed case's run said when it panicked, by case (`None`
    /// for a case that passed or said nothing); empty when nothing ran.
    pub messages: Vec<Option<String>>,
}

impl SuiteOrigin {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

record! {
    /// A row of `suites`, with its batches' statuses and first failure
    /// (`SUITE_SELECT`).
    struct SuiteRecord {
        id: i64,
        problems_path: String,
        problems_digest: String,
        origin: String,
        source: String,
        mode: String,
        edition: String,
        problems: i64,
        started_at: String,
        finished_at: Option<String>,
        sandbox: Option<String>,
        sandbox_warnings: Option<String>,
        statuses: Option<String>,
        failure: Option<String>,
    }
}

record! {
    /// A row of `suite_problems`, with its batch's size and status.
    struct SuiteProblemRecord {
        batch_id: i64,
        pos: i64,
        name: String,
        prompt: String,
        tests: String,
        stop_tokens: String,
        n: i64,
        status: String,
    }
}

record! {
    /// A completion: its reply, its program's row of `candidates` and its row
    /// of `suite_outcomes` (the outcome selected as `program_outcome`, the
    /// reply's own being `outcome`), each NULL until stored.
    struct SuiteCompletionRecord {
        batch_id: i64,
        #[flatten]
        reply: ReplyRecord,
        extract: Option<String>,
        extract_detail: Option<String>,
        source: Option<String>,
        dup_of: Option<i64>,
        probe: Option<String>,
        error_file: Option<String>,
        diagnostics: Option<String>,
        program_outcome: Option<String>,
        whole: Option<String>,
        cases: Option<String>,
        refused: Option<String>,
        run_wall_ms: Option<f64>,
        run_cpu_ms: Option<f64>,
        messages: Option<String>,
        round: i64,
        parent: Option<i64>,
    }
}

const SUITE_SELECT: &str = "SELECT s.id, s.problems_path, s.problems_digest, s.origin, s.source,
        s.mode, s.edition, s.problems, s.started_at, s.finished_at, s.sandbox, s.sandbox_warnings,
        (SELECT string_agg(b.status, ',') FROM batches b JOIN suite_problems p ON p.batch_id = b.id
          WHERE p.suite_id = s.id) AS statuses,
        (SELECT b.failure FROM batches b JOIN suite_problems p ON p.batch_id = b.id
          WHERE p.suite_id = s.id AND b.failure IS NOT NULL ORDER BY p.pos LIMIT 1) AS failure
     FROM suites s";

impl Store {
    /// Creates a suite, one owned batch per problem, and the completions
    /// and programs known now, in one transaction. Returns the suite and its
    /// batches, in the problems' order.
    pub async fn begin_suite(
        &self,
        suite: &NewSuite<'_>,
        owner: &Owner,
    ) -> Result<(SuiteId, Vec<BatchId>), StoreError> {
        let path = std::path::absolute(suite.problems_path)
            .unwrap_or_else(|_| suite.problems_path.to_path_buf())
            .display()
            .to_string();
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        let id: SuiteId = sqlx::query_scalar(
            "INSERT INTO suites (problems_path, problems_digest, origin, source, mode, edition,
                                 problems, started_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             RETURNING id",
        )
        .bind(&path)
        .bind(suite.problems_digest)
        .bind(suite.origin.as_str())
        .bind(suite.source)
        .bind(suite.mode.as_str())
        .bind(suite.edition.as_str())
        .bind(suite.problems.len() as i64)
        .bind(crate::support::clock::utc_now())
        .fetch_one(&mut *tx)
        .await
        .map_err(self.sql())?;
        let pool_label = match suite.origin {
            SuiteOrigin::Completions => "completions",
            SuiteOrigin::Pool => suite.source,
        };
        let mut batches = Vec::with_capacity(suite.problems.len());
        for (pos, p) in suite.problems.iter().enumerate() {
            let batch: BatchId = sqlx::query_scalar(
                "INSERT INTO batches (task, spec_path, pool, n, status, started_at, dedup_by,
                                      owner_host, owner_boot, owner_pid, owner_start, spec_digest)
                 VALUES ($1, $2, $3, $4, 'running', $10, 'exact',
                         $5, $6, $7, $8, $9)
                 RETURNING id",
            )
            .bind(&p.problem.name)
            .bind(&path)
            .bind(pool_label)
            .bind(p.n as i64)
            .bind(&owner.host)
            .bind(&owner.boot)
            .bind(owner.pid as i64)
            .bind(owner.start as i64)
            .bind(suite.problems_digest)
            .bind(crate::support::clock::utc_now())
            .fetch_one(&mut *tx)
            .await
            .map_err(self.sql())?;
            sqlx::query(
                "INSERT INTO suite_problems (batch_id, suite_id, pos, name, prompt, tests, stop_tokens)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(batch)
            .bind(id)
            .bind(pos as i64)
            .bind(&p.problem.name)
            .bind(&p.problem.prompt)
            .bind(&p.problem.tests)
            .bind(serde_json::to_string(&p.problem.stop_tokens).expect("strings serialize"))
            .execute(&mut *tx)
            .await
            .map_err(self.sql())?;
            for c in &p.completions {
                self.insert_completion(&mut tx, batch, c).await?;
            }
            batches.push(batch);
        }
        tx.commit().await.map_err(self.sql())?;
        Ok((id, batches))
    }

    /// Stores completions of one problem that arrived during a live draw,
    /// in one transaction.
    pub async fn record_suite_completions(
        &self,
        batch: BatchId,
        completions: &[NewCompletion<'_>],
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        for c in completions {
            self.insert_completion(&mut tx, batch, c).await?;
        }
        tx.commit().await.map_err(self.sql())
    }

    pub(super) async fn insert_completion(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        batch: BatchId,
        c: &NewCompletion<'_>,
    ) -> Result<(), StoreError> {
        self.insert_draw(tx, batch, c.drawn).await?;
        let (source, detail) = match c.extraction {
            Extraction::Source(src) => (Some(src.as_str()), None),
            Extraction::Failed(why) => (None, why.detail()),
        };
        sqlx::query(
            "INSERT INTO candidates (batch_id, idx, extract, extract_detail, source, fingerprint,
                                     dup_of, exact_dup_of)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(batch)
        .bind(c.drawn.idx as i64)
        .bind(c.extraction.kind())
        .bind(detail)
        .bind(source)
        .bind(c.fingerprint.as_deref())
        .bind(c.dup_of.map(|d| d as i64))
        .bind(c.dup_of.map(|d| d as i64))
        .execute(&mut **tx)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    /// Records the sandbox that confines the suite's runs.
    pub async fn set_suite_sandbox(
        &self,
        suite: SuiteId,
        sandbox: &str,
        warnings: &[String],
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE suites SET sandbox = $1, sandbox_warnings = $2 WHERE id = $3")
            .bind(sandbox)
            .bind((!warnings.is_empty()).then(|| warnings.join("\n")))
            .bind(suite)
            .execute(&self.pool)
            .await
            .map_err(self.sql())?;
        Ok(())
    }

    /// Stores what a program came to for every completion that shares it
    /// (`idxs`: the representative and its duplicates), in one transaction.
    pub async fn record_suite_outcome(
        &self,
        batch: BatchId,
        idxs: &[usize],
        row: &SuiteOutcomeRow,
    ) -> Result<(), StoreError> {
        let reading = match &row.outcome {
            CompletionOutcome::Refused { reading, .. } => reading.as_ref(),
            outcome => outcome,
        };
        let (whole, cases) = match reading {
            CompletionOutcome::Ran { whole, cases } => (
                Some(whole.to_string()),
                Some(
                    cases
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                ),
            ),
            _ => (None, None),
        };
        let messages = (!row.messages.is_empty())
            .then(|| serde_json::to_string(&row.messages).expect("plain data serialises"));
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        for idx in idxs {
            sqlx::query(
                "INSERT INTO suite_outcomes (batch_id, idx, probe, error_file, outcome, whole,
                                             cases, status, multiple_status, run_wall_ms,
                                             run_cpu_ms, refused, messages, diagnostics)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
            )
            .bind(batch)
            .bind(*idx as i64)
            .bind(row.probe.as_ref().map(ToString::to_string))
            .bind(row.error_file.as_deref())
            .bind(row.outcome.kind())
            .bind(whole.as_deref())
            .bind(cases.as_deref())
            .bind(row.outcome.status().as_str())
            .bind(row.outcome.multiple_status().as_str())
            .bind(row.run_wall.as_secs_f64() * 1e3)
            .bind(row.run_cpu.as_secs_f64() * 1e3)
            .bind(row.outcome.refused().map(|r| r.as_str()))
            .bind(messages.as_deref())
            .bind(row.diagnostics.as_deref())
            .execute(&mut *tx)
            .await
            .map_err(self.sql())?;
        }
        tx.commit().await.map_err(self.sql())
    }

    /// Ends the suite's batches that `owner` runs with `status` (and
    /// `failure`); other processes' batches (lanes running other parts)
    /// are theirs to end. The suite gets its end time once none is left
    /// unfinished.
    pub async fn finish_suite(
        &self,
        suite: SuiteId,
        owner: &Owner,
        status: BatchStatus,
        failure: Option<&str>,
    ) -> Result<(), StoreError> {
        let now = crate::support::clock::utc_now();
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        sqlx::query(
            "UPDATE batches SET status = $1, failure = $2, finished_at = $4
             WHERE status = 'running' AND owner_pid = $5 AND owner_start = $6 AND owner_boot = $7
               AND id IN (SELECT batch_id FROM suite_problems WHERE suite_id = $3)",
        )
        .bind(status.as_str())
        .bind(failure)
        .bind(suite)
        .bind(&now)
        .bind(owner.pid as i64)
        .bind(owner.start as i64)
        .bind(&owner.boot)
        .execute(&mut *tx)
        .await
        .map_err(self.sql())?;
        sqlx::query(
            "UPDATE suites SET finished_at = $2 WHERE id = $1 AND finished_at IS NULL
               AND NOT EXISTS (SELECT 1 FROM batches b JOIN suite_problems p ON p.batch_id = b.id
                                WHERE p.suite_id = $1 AND b.status <> 'finished')",
        )
        .bind(suite)
        .bind(&now)
        .execute(&mut *tx)
        .await
        .map_err(self.sql())?;
        tx.commit().await.map_err(self.sql())
    }

    /// The suite a batch belongs to and its problem's name, if the batch
    /// is a suite's problem: the batch commands refuse those.
    pub async fn suite_of_batch(
        &self,
        batch: BatchId,
    ) -> Result<Option<(SuiteId, String)>, StoreError> {
        let row = sqlx::query("SELECT suite_id, name FROM suite_problems WHERE batch_id = $1")
            .bind(batch)
            .fetch_optional(&self.pool)
            .await
            .map_err(self.sql())?;
        Ok(row.map(|r| (sqlx::Row::get(&r, "suite_id"), sqlx::Row::get(&r, "name"))))
    }

    pub async fn suites(&self) -> Result<Vec<SuiteRow>, StoreError> {
        let rows: Vec<SuiteRecord> = sqlx::query_as(&format!("{SUITE_SELECT} ORDER BY s.id"))
            .fetch_all(&self.pool)
            .await
            .map_err(self.sql())?;
        rows.into_iter().map(|r| r.suite(self)).collect()
    }

    pub async fn suite(&self, id: SuiteId) -> Result<SuiteRow, StoreError> {
        let row: SuiteRecord = sqlx::query_as(&format!("{SUITE_SELECT} WHERE s.id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(self.sql())?
            .ok_or_else(|| self.no_suite(id))?;
        row.suite(self)
    }

    /// The suite's problems in their file's order.
    pub async fn suite_problems(&self, suite: SuiteId) -> Result<Vec<SuiteProblemRow>, StoreError> {
        let rows: Vec<SuiteProblemRecord> = sqlx::query_as(
            "SELECT p.batch_id, p.pos, p.name, p.prompt, p.tests, p.stop_tokens, b.n, b.status
             FROM suite_problems p JOIN batches b ON b.id = p.batch_id
             WHERE p.suite_id = $1 ORDER BY p.pos",
        )
        .bind(suite)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        rows.into_iter()
            .map(|r| {
                let batch = r.batch_id;
                Ok(SuiteProblemRow {
                    batch_id: batch,
                    pos: r.pos as usize,
                    problem: Problem {
                        name: r.name,
                        prompt: r.prompt,
                        tests: r.tests,
                        stop_tokens: serde_json::from_str(&r.stop_tokens)
                            .map_err(|_| self.bad(batch, -1, "stop tokens", &r.stop_tokens))?,
                    },
                    n: r.n as usize,
                    status: self.parse(batch, -1, "status", &r.status)?,
                })
            })
            .collect()
    }

    /// Every completion of the suite, by problem order then index, with its
    /// program and outcome where stored. Draw attempts are not read (no
    /// suite report needs them).
    pub async fn suite_completions(
        &self,
        suite: SuiteId,
    ) -> Result<Vec<SuiteCompletionRow>, StoreError> {
        let rows: Vec<SuiteCompletionRecord> = sqlx::query_as(&format!(
            "SELECT r.batch_id, {REPLY_COLUMNS},
                    c.extract, c.extract_detail, c.source, c.dup_of,
                    o.probe, o.error_file, o.diagnostics, o.outcome AS program_outcome, o.whole, o.cases,
                    o.refused, o.run_wall_ms, o.run_cpu_ms, o.messages, r.round, r.parent
             FROM suite_problems p
             JOIN replies r ON r.batch_id = p.batch_id
             LEFT JOIN candidates c ON c.batch_id = r.batch_id AND c.idx = r.idx
             LEFT JOIN suite_outcomes o ON o.batch_id = r.batch_id AND o.idx = r.idx
             WHERE p.suite_id = $1
             ORDER BY p.pos, r.idx"
        ))
        .bind(suite)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        rows.into_iter().map(|r| r.completion(self)).collect()
    }
}

impl SuiteRecord {
    fn suite(self, store: &Store) -> Result<SuiteRow, StoreError> {
        let id = self.id;
        let mut status = BatchStatus::Finished;
        for s in self
            .statuses
            .as_deref()
            .unwrap_or("")
            .split(',')
            .filter(|s| !s.is_empty())
        {
            let s: BatchStatus = store.parse(id, -1, "suite batch status", s)?;
            // Running outranks failed, which outranks interrupted.
            let rank = |s: BatchStatus| match s {
                BatchStatus::Finished => 0,
                BatchStatus::Interrupted => 1,
                BatchStatus::Failed => 2,
                BatchStatus::Running => 3,
            };
            if rank(s) > rank(status) {
                status = s;
            }
        }
        Ok(SuiteRow {
            id,
            problems_path: self.problems_path,
            problems_digest: self.problems_digest,
            origin: self
                .origin
                .parse()
                .map_err(|_| store.bad(id, -1, "suite origin", &self.origin))?,
            source: self.source,
            mode: store.parse(id, -1, "suite mode", &self.mode)?,
            edition: store.parse(id, -1, "suite edition", &self.edition)?,
            problems: self.problems as usize,
            status,
            failure: self.failure,
            started_at: self.started_at,
            finished_at: self.finished_at,
            sandbox: self.sandbox,
            sandbox_warnings: self.sandbox_warnings,
        })
    }
}

impl SuiteCompletionRecord {
    fn completion(self, store: &Store) -> Result<SuiteCompletionRow, StoreError> {
        let (batch, idx) = (self.batch_id, self.reply.idx);
        let drawn = self.reply.drawn(store, batch, Vec::new())?;
        let extraction = self
            .extract
            .map(|kind| {
                store.extraction(
                    batch,
                    idx,
                    kind,
                    self.source,
                    self.extract_detail.as_deref(),
                )
            })
            .transpose()?;
        let outcome = match self.program_outcome {
            None => None,
            Some(kind) => Some(SuiteOutcomeRow {
                probe: store.parse_stored(batch, idx, "probe verdict", self.probe)?,
                error_file: self.error_file,
                diagnostics: self.diagnostics,
                outcome: CompletionOutcome::from_stored(
                    &kind,
                    self.whole.as_deref(),
                    self.cases.as_deref(),
                    self.refused.as_deref(),
                )
                .map_err(|_| store.bad(batch, idx, "suite outcome", &kind))?,
                run_wall: millis(self.run_wall_ms),
                run_cpu: millis(self.run_cpu_ms),
                messages: match self.messages.as_deref() {
                    None => Vec::new(),
                    Some(json) => serde_json::from_str(json)
                        .map_err(|_| store.bad(batch, idx, "suite messages", json))?,
                },
            }),
        };
        Ok(SuiteCompletionRow {
            batch_id: batch,
            idx: idx as usize,
            drawn,
            extraction,
            dup_of: self.dup_of.map(|d| d as usize),
            outcome,
            round: self.round as u32,
            parent: self.parent.map(|p| p as usize),
        })
    }
}
