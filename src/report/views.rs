//! Views: the operator's reports of stored batches (`compare`, `export`,
//! the draw figures of `show`), read through the store and built by the pure
//! modules `compare`, `export` and `plot`. No SQL here, and nothing written.
//! A suite's problems are batches in the store but not batches to these
//! views: `refuse_suite_batch` turns them away, naming the suite.

use anyhow::Result;

use crate::report::batch::Summary;
use crate::report::compare::{BatchRows, Comparison, PoolFigures};
use crate::report::export::{self, Export, Format};
use crate::report::ladder::{Ladder, LevelFigures, RoundReply};
use crate::report::plot::PoolSamples;
use crate::score::ScoreVerdict;
use crate::store::{BatchId, Db, Store, SuiteId};
use crate::support::account::Phase;
use crate::support::hint::{CommandLine, Reach};

/// A batch command (`show`, `compare`, `export`, `replay`, `promote`,
/// `run --resume`) named a batch that is one of a suite's problems. Its
/// outcomes are the suite's (`suite_outcomes`), not a batch's probe
/// verdicts and scores, so every figure a batch view showed would be wrong.
#[derive(Debug, thiserror::Error)]
#[error("{db}: batch {batch} is problem `{problem}` of suite {suite}, not a batch of its own: `{show}` shows it")]
pub struct SuiteBatch {
    pub db: Db,
    pub batch: BatchId,
    pub suite: SuiteId,
    pub problem: String,
    /// `assay suite show SUITE` with the flags that reach the same store.
    pub show: CommandLine,
}

/// Refuses a batch that belongs to a suite ([`SuiteBatch`]); every batch
/// command asks this before it reads or writes anything of the batch.
pub async fn refuse_suite_batch(store: &Store, batch: BatchId, reach: &Reach) -> Result<()> {
    match store.suite_of_batch(batch).await? {
        None => Ok(()),
        Some((suite, problem)) => Err(SuiteBatch {
            db: store.db().clone(),
            batch,
            suite,
            problem,
            show: CommandLine::assay(["suite", "show", &suite.to_string()]).reaching(reach),
        }
        .into()),
    }
}

/// A batch's figures and the samples its charts are drawn from.
pub async fn pool_figures(store: &Store, batch: BatchId) -> Result<(PoolFigures, PoolSamples)> {
    let row = store.batch(batch).await?;
    let replies = store.draw_replies(batch).await?;
    let candidates = store.candidates(batch).await?;
    let phases = store.phases(batch).await?;
    let batch_wall_s = store.batch_wall_s(batch).await?;
    let figures = PoolFigures::new(BatchRows {
        batch: &row,
        replies: &replies,
        candidates: &candidates,
        phases: &phases,
        batch_wall_s,
    });
    let samples = PoolSamples {
        label: figures.label(),
        latencies_ms: replies
            .iter()
            .filter(|d| d.reply.outcome.is_ok())
            .filter_map(|d| d.reply.latency_ms)
            .collect(),
        scores: candidates
            .iter()
            .filter_map(|c| c.score.as_ref())
            .filter(|s| matches!(s.verdict, ScoreVerdict::Scored { .. }) && s.total > 0)
            .map(|s| s.passed as f64 / s.total as f64)
            .collect(),
    };
    Ok((figures, samples))
}

/// Stored batches side by side, with the samples for the chart.
pub async fn comparison(
    store: &Store,
    batches: &[BatchId],
) -> Result<(Comparison, Vec<PoolSamples>)> {
    let mut pools = Vec::with_capacity(batches.len());
    let mut samples = Vec::with_capacity(batches.len());
    for &batch in batches {
        let (f, s) = pool_figures(store, batch).await?;
        pools.push(f);
        samples.push(s);
    }
    Ok((Comparison { pools }, samples))
}

