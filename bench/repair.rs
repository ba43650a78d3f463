//! assay's own time per repair round (issue 28): the real binary runs a
//! batch of the bundled `absolute` task with one repair round (`--rounds
//! 1`: rounds 0 and 1) against the test gateway, whose model streams every
//! reply over a fixed time T, at 32 and 256 candidates per round, all in
//! flight at once. Whatever a round spends beyond T is assay's own:
//! opening the package, the draw's client side and storing replies,
//! extraction and dedup, the probe build, the scoring build and runs,
//! admission and the store; and between the rounds, choosing parents and
//! assembling their prompts.
//!
//! The replies are distinct mutants of the task's committed candidate,
//! two of three with a type error and one of three compiling with its
//! own wrong constant (so a third compile, as in production batches where
//! 8 to 12 of 32 did, and none passes every case). Round 1's replies are
//! the next ones of the same corpus, so a round builds and scores as many
//! new candidates as round 0. `[repair] stop = "never"`: both rounds run.
//!
//! For each size and round it prints the round's wall, the model's time
//! (the longest stream's injected time, from the gateway's own schedule),
//! the rest and its share of the round's wall (goal: at most 5%), and the
//! rest by phase; then the time between the rounds (parents and prompts)
//! and the whole batch as the process took it.
//!
//! `cargo bench --bench repair -- [--sizes 32,256] [--latency-s 60]`

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use assay::store::Store;
use assay::support::account::{Phase, PhaseFigures};
use assay_gateway::{Config, Dialect, Gateway, Model, Recorded};
use serde_json::Value;

/// Time to the first token of every stream.
const FIRST_TOKEN: Duration = Duration::from_secs(1);

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The work directory the tests and benches share (a warm target).
fn work_dir() -> PathBuf {
    repo().join("target/tmp/assay-work")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    let sizes: Vec<usize> = flag("--sizes").map_or_else(
        || vec![32, 256],
        |s| {
            s.split(',')
                .map(|n| n.trim().parse().expect("--sizes: numbers"))
                .collect()
        },
    );
    let latency = Duration::from_secs_f64(
        flag("--latency-s").map_or(60.0, |s| s.parse().expect("--latency-s: seconds")),
    );
    let committed = std::fs::read_to_string(repo().join("specs/absolute/committed.rs")).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let task = task_copy(scratch.path());

    // One corpus per size (mutants numbered apart, so no size meets
    // another's code), and a warm-up alias that answers at once.
    let mut config = Config::new().model(
        "warm",
        Model::new(Dialect::LlamaCpp, corpus(&committed, 100_000, 8)),
    );
    for (s, &n) in sizes.iter().enumerate() {
        let replies = corpus(&committed, s * 10_000, 2 * n);
        // Every stream lasts `latency`, to its longest reply's last token.
        let tokens = replies
            .iter()
            .map(|r| assay_gateway::tokens(&r.content).len())
            .max()
            .unwrap();
        let step = (latency.saturating_sub(FIRST_TOKEN)) / (tokens as u32 - 1).max(1);
        config = config.model(
            &alias(n),
            Model::new(Dialect::LlamaCpp, replies).latency(FIRST_TOKEN, step),
        );
    }
    let gw = Gateway::start_on_threads(config, 2).unwrap();
    let pools = scratch.path().join("pools.toml");
    let mut text = String::new();
    let pool_sizes = sizes.iter().map(|&n| (alias(n), n));
    for (name, n) in pool_sizes.chain([("warm".to_owned(), 8)]) {
        text += &format!(
            "[pools.{name}]\nbase_url = \"{}\"\nmodel = \"{name}\"\nmax_in_flight = {n}\n\
             sampling = {{ temperature = 0.6, seed = 1 }}\n",
            gw.base_url()
        );
    }
    std::fs::write(&pools, text).unwrap();

    println!("repair bench: {}", load());
    // The package, the harness and the judge built once, outside the
    // figures.
    let started = Instant::now();
    let warm = run(scratch.path(), &task, &pools, "warm", 8);
    println!(
        "warm-up: batch {} (8 replies, 2 rounds) in {:.1} s, not counted",
        warm,
        started.elapsed().as_secs_f64()
    );
    println!(
        "task absolute (269 cases, 12 visible), rounds 0 and 1, every stream {:.1} s \
         (first token after {:.1} s), all of a round in flight at once",
        latency.as_secs_f64(),
        FIRST_TOKEN.as_secs_f64()
    );
    println!(
        "{:>4} {:>5} {:>8} {:>8} {:>8} {:>7} | {:>7} {:>8} {:>8} {:>7} {:>8} {:>8} | {:>9}",
        "N",
        "round",
        "wall s",
        "model s",
        "other s",
        "other%",
        "prepare",
        "draw-T",
        "extract",
        "probe",
        "sc.build",
        "sc.run",
        "comp/uniq"
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    for &n in &sizes {
        let served_before = gw.served().len();
        let started = Instant::now();
        let batch = run(scratch.path(), &task, &pools, &alias(n), n);
        let process_wall = started.elapsed().as_secs_f64();
        let served: Vec<_> = gw.served()[served_before..].to_vec();
        assert_eq!(served.len(), 2 * n, "every request once");
        assert!(served
            .iter()
            .all(|s| s.status == 200 && s.model == alias(n)));
        let model = served
            .iter()
            .map(|s| s.last_due.as_secs_f64())
            .fold(0.0, f64::max);
        let shown = show(scratch.path(), batch);
        let (rounds, phases) = rt.block_on(async {
            let store = Store::open(&scratch.path().join("assay.db")).await.unwrap();
            let rounds = store.repair_rounds(batch).await.unwrap();
            let phases = store.phases(batch).await.unwrap();
            store.close().await;
            (rounds, phases)
        });
        assert_eq!(rounds.len(), 2, "rounds 0 and 1");
        let by_round = split_by_round(&phases);
        for (r, row) in rounds.iter().enumerate() {
            let wall = row.wall_s.expect("the round ended");
            let other = wall - model;
            let p = &by_round[r];
            let figures = &shown["rounds"][r];
            println!(
                "{n:>4} {r:>5} {wall:>8.2} {model:>8.2} {other:>8.2} {:>6.1}% | {:>7.2} {:>8.2} {:>8.2} {:>7.2} {:>8.2} {:>8.2} | {:>4}/{:<4}",
                100.0 * other / wall,
                wall_of(p, Phase::Prepare),
                wall_of(p, Phase::Draw) - model,
                wall_of(p, Phase::ExtractDedup),
                wall_of(p, Phase::Probe),
                wall_of(p, Phase::ScoreBuild),
                wall_of(p, Phase::ScoreRun),
                figures["compiled"],
                figures["unique"],
            );
        }
        let at = |s: &str| assay::support::clock::parse_utc(s).expect("a stored timestamp");
        let between =
            at(&rounds[1].started_at) - at(&rounds[0].started_at) - rounds[0].wall_s.unwrap();
        let persist = phases
            .iter()
            .filter(|f| f.phase == Phase::Persist)
            .map(|f| f.wall_s)
            .sum::<f64>();
        let waited = 2.0 * model;
        println!(
            "{n:>4} between rounds (parents, prompts, round 1's plan stored): {between:.2} s; \
             persist {persist:.2} s; whole batch as the process took it: {process_wall:.2} s, \
             model {waited:.2} s, other {:.2} s = {:.1}%",
            process_wall - waited,
            100.0 * (process_wall - waited) / process_wall
        );
    }
    println!("repair bench done: {}", load());
    drop(gw);
}

fn alias(n: usize) -> String {
    format!("n{n}")
}

/// `count` distinct replies, mutants `first..first + count` of the
/// committed candidate: every third compiles and gets its own constant
/// in the equal-margins split (a wrong answer where that branch is
/// taken), the others get a type error.
fn corpus(committed: &str, first: usize, count: usize) -> Vec<Recorded> {
    const SPLIT: &str = "(rest / 2.0, rest / 2.0, left, right)";
    const SOLVE: &str = "fn solve(input: &Input, width: Option<f64>) -> Output {\n";
    assert!(committed.contains(SPLIT) && committed.contains(SOLVE));
    (first..first + count)
        .map(|k| {
            let code = if k % 3 == 0 {
                committed.replacen(
                    SPLIT,
                    &format!("(rest / 2.{:07}, rest / 2.0, left, right)", k + 1),
                    1,
                )
            } else {
                committed.replacen(
                    SOLVE,
                    &format!("{SOLVE}    let _unused: u32 = \"{k}\";\n"),
                    1,
                )
            };
            Recorded {
                content: format!("Here it is.\n\n```rust\n{code}```\n"),
                reasoning: None,
            }
        })
        .collect()
}

/// The bundled task, with rounds that never stop early.
fn task_copy(dir: &Path) -> PathBuf {
    let to = dir.join("absolute");
    copy_dir(&repo().join("specs/absolute"), &to);
    let spec = to.join("spec.toml");
    let text = std::fs::read_to_string(&spec).unwrap();
    assert!(text.contains("\n[repair]\n"));
    std::fs::write(
        &spec,
        text.replacen("\n[repair]\n", "\n[repair]\nstop = \"never\"\n", 1),
    )
    .unwrap();
    to
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let path = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &path);
        } else {
            std::fs::copy(entry.path(), &path).unwrap();
        }
    }
}

