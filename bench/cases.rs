//! Harness cases per second per core, with the sandbox and isolation on.
//!
//! Builds the bundled `absolute` task's judge and its committed candidate's
//! scoring image (once; the work directory stays warm), then runs one child
//! over about 100,000 cases (the task's 269 cases repeated) in each mode,
//! side by side in one run, and has the judge decide its outputs:
//!
//! - sandbox on (Landlock, network namespace, pids cgroup, rlimits, empty
//!   environment, temporary directory), all cases in one child;
//! - the same with per-case isolation (`isolation = "per_case"`: a case's
//!   own wall limit, restart after a failing case; no case fails here);
//! - no sandbox (rlimits and process group only), for the sandbox's cost;
//! - one child per case, with and without the sandbox: what isolation by
//!   process would cost, which is why per-case isolation restarts only after
//!   a failure, and how much of a child's cost is its confinement.
//!
//! A child runs its cases on one thread, so cases / CPU-s is cases/s per
//! core; cases / wall-s (one child at a time) is printed too. The CPU time
//! counted is the child's and the judge's (every child reaped during the
//! run, from `getrusage(RUSAGE_CHILDREN)`): starting, decoding each input,
//! encoding and reporting each output, and the judge loading the cases,
//! decoding each output and comparing it.
//!
//! `cargo bench --bench cases`

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use assay::build::package::{ModuleKey, Package};
use assay::sandbox::Sandbox;
use assay::score::{self, Oracle, RunLimits, ScoreVerdict};
use assay::spec::Isolation;

const REPEAT: usize = 372;
const ROUNDS: usize = 3;
const PER_PROCESS_CASES: usize = 100;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let spec = assay::task::load(&root.join("specs/absolute"))?;
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("assay-work");
    let exe_dir = tempfile::tempdir()?;
    let exe = exe_dir.path().join("image");
    let judge = exe_dir.path().join("judge");
    {
        let package = Package::open(&spec, &work, &work.join("target"))?;
        package.write_module(&ModuleKey::Committed, &spec.committed.source)?;
        let built = score::build_images(
            &package,
            &[ModuleKey::Committed],
            &spec.harness.crate_name,
            None,
            |_| {},
        )
        .await?;
        std::fs::copy(&built.built[0].1, &exe)?;
        std::fs::copy(&built.judge, &judge)?;
    }
    let one: Vec<&str> = spec
        .cases
        .text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    let text: Arc<str> = one
        .iter()
        .cycle()
        .take(one.len() * REPEAT)
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .into();
    let total = one.len() * REPEAT;
    let single_text: Arc<str> = format!("{}\n", one[0]).into();

    let sandbox = Arc::new(Sandbox::probe(32));
    let open = Arc::new(Sandbox::disabled_for_comparison());
    // The judge runs under the same sandbox as the runs it judges.
    let memory = spec.limits.memory_bytes;
    let oracle = |sb: &Arc<Sandbox>, text: &Arc<str>, total| {
        Oracle::new(&judge, text.clone(), total, sb.clone(), memory)
    };
    println!(
        "sandbox: {}",
        sandbox.describe(RunLimits::with_wall(Duration::from_secs(120)).address_space_bytes)
    );
    for w in sandbox.warnings() {
        println!("sandbox warning: {w}");
    }
    println!(
        "{total} cases per run ({} cases x {REPEAT}), best of {ROUNDS} runs, one child at a time",
        one.len()
    );

    let limits = RunLimits::with_wall(Duration::from_secs(120));
    let per_case = RunLimits {
        isolation: Isolation::PerCase,
        case_wall: Duration::from_secs(2),
        ..limits
    };
    let mut rows = Vec::new();
    for (name, sb, lim) in [
        ("sandbox on, one child", &sandbox, limits),
        ("sandbox on, per-case isolation", &sandbox, per_case),
        ("no sandbox, one child", &open, limits),
    ] {
        let oracle = oracle(sb, &text, total).await?;
        let mut best: Option<(f64, f64)> = None;
        for _ in 0..ROUNDS {
            let start = Instant::now();
            let cpu = children_cpu();
            let scored = score::run_one(&exe, ModuleKey::Committed, &oracle, lim, sb)
                .await?
                .scored;
            let wall = start.elapsed().as_secs_f64();
            let cpu = children_cpu() - cpu;
            assert!(
                matches!(scored.verdict, ScoreVerdict::Scored { total: t, .. } if t == total),
                "{name}: {}",
                scored.verdict
            );
            assert!(scored.passed > 0, "{name}: the judge passed nothing");
            let per_cpu = total as f64 / cpu.as_secs_f64();
            let per_wall = total as f64 / wall;
            if best.is_none_or(|(c, _)| per_cpu > c) {
                best = Some((per_cpu, per_wall));
            }
        }
        rows.push((name, best.unwrap()));
    }
    // One child per case: a single case per run, with and without the
    // sandbox (what a child costs, and how much of that is confinement).
    for (name, sb) in [
        ("sandbox on, one child per case", &sandbox),
        ("no sandbox, one child per case", &open),
    ] {
        let single = oracle(sb, &single_text, 1).await?;
        let start = Instant::now();
        let cpu = children_cpu();
        for _ in 0..PER_PROCESS_CASES {
            let scored = score::run_one(&exe, ModuleKey::Committed, &single, limits, sb)
                .await?
                .scored;
            assert!(scored.verdict.finished(), "{}", scored.verdict);
        }
        let cpu = children_cpu() - cpu;
        let wall = start.elapsed().as_secs_f64();
        rows.push((
            name,
            (
                PER_PROCESS_CASES as f64 / cpu.as_secs_f64(),
                PER_PROCESS_CASES as f64 / wall,
            ),
        ));
    }

    let reference = rows[0].1 .0;
    println!(
        "{:<34}{:>16}{:>16}{:>10}  goal 100,000/s/core",
        "mode", "cases/CPU-s", "cases/wall-s", "ratio"
    );
    for (name, (per_cpu, per_wall)) in &rows {
        println!(
            "{name:<34}{per_cpu:>16.0}{per_wall:>16.0}{:>9.2}x  {}",
            per_cpu / reference,
            if *per_cpu >= 100_000.0 {
                format!("met ({:.1}x)", per_cpu / 100_000.0)
            } else {
                format!("not met ({:.2}x)", per_cpu / 100_000.0)
            }
        );
    }
    Ok(())
}

/// User + system CPU time of every child reaped so far (scoring children
/// through `wait4`, judges through tokio).
fn children_cpu() -> Duration {
    // SAFETY: getrusage fills a plain struct we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}