/// Stored batches weighed at equal output tokens (a repair run against a
/// resampling run): each batch's best score so far against the output
/// tokens its replies had spent, in reply order, with the table `compare`
/// prints.
pub async fn budget(
    store: &Store,
    batches: &[BatchId],
) -> Result<(crate::repair::BudgetTable, Vec<crate::repair::RunCurve>)> {
    let mut runs = Vec::with_capacity(batches.len());
    for &batch in batches {
        let candidates = store.candidates(batch).await?;
        let by_idx: std::collections::HashMap<usize, &crate::store::CandidateRow> =
            candidates.iter().map(|c| (c.idx, c)).collect();
        // A duplicate scores as its representative did.
        let figure = |idx: usize| -> Option<f64> {
            let c = by_idx.get(&idx)?;
            let scored = match c.dup_of {
                Some(rep) => by_idx.get(&rep)?.score.as_ref(),
                None => c.score.as_ref(),
            }?;
            (scored.total > 0).then(|| scored.passed as f64 / scored.total as f64)
        };
        let replies = store.draw_replies(batch).await?;
        let curve = crate::repair::Curve::of_replies(
            replies
                .iter()
                .map(|d| (d.reply.completion_tokens, figure(d.idx))),
            None,
        );
        let rounds = store.repair_rounds(batch).await?;
        let repair_rounds = rounds.iter().filter(|r| r.round > 0).count();
        let kind = if repair_rounds > 0 {
            let s = if repair_rounds == 1 { "" } else { "s" };
            format!("repair, {repair_rounds} round{s}")
        } else {
            "resample".to_owned()
        };
        runs.push(crate::repair::RunCurve {
            label: format!("batch {batch}"),
            kind,
            curve,
        });
    }
    Ok((crate::repair::BudgetTable::new("best score", &runs), runs))
}

/// The batch summary, as every command shows it (`run`, `show`, `export`,
/// their JSON): its rows, resumes, own probe run and promotions.
pub async fn summary(store: &Store, batch: BatchId) -> Result<Summary> {
    let row = store.batch(batch).await?;
    let candidates = store.candidates(batch).await?;
    let phases = store.phases(batch).await?;
    let mut summary = Summary::new(&row, &candidates, phases);
    summary.resumes = store.resumes(batch).await?;
    summary.probe_run = store
        .probe_runs(batch)
        .await?
        .into_iter()
        .find(|r| r.origin == "batch");
    summary.promotions = store
        .promotions(batch)
        .await?
        .iter()
        .map(crate::report::batch::Promotion::new)
        .collect();
    summary.rounds = round_figures(store, batch, &candidates).await?;
    if !summary.rounds.is_empty() {
        let lineage = store.lineage(batch).await?;
        summary.probe_rounds =
            crate::report::batch::probe_rounds(&summary.rounds, &lineage, &candidates);
    }
    Ok(summary)
}

/// Each repair round's figures (none for a batch of one round).
async fn round_figures(
    store: &Store,
    batch: BatchId,
    candidates: &[crate::store::CandidateRow],
) -> Result<Vec<crate::repair::RoundFigures>> {
    let rounds = store.repair_rounds(batch).await?;
    if rounds.is_empty() {
        return Ok(Vec::new());
    }
    let lineage = store.lineage(batch).await?;
    let prompt_tokens = store
        .draw_replies(batch)
        .await?
        .into_iter()
        .map(|d| (d.idx, d.reply.prompt_tokens))
        .collect();
    Ok(crate::repair::RoundFigures::of_batch(
        &rounds,
        &lineage,
        candidates,
        &prompt_tokens,
    ))
}

/// `show --json`: the summary, the draw figures and every candidate.
pub async fn batch_json(store: &Store, batch: BatchId) -> Result<serde_json::Value> {
    let summary = summary(store, batch).await?;
    let lines: Vec<crate::report::batch::CandidateLine> = store
        .candidates(batch)
        .await?
        .iter()
        .map(crate::report::batch::CandidateLine::new)
        .collect();
    let (figures, _) = pool_figures(store, batch).await?;
    let mut value = serde_json::to_value(&summary)?;
    value["figures"] = serde_json::to_value(&figures)?;
    value["candidates"] = serde_json::to_value(&lines)?;
    Ok(value)
}

/// `show`'s text: the summary, the draw figures' line and every
/// candidate's verdicts.
pub async fn batch_text(store: &Store, batch: BatchId) -> Result<String> {
    let summary = summary(store, batch).await?;
    let lines: Vec<crate::report::batch::CandidateLine> = store
        .candidates(batch)
        .await?
        .iter()
        .map(crate::report::batch::CandidateLine::new)
        .collect();
    let (figures, _) = pool_figures(store, batch).await?;
    Ok(format!(
        "{}{}\n{}",
        summary.render(),
        figures.draw_line(),
        crate::report::batch::candidate_table(&lines)
    ))
}