fn assay(dir: &Path, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_assay"))
        .args(args)
        .current_dir(dir)
        .env("ASSAY_DB", dir.join("assay.db"))
        .env("ASSAY_WORK_DIR", work_dir())
        .env_remove("RUST_LOG")
        .env_remove("ASSAY_OUT")
        .env_remove("ASSAY_TEST_POINT")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "assay {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `assay run` with one repair round; the batch's id.
fn run(dir: &Path, task: &Path, pools: &Path, pool: &str, n: usize) -> i64 {
    let summary = assay(
        dir,
        &[
            "run",
            &task.display().to_string(),
            "--json",
            "-n",
            &n.to_string(),
            "--rounds",
            "1",
            "--pools",
            &pools.display().to_string(),
            "--pool",
            pool,
        ],
    );
    assert_eq!(summary["status"], "finished", "{summary}");
    summary["batch_id"].as_i64().unwrap()
}

fn show(dir: &Path, batch: i64) -> Value {
    assay(dir, &["show", &batch.to_string(), "--json"])
}

/// A batch's phases, one run of them per round: each round's begin with
/// `prepare`; the batch's last `persist` is left out.
fn split_by_round(phases: &[PhaseFigures]) -> Vec<Vec<PhaseFigures>> {
    let mut rounds: Vec<Vec<PhaseFigures>> = Vec::new();
    for f in phases {
        match f.phase {
            Phase::Prepare => rounds.push(vec![*f]),
            Phase::Persist => {}
            _ => rounds.last_mut().expect("prepare first").push(*f),
        }
    }
    rounds
}

fn wall_of(phases: &[PhaseFigures], phase: Phase) -> f64 {
    phases
        .iter()
        .filter(|f| f.phase == phase)
        .map(|f| f.wall_s)
        .sum()
}

/// The machine's load averages, as `uptime` prints them.
fn load() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let avg: Vec<&str> = text.split_whitespace().take(3).collect();
    format!("load average {}", avg.join(", "))
}
