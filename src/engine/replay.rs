//! Replay: probe a stored batch's candidates again, in one or more probe
//! modes, and say where the verdicts differ.
//!
//! The sources come from the store (the unique candidates the batch probed),
//! the task from the batch's spec path. Each mode and run is timed like a
//! batch phase (wall, CPU-s, average and peak busy CPUs) and stored as a
//! probe run of the batch with origin `replay`, so runs can be compared
//! later. The dependencies are built once, untimed, before the first run, so
//! the figures measure candidates, not crates.io. The toolchain is asked
//! once and recorded with every run, so a difference from the stored
//! verdicts can be told apart from a compiler upgrade.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::build::package::{Package, Profile};
use crate::build::probe::{self, ProbeMode, Probed, Toolchain};
use crate::store::{BatchId, ProbeRunStats, Store};
use crate::support::account::{Phase, PhaseGuard};
use crate::support::table::{Column, Table};
use crate::text::extract::Extraction;

/// What to replay and how.
#[derive(Debug, Clone)]
pub struct ReplayConfig {
    pub batch: BatchId,
    pub modes: Vec<ProbeMode>,
    /// Times each mode is run (runs alternate modes: shared, serial, shared, serial).
    pub runs: usize,
    /// The warm work directory (generated packages and their target).
    pub work_dir: PathBuf,
    /// Use a new, empty work directory instead of the warm one.
    pub fresh: bool,
    /// How long one cargo build may run (`--build-timeout`); `None`: the
    /// spec's `[probe] build_timeout_s`, else the default.
    pub build_timeout: Option<Duration>,
}

/// Everything a replay found.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayReport {
    pub batch_id: BatchId,
    pub task: String,
    /// Unique candidates probed in each run.
    pub candidates: usize,
    /// `warm` or `fresh`.
    pub work_dir: &'static str,
    /// Dependency units the untimed warm-up build rebuilt (0 when warm).
    pub warm_up_rebuilt: usize,
    /// What the probe's toolchain says it is; `None` if it could not say.
    pub toolchain: Option<Toolchain>,
    pub runs: Vec<ModeRun>,
    /// Candidates whose verdict is not the same in every run and the stored one.
    pub differences: Vec<Difference>,
}

/// One timed probe of the batch in one mode.
#[derive(Debug, Clone, Serialize)]
pub struct ModeRun {
    pub mode: ProbeMode,
    /// 1-based.
    pub run: usize,
    pub probe_run_id: i64,
    pub wall_s: f64,
    pub cpu_s: f64,
    pub avg_busy: f64,
    pub peak_busy: f64,
    pub compiled: usize,
    pub builds: usize,
    pub passes: usize,
    pub fallbacks: usize,
    pub deps_rebuilt: usize,
    /// Candidates probed again after a failure that can be transient.
    pub retries: usize,
}

/// A candidate whose verdicts disagree.
#[derive(Debug, Clone, Serialize)]
pub struct Difference {
    pub idx: usize,
    /// The batch's own verdict, if it had one.
    pub stored: Option<String>,
    /// `mode#run` -> verdict.
    pub verdicts: BTreeMap<String, String>,
}

