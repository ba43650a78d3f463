//! What per-candidate images and the judge cost, side by side with the
//! code before them: the bundled `absolute` batch run by an `assay` built
//! from commit 51798b9 (one scorer binary for every candidate, the oracle in
//! the child) and by this one, alternately, each on a warm work directory
//! of its own (they build the harness's dependencies with different flags,
//! so one shared work directory would have each side rebuild them after
//! the other),
//! `ROUNDS` times each after one warm-up batch each. Prints each phase's wall
//! and CPU-s (probe, score build, score run), the best and median of the
//! rounds, and the ratio new / old.
//!
//! The old binary and the old task (its harness has the old contract) are
//! not built here:
//!
//! ```text
//! git archive 51798b9 | tar -x -C /tmp/assay-old && \
//!   (cd /tmp/assay-old && cargo build --release --bin assay)
//! ASSAY_OLD_BIN=/tmp/assay-old/target/release/assay \
//!   ASSAY_OLD_TASK=/tmp/assay-old/specs/absolute cargo bench --bench score_cost
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// Rounds per side (`ASSAY_BENCH_ROUNDS` overrides).
const ROUNDS: usize = 5;
const PHASES: [&str; 3] = ["probe", "score build", "score run"];

/// Picks one (wall, CPU-s) out of the rounds' figures.
type Pick = dyn Fn(&[(f64, f64)]) -> (f64, f64);

fn main() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let old_bin =
        PathBuf::from(std::env::var("ASSAY_OLD_BIN").unwrap_or("/tmp/assay-51798b9".into()));
    let old_task = PathBuf::from(
        std::env::var("ASSAY_OLD_TASK").unwrap_or("/tmp/old-specs/specs/absolute".into()),
    );
    let new_bin = PathBuf::from(env!("CARGO_BIN_EXE_assay"));
    let new_task = root.join("specs/absolute");
    let work =
        |side: &str| Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("score-cost-{side}"));
    let scratch = tempfile::tempdir()?;
    let rounds: usize = std::env::var("ASSAY_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(ROUNDS)
        .max(1);
    let sides = [
        ("51798b9", &old_bin, &old_task),
        ("this", &new_bin, &new_task),
    ];
    // figures[side][round][phase] = (wall, cpu)
    let mut figures = [Vec::new(), Vec::new()];
    for round in 0..=rounds {
        for (s, (name, bin, task)) in sides.iter().enumerate() {
            let db = scratch.path().join(format!("{name}.db"));
            let phases = run(bin, task, &db, &work(name), scratch.path())?;
            if round > 0 {
                figures[s].push(phases);
            }
        }
    }
    println!("absolute batch, {rounds} rounds each after one warm-up, alternating; wall s / CPU-s");
    println!(
        "{:<28}{:>12}{:>12}{:>12}{:>12}{:>10}{:>10}",
        "phase", "old wall", "new wall", "old CPU-s", "new CPU-s", "wall x", "CPU x"
    );
    let stat = |side: usize, pick: &Pick| -> Vec<(f64, f64)> {
        let mut rows: Vec<(f64, f64)> = Vec::new();
        for p in 0..=PHASES.len() {
            let per_round: Vec<(f64, f64)> = figures[side]
                .iter()
                .map(|r: &Vec<(f64, f64)>| {
                    if p < PHASES.len() {
                        r[p]
                    } else {
                        (r[1].0 + r[2].0, r[1].1 + r[2].1)
                    }
                })
                .collect();
            rows.push(pick(&per_round));
        }
        rows
    };
    let median = |v: &[(f64, f64)]| {
        let mut w: Vec<f64> = v.iter().map(|x| x.0).collect();
        let mut c: Vec<f64> = v.iter().map(|x| x.1).collect();
        w.sort_by(f64::total_cmp);
        c.sort_by(f64::total_cmp);
        (w[w.len() / 2], c[c.len() / 2])
    };
    let best = |v: &[(f64, f64)]| {
        let w = v.iter().map(|x| x.0).fold(f64::INFINITY, f64::min);
        let c = v.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
        (w, c)
    };
    for (label, pick) in [("median", &median as &Pick), ("best", &best)] {
        let (old, new) = (stat(0, pick), stat(1, pick));
        for p in 0..=PHASES.len() {
            let name = if p < PHASES.len() {
                PHASES[p]
            } else {
                "score build + score run"
            };
            println!(
                "{:<28}{:>12.2}{:>12.2}{:>12.2}{:>12.2}{:>9.2}x{:>9.2}x",
                format!("{name} ({label})"),
                old[p].0,
                new[p].0,
                old[p].1,
                new[p].1,
                new[p].0 / old[p].0,
                new[p].1 / old[p].1
            );
        }
    }
    Ok(())
}

/// Runs one batch and returns (wall, CPU-s) of each of [`PHASES`].
fn run(
    bin: &Path,
    task: &Path,
    db: &Path,
    work: &Path,
    dir: &Path,
) -> anyhow::Result<Vec<(f64, f64)>> {
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
    PHASES
        .iter()
        .map(|name| {
            let p = phases
                .iter()
                .find(|p| p["phase"] == *name)
                .ok_or_else(|| anyhow::anyhow!("no phase {name}"))?;
            Ok((
                p["wall_s"].as_f64().unwrap_or(0.0),
                p["cpu_s"].as_f64().unwrap_or(0.0),
            ))
        })
        .collect()
}