/// `batches --json`: one object per stored batch.
pub fn batches_json(batches: &[crate::store::BatchRow]) -> serde_json::Value {
    batches
        .iter()
        .map(|b| {
            serde_json::json!({
                "batch_id": b.id, "task": b.task, "pool": b.pool, "n": b.n,
                "status": b.status.as_str(), "started_at": b.started_at,
                "finished_at": b.finished_at, "failure": b.failure,
                "lane": b.lane, "lease_lapsed": b.lease_lapsed,
            })
        })
        .collect()
}

/// A whole batch in one of the export formats.
pub async fn export(store: &Store, batch: BatchId, format: Format) -> Result<String> {
    let replies = store.draw_replies(batch).await?;
    let candidates = store.candidates(batch).await?;
    // Rounds and parents only for a batch that repairs, as `suite export`.
    let lineage = match store.repair_settings(batch).await? {
        Some(_) => Some(store.lineage(batch).await?),
        None => None,
    };
    let rows = export::rows(&replies, &candidates, lineage.as_deref());
    match format {
        Format::Csv => export::csv(&rows),
        Format::Json => {
            let export = Export {
                summary: summary(store, batch).await?,
                figures: pool_figures(store, batch).await?.0,
                rows,
            };
            Ok(serde_json::to_string_pretty(&export)? + "\n")
        }
    }
}

/// A ladder from its stored batches, one per level.
pub async fn ladder(
    store: &Store,
    task: &str,
    pool: &str,
    levels: &[(usize, BatchId)],
) -> Result<Ladder> {
    let mut figures = Vec::with_capacity(levels.len());
    for &(level, batch) in levels {
        let replies = store.draw_replies(batch).await?;
        let draw_wall_s = store
            .phases(batch)
            .await?
            .iter()
            .filter(|p| p.phase == Phase::Draw)
            .map(|p| p.wall_s)
            .sum();
        let round: Vec<RoundReply> = replies
            .iter()
            .map(|d| RoundReply {
                ok: d.reply.outcome.is_ok(),
                completion_tokens: d.reply.completion_tokens,
                ttft_ms: d.reply.ttft_ms,
                latency_ms: d.reply.latency_ms,
                hit_cap: d.reply.hit_cap,
            })
            .collect();
        figures.push(LevelFigures {
            batch_id: Some(batch),
            ..LevelFigures::new(level, draw_wall_s, &round)
        });
    }
    Ok(Ladder::new(task, pool, figures))
}

/// A stored suite as `suite run` and `suite show` print it.
pub async fn suite_summary(
    store: &Store,
    suite: crate::store::SuiteId,
) -> Result<crate::report::suite::SuiteSummary> {
    let row = store.suite(suite).await?;
    let problems = store.suite_problems(suite).await?;
    let completions = store.suite_completions(suite).await?;
    let phases = store.suite_phases(suite).await?;
    let mut summary =
        crate::report::suite::SuiteSummary::new(&row, &problems, &completions, phases);
    summary.lanes = store.suite_lanes(suite).await?;
    summary.reach = store.db().reach();
    if let Some(settings) = store
        .suite_repair(suite)
        .await?
        .and_then(|json| crate::repair::RepairSettings::from_json(&json))
    {
        let rounds = store.suite_rounds(suite).await?;
        summary.rounds = Some(crate::repair::SuiteRounds::new(
            &settings,
            &problems,
            &completions,
            &rounds,
        ));
    }
    Ok(summary)
}

/// A stored suite in one of the export formats.
pub async fn suite_export(
    store: &Store,
    suite: crate::store::SuiteId,
    format: Format,
) -> Result<String> {
    let problems = store.suite_problems(suite).await?;
    let completions = store.suite_completions(suite).await?;
    let repaired = store.suite_repair(suite).await?.is_some();
    let rows = crate::report::suite::export_rows(&problems, &completions, repaired);
    match format {
        Format::Csv => crate::report::suite::export_csv(&rows),
        Format::Json => {
            let export = crate::report::suite::SuiteExport {
                summary: suite_summary(store, suite).await?,
                completions: rows,
            };
            Ok(serde_json::to_string_pretty(&export)?)
        }
    }
}