/// Replays a batch. Errors are the host's (no such batch, the spec is gone,
/// cargo would not start); verdict differences are data in the report.
pub async fn replay(store: &Store, cfg: &ReplayConfig) -> Result<ReplayReport> {
    let batch = store.batch(cfg.batch).await?;
    let spec = crate::task::load(Path::new(&batch.spec_path))?;
    let rows = store.candidates(cfg.batch).await?;
    let mut sources = Vec::new();
    let mut stored = BTreeMap::new();
    for row in &rows {
        if let (Extraction::Source(source), None) = (&row.extraction, row.dup_of) {
            sources.push((row.idx, source.as_str()));
            if let Some(v) = &row.probe {
                stored.insert(row.idx, v.to_string());
            }
        }
    }

    let scratch;
    let work_dir = if cfg.fresh {
        scratch = tempfile::Builder::new()
            .prefix("assay-replay-")
            .tempdir()
            .context("cannot create a fresh work directory")?;
        scratch.path().to_path_buf()
    } else {
        cfg.work_dir.clone()
    };
    let limit = cfg
        .build_timeout
        .or(spec.probe.build_timeout)
        .unwrap_or(crate::build::package::BUILD_TIMEOUT);
    let package = {
        let (spec, work_dir) = (spec.clone(), work_dir.clone());
        let open = move || Package::open(&spec, &work_dir, &work_dir.join("target"));
        crate::engine::package::open(open, limit).await?
    };
    let toolchain = probe::toolchain(&package)
        .await
        .inspect_err(|e| tracing::warn!("cannot ask the probe's toolchain its version: {e:#}"))
        .ok();
    let warm = package.warm_up(Profile::Probe).await?;
    if !warm.success {
        anyhow::bail!(
            "the task's harness does not build:\n{}{}",
            warm.dependency_text(),
            warm.stderr
        );
    }
    let origin_dir = if cfg.fresh { "fresh" } else { "warm" };

    let mut runs = Vec::new();
    let mut seen: BTreeMap<usize, BTreeMap<String, String>> = BTreeMap::new();
    for run in 1..=cfg.runs {
        for &mode in &cfg.modes {
            tracing::info!(%mode, run, candidates = sources.len(), "replay probe");
            let guard = PhaseGuard::start(Phase::Probe);
            let outcome = probe::probe(&package, mode, &sources, |_| {}).await?;
            let figures = guard.finish();
            let id = store.begin_probe_run(cfg.batch, mode.as_str()).await?;
            let verdicts: Vec<(Probed, Option<PathBuf>)> =
                outcome.probed.iter().map(|p| (p.clone(), None)).collect();
            store
                .record_probe_verdicts(id, cfg.batch, &verdicts, &figures)
                .await?;
            store
                .record_probe_run_stats(
                    id,
                    &ProbeRunStats {
                        avg_busy: figures.avg_busy,
                        peak_busy: figures.peak_busy,
                        probe: &outcome.stats,
                        origin: "replay",
                        work_dir: Some(origin_dir),
                        toolchain: toolchain.as_ref(),
                    },
                )
                .await?;
            for p in &outcome.probed {
                seen.entry(p.idx)
                    .or_default()
                    .insert(format!("{mode}#{run}"), p.verdict.to_string());
            }
            runs.push(ModeRun {
                mode,
                run,
                probe_run_id: id,
                wall_s: figures.wall_s,
                cpu_s: figures.cpu_s,
                avg_busy: figures.avg_busy,
                peak_busy: figures.peak_busy,
                compiled: outcome
                    .probed
                    .iter()
                    .filter(|p| p.verdict.compiled())
                    .count(),
                builds: outcome.stats.builds,
                passes: outcome.stats.passes,
                fallbacks: outcome.stats.fallbacks,
                deps_rebuilt: outcome.stats.deps_rebuilt.len(),
                retries: outcome.stats.retries.len(),
            });
        }
    }
    drop(package);

    let differences = seen
        .into_iter()
        .filter_map(|(idx, verdicts)| {
            let stored = stored.get(&idx).cloned();
            let mut all = verdicts.values().chain(stored.iter());
            let first = all.next()?;
            all.any(|v| v != first).then_some(Difference {
                idx,
                stored,
                verdicts,
            })
        })
        .collect();
    Ok(ReplayReport {
        batch_id: cfg.batch,
        task: batch.task,
        candidates: sources.len(),
        work_dir: origin_dir,
        warm_up_rebuilt: warm.deps_rebuilt.len(),
        toolchain,
        runs,
        differences,
    })
}

impl ReplayReport {
    /// `replay --json`: the report with whether every verdict agreed.
    pub fn to_json(&self) -> serde_json::Result<serde_json::Value> {
        let mut value = serde_json::to_value(self)?;
        value["identical"] = self.identical().into();
        Ok(value)
    }

    /// Whether every verdict agreed.
    pub fn identical(&self) -> bool {
        self.differences.is_empty()
    }

    /// One line per run: its mode, figures and verdict counts.
    fn runs_table(&self) -> String {
        let column = |heading: &str, width: usize| Column::right(heading).min_width(width).gap(" ");
        let mut table = Table::new(vec![
            Column::left("mode").min_width(6),
            column("run", 4),
            column("wall (s)", 9),
            column("CPU-s", 7),
            column("avg busy", 9),
            column("peak busy", 10),
            column("compiled", 9),
            column("builds", 7),
            column("passes", 7),
            column("fallbacks", 10),
            column("retries", 8),
        ]);
        for r in &self.runs {
            table.row([
                r.mode.as_str().to_owned(),
                r.run.to_string(),
                format!("{:.2}", r.wall_s),
                format!("{:.2}", r.cpu_s),
                format!("{:.1}", r.avg_busy),
                format!("{:.1}", r.peak_busy),
                format!("{}/{}", r.compiled, self.candidates),
                r.builds.to_string(),
                r.passes.to_string(),
                r.fallbacks.to_string(),
                r.retries.to_string(),
            ]);
        }
        table.render()
    }

    /// The text form: one line per run, then every difference.
    pub fn render(&self) -> String {
        let mut out = format!(
            "replay of batch {}  task {}  {} unique candidates  {} work dir (warm-up rebuilt {})\n",
            self.batch_id, self.task, self.candidates, self.work_dir, self.warm_up_rebuilt
        );
        match &self.toolchain {
            Some(t) => out.push_str(&format!("toolchain: {}\n", t.summary())),
            None => out.push_str("toolchain: unknown (it could not be asked)\n"),
        }
        out.push_str(&self.runs_table());
        if self.differences.is_empty() {
            out.push_str(
                "verdicts: identical in every mode and run, and equal to the stored ones\n",
            );
        } else {
            out.push_str(&format!(
                "verdicts differ for {} candidates:\n",
                self.differences.len()
            ));
            for d in &self.differences {
                let all: Vec<String> = d
                    .stored
                    .iter()
                    .map(|s| format!("stored {s}"))
                    .chain(d.verdicts.iter().map(|(k, v)| format!("{k} {v}")))
                    .collect();
                out.push_str(&format!("  candidate {}: {}\n", d.idx, all.join(", ")));
            }
        }
        out
    }
}
