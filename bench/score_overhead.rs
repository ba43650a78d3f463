//! What a scoring run costs beyond its candidates' own processes (issue
//! 37): the bundled `absolute` batch run by an `assay` built before the
//! change (`ASSAY_OLD_BIN`) and by this one, alternately, on one warm work
//! directory, `ROUNDS` times each after one warm-up batch each. For each
//! side it prints the score run's CPU-s, the CPU the candidates' runs took
//! themselves (each run's `wait4` time: its process start, its cases, its
//! exit; a run stopped at its wall limit spends that limit), the rest (the
//! judge, the sandbox's set-up and teardown, assay's own work, the store),
//! and that rest per scored candidate; then the ratios new / old.
//!
//! ```text
//! git worktree add /tmp/assay-old <commit> && \
//!   (cd /tmp/assay-old && cargo build --release --bin assay)
//! ASSAY_OLD_BIN=/tmp/assay-old/target/release/assay cargo bench --bench score_overhead
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// Rounds per side (`ASSAY_BENCH_ROUNDS` overrides).
const ROUNDS: usize = 5;

/// One batch's figures.
#[derive(Debug, Clone, Copy, Default)]
struct Figures {
    /// The score run phase's CPU-s.
    score_run: f64,
    /// Every scored candidate's own run, CPU-s.
    runs: f64,
    /// The same without runs stopped at their wall limit.
    runs_finished: f64,
    /// Candidates scored.
    scored: usize,
}

impl Figures {
    fn rest(&self) -> f64 {
        self.score_run - self.runs
    }

    fn rest_per_candidate_ms(&self) -> f64 {
        1000.0 * self.rest() / self.scored.max(1) as f64
    }
}

/// One figure of a side's batch, read off its measurements.
type Figure<'a> = &'a dyn Fn(&Figures) -> f64;

fn main() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let old_bin = PathBuf::from(
        std::env::var("ASSAY_OLD_BIN").unwrap_or("/tmp/assay-old/target/release/assay".into()),
    );
    let new_bin = PathBuf::from(env!("CARGO_BIN_EXE_assay"));
    let task = root.join("specs/absolute");
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("score-overhead");
    let scratch = tempfile::tempdir()?;
    let rounds: usize = std::env::var("ASSAY_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(ROUNDS)
        .max(1);
    let sides = [("old", &old_bin), ("new", &new_bin)];
    let mut figures: [Vec<Figures>; 2] = [Vec::new(), Vec::new()];
    for round in 0..=rounds {
        for (s, (name, bin)) in sides.iter().enumerate() {
            let db = scratch.path().join(format!("{name}.db"));
            let f = run(bin, &task, &db, &work, scratch.path())?;
            if round > 0 {
                figures[s].push(f);
            }
        }
    }
    println!(
        "absolute batch, {rounds} rounds each after one warm-up, alternating; CPU-s \
         (medians over the rounds)"
    );
    println!(
        "{:<44}{:>10}{:>10}{:>10}",
        "figure", "old", "new", "new/old"
    );
    let median = |side: usize, f: Figure| {
        let mut v: Vec<f64> = figures[side].iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let rows: [(&str, Figure); 5] = [
        ("score run CPU-s", &|f| f.score_run),
        ("candidates' own runs, CPU-s", &|f| f.runs),
        ("  of which runs that finished", &|f| f.runs_finished),
        ("rest (judge, sandbox, assay), CPU-s", &|f| f.rest()),
        ("rest per scored candidate, ms", &|f| {
            f.rest_per_candidate_ms()
        }),
    ];
    for (name, f) in rows {
        let (old, new) = (median(0, f), median(1, f));
        println!("{name:<44}{old:>10.3}{new:>10.3}{:>9.2}x", new / old);
    }
    println!(
        "scored candidates: {} (old), {} (new)",
        figures[0][0].scored, figures[1][0].scored
    );
    Ok(())
}

/// Runs one batch and returns its figures.
fn run(bin: &Path, task: &Path, db: &Path, work: &Path, dir: &Path) -> anyhow::Result<Figures> {
    let out = Command::new(bin)
        .args(["run", &task.display().to_string(), "--json"])
        .current_dir(dir)
        .env("ASSAY_DB", db)
        .env("ASSAY_WORK_DIR", work)
        .env_remove("RUST_LOG")
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "{} failed: {}",
        bin.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout)?;
    anyhow::ensure!(
        summary["committed"]["passed"] == 231,
        "{}",
        summary["committed"]
    );
    let phases = summary["phases"].as_array().cloned().unwrap_or_default();
    let score_run = phases
        .iter()
        .find(|p| p["phase"] == "score run")
        .and_then(|p| p["cpu_s"].as_f64())
        .ok_or_else(|| anyhow::anyhow!("no score run phase"))?;
    let mut figures = Figures {
        score_run,
        ..Figures::default()
    };
    for c in summary["candidates"].as_array().into_iter().flatten() {
        let Some(ms) = c["cpu_ms"].as_f64() else {
            continue;
        };
        figures.scored += 1;
        figures.runs += ms / 1000.0;
        if !c["score"].as_str().unwrap_or("").starts_with("timeout") {
            figures.runs_finished += ms / 1000.0;
        }
    }
    Ok(figures)
}
