//! Slow-compile benchmark (issue 37): what units whose compile never ends
//! cost a suite, side by side in one run.
//!
//! The suite is MBPP-RS with GPT-4's solutions (`../shared/data/
//! mbpp-rs-reflexion`, read in place, as tests/it/suite_real.rs reads it;
//! `ASSAY_MBPP_RS_DIR` names it elsewhere). Its slow form gives `--slow K`
//! of its programs (default 2, spread through the suite) a constant whose
//! evaluation never ends, which the per-unit compile limit (15 s of CPU)
//! stops: each is `Timeout` in every mode. Rows, each `assay suite run
//! --completions` of the real binary in a work directory of its own:
//!
//! - `clean`: the suite as it is, `--build shared`, a new work directory;
//! - `slow, warm`: the slow form, `--build shared`, in the clean run's work
//!   directory (the package has learned what honest groups cost);
//! - `slow, new`: the slow form, `--build shared`, a new work directory
//!   (nothing learned: the first wave's groups may spend one unit's limit);
//! - `slow, isolated`: the slow form, `--build isolated` (one build per
//!   program), a new work directory.
//!
//! The goal line is the clean wall time plus K × 15 s spread over the
//! CPUs, plus 20%. Every program but the slow ones must get the clean
//! run's status in every row, and the slow ones `Timeout`.
//!
//! The task half runs the bundled `absolute` task on its replay corpus
//! (44 replies), clean and with `--slow K` replies' code given the same
//! constant: `clean` (a new work directory), `slow, warm` (the clean run's)
//! and `slow, new`; its goal is the clean wall time plus the per-unit
//! limit (60 s), plus 20%, with every other candidate's probe and score
//! verdicts the clean run's.
//!
//! `cargo bench --bench slow_compile -- [--slow 2] [--limit N]
//! [--task-only | --suite-only]`;
//! `ASSAY_BENCH_LOG=assay::build::exec=info` prints assay's log (each
//! split of a group that overran).

#[path = "../tests/common/mbpp.rs"]
mod mbpp;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use assay::support::account::reaped_children_cpu_seconds;

/// The suite's per-unit compile limit (MultiPL-E's 15 s), CPU seconds.
const UNIT_LIMIT_SECS: f64 = 15.0;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(|v| {
                v.parse::<usize>()
                    .unwrap_or_else(|_| panic!("{name}: a number"))
            })
    };
    let slow = flag("--slow").unwrap_or(2);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let scratch = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch");
    let mut agree = true;
    if !args.iter().any(|a| a == "--suite-only") {
        agree &= task(slow, cpus, scratch.path());
    }
    if !args.iter().any(|a| a == "--task-only") {
        agree &= suite(slow, flag("--limit"), cpus, scratch.path());
    }
    if !agree {
        eprintln!("some unit's verdict differs from the clean run's");
        std::process::exit(1);
    }
}

/// The suite's rows; true when every status is as it should be.
fn suite(slow: usize, limit: Option<usize>, cpus: usize, root: &Path) -> bool {
    let mut rows = mbpp::load();
    if let Some(limit) = limit {
        rows.truncate(limit);
    }
    // Its outcome varies from run to run (mbpp.rs), so no row may differ
    // on it by chance.
    rows.retain(|r| r.name != mbpp::UNSTABLE);
    let slowed: Vec<usize> = (0..slow)
        .map(|k| (2 * k + 1) * rows.len() / (2 * slow))
        .collect();
    let mut slow_rows = rows.clone();
    for &i in &slowed {
        slow_rows[i].solution.push_str(SPIN);
    }
    println!();
    println!(
        "suite: {} MBPP-RS programs, {slow} of them slow, {cpus} CPUs",
        rows.len()
    );
    println!(
        "{:<16} {:>9} {:>8} {:>8}  phases",
        "run", "wall (s)", "CPU-s", "Timeout"
    );

    let clean = run(&rows, root, "clean", "clean", "shared");
    let warm = run(&slow_rows, root, "slow-warm", "clean", "shared");
    let new = run(&slow_rows, root, "slow-new", "slow-new", "shared");
    let isolated = run(
        &slow_rows,
        root,
        "slow-isolated",
        "slow-isolated",
        "isolated",
    );
    for (label, r) in [
        ("clean", &clean),
        ("slow, warm", &warm),
        ("slow, new", &new),
        ("slow, isolated", &isolated),
    ] {
        println!(
            "{label:<16} {:>9.1} {:>8.1} {:>8}  {}",
            r.wall,
            r.cpu,
            r.statuses.iter().filter(|s| *s == "Timeout").count(),
            r.phases
        );
    }

    let mut agree = true;
    for (label, r) in [
        ("slow, warm", &warm),
        ("slow, new", &new),
        ("slow, isolated", &isolated),
    ] {
        for (i, (got, want)) in r.statuses.iter().zip(&clean.statuses).enumerate() {
            let want = if slowed.contains(&i) { "Timeout" } else { want };
            if got == want {
                continue;
            }
            if !slowed.contains(&i) && run_stopped_by_either_limit(got, want) {
                println!(
                    "{label}: {}: {got} (clean: {want}): its run races its memory limit against its wall limit",
                    rows[i].name
                );
                continue;
            }
            agree = false;
            eprintln!("{label}: {}: {got}, expected {want}", rows[i].name);
        }
    }
    let goal = (clean.wall + slow as f64 * UNIT_LIMIT_SECS / cpus as f64) * 1.2;
    println!();
    println!(
        "goal: at most (clean + {slow} x {UNIT_LIMIT_SECS} s / {cpus} CPUs) x 1.2 = {goal:.1} s"
    );
    for (label, r) in [("slow, warm", &warm), ("slow, new", &new)] {
        println!(
            "{label:<12} shared/goal {:.2}   shared/isolated {:.2}   shared/clean {:.2}",
            r.wall / goal,
            r.wall / isolated.wall,
            r.wall / clean.wall
        );
    }
    agree
}

/// The task's rows: the bundled `absolute` task and its replay corpus (44
/// replies), clean and with `slow` replies' code given the never-ending
/// constant; true when every candidate but those gets the clean run's
/// probe and score verdicts and those do not compile.
fn task(slow: usize, cpus: usize, root: &Path) -> bool {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let replies = std::fs::read_to_string(repo.join("specs/absolute/replies.jsonl"))
        .expect("the bundled replay corpus");
    let mut lines: Vec<serde_json::Value> = replies
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a reply"))
        .collect();
    let clean_task = copy_task(&repo.join("specs/absolute"), &root.join("task-clean"));
    let n = lines.len();
    let slowed: Vec<usize> = (0..slow).map(|k| (2 * k + 1) * n / (2 * slow)).collect();
    for &i in &slowed {
        let content = lines[i]["content"].as_str().expect("content").to_owned();
        let fence = content.find("```rust\n").expect("a rust fence") + "```rust\n".len();
        let bombed = format!(
            "{}{}{}",
            &content[..fence],
            SPIN.trim_start(),
            &content[fence..]
        );
        lines[i]["content"] = serde_json::Value::String(bombed);
    }
    let slow_task = copy_task(&repo.join("specs/absolute"), &root.join("task-slow"));
    let corpus: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(slow_task.join("replies.jsonl"), corpus).expect("slow corpus");

    println!(
        "task: absolute, {n} replies, {slow} of them slow, {cpus} CPUs (per-unit limit {TASK_UNIT_LIMIT_SECS} s)"
    );
    println!("{:<16} {:>9} {:>8}  phases", "run", "wall (s)", "CPU-s");
    let clean = run_task(&clean_task, root, "t-clean", "t-clean");
    let warm = run_task(&slow_task, root, "t-slow-warm", "t-clean");
    let new = run_task(&slow_task, root, "t-slow-new", "t-slow-new");
    for (label, r) in [
        ("clean", &clean),
        ("slow, warm", &warm),
        ("slow, new", &new),
    ] {
        println!("{label:<16} {:>9.1} {:>8.1}  {}", r.wall, r.cpu, r.phases);
    }
    let mut agree = true;
    for (label, r) in [("slow, warm", &warm), ("slow, new", &new)] {
        for (i, (got, want)) in r.statuses.iter().zip(&clean.statuses).enumerate() {
            let ok = if slowed.contains(&i) {
                !got.starts_with("compiled")
            } else {
                got == want
            };
            if !ok {
                agree = false;
                eprintln!("{label}: candidate {i}: {got}, clean: {want}");
            }
        }
    }
    let goal = (clean.wall + TASK_UNIT_LIMIT_SECS) * 1.2;
    println!("goal: at most (clean + {TASK_UNIT_LIMIT_SECS} s) x 1.2 = {goal:.1} s");
    for (label, r) in [("slow, warm", &warm), ("slow, new", &new)] {
        println!(
            "{label:<12} slow/goal {:.2}   slow/clean {:.2}",
            r.wall / goal,
            r.wall / clean.wall
        );
    }
    agree
}

/// Whether two statuses of one program are the two ends of a run that
/// never finishes and allocates as it goes (GPT-4's `get_ludic` pushes to
/// a vector forever): `Exception` when the allocation fails first,
/// `Timeout` when the wall limit comes first, which the machine's load
/// decides. Neither is a build's verdict, which is what this bench checks.
fn run_stopped_by_either_limit(a: &str, b: &str) -> bool {
    matches!((a, b), ("Timeout", "Exception") | ("Exception", "Timeout"))
}

/// The task's per-candidate compile limit (the bundled spec's), CPU seconds.
const TASK_UNIT_LIMIT_SECS: f64 = 60.0;

/// A copy of the task folder `from` at `to` (the harness crate stays where
/// it is: the spec names it by a relative path, so it is linked back).
fn copy_task(from: &Path, to: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(to).expect("task dir");
    for entry in std::fs::read_dir(from).expect("task folder") {
        let entry = entry.expect("entry");
        let dest = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            std::os::unix::fs::symlink(entry.path(), dest).expect("link");
        } else {
            std::fs::copy(entry.path(), dest).expect("copy");
        }
    }
    to.to_path_buf()
}

/// `assay run` of the task in `spec`, its store in `root/name`, its work
/// directory `root/work-WORK`; each candidate's verdicts as `probe score`.
fn run_task(spec: &Path, root: &Path, name: &str, work: &str) -> Run {
    let args = ["run".into(), spec.as_os_str().to_owned(), "--json".into()];
    assay(&args, root, name, work, |report| {
        report["candidates"]
            .as_array()
            .expect("candidates")
            .iter()
            .map(|c| format!("{} {}", c["probe"], c["score"]))
            .collect()
    })
}

/// Runs `assay ARGS` with its store in `root/name` and its work directory
/// `root/work-WORK`, timed, and reads each unit's verdict from its JSON
/// report with `verdicts`.
fn assay(
    args: &[std::ffi::OsString],
    root: &Path,
    name: &str,
    work: &str,
    verdicts: impl FnOnce(&serde_json::Value) -> Vec<String>,
) -> Run {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).expect("run dir");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_assay"));
    match std::env::var("ASSAY_BENCH_LOG") {
        // Where assay's time goes: its shared builds, on stderr.
        Ok(filter) if !filter.is_empty() => cmd.env("RUST_LOG", filter),
        _ => cmd.env_remove("RUST_LOG"),
    };
    let cpu0 = reaped_children_cpu_seconds();
    let started = Instant::now();
    let out = cmd
        .args(args)
        .arg("--db")
        .arg(dir.join("assay.db"))
        .arg("--out")
        .arg(dir.join("out"))
        .arg("--work-dir")
        .arg(root.join(format!("work-{work}")))
        .output()
        .expect("assay starts");
    let wall = started.elapsed().as_secs_f64();
    let cpu = reaped_children_cpu_seconds() - cpu0;
    if std::env::var_os("ASSAY_BENCH_LOG").is_some() {
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
    }
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{name}: no JSON report ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    Run {
        wall,
        cpu,
        statuses: verdicts(&report),
        phases: phases(&report),
    }
}

fn phases(report: &serde_json::Value) -> String {
    report["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .map(|f| {
            format!(
                "{} {:.1}s",
                f["phase"].as_str().unwrap_or("?"),
                f["wall_s"].as_f64().unwrap_or(0.0)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Appended to a solution: a constant whose evaluation never ends, which
/// the default policy allows (no `unsafe`, nothing outside a function's
/// reach) and only the compile's own CPU limit stops.
const SPIN: &str = "\n\n#[allow(long_running_const_eval)]\nconst _: u64 = {\n    \
    let mut i: u64 = 0;\n    while i < u64::MAX {\n        i += 1;\n    }\n    i\n};\n";

struct Run {
    wall: f64,
    cpu: f64,
    statuses: Vec<String>,
    phases: String,
}

/// `assay suite run` of `rows` in `root/name`, its work directory
/// `root/work-WORK`, built `build`; each problem's one status.
fn run(rows: &[mbpp::Solved], root: &Path, name: &str, work: &str, build: &str) -> Run {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).expect("run dir");
    let (problems, completions) = mbpp::write_suite(rows, &dir);
    let args: Vec<std::ffi::OsString> = vec![
        "suite".into(),
        "run".into(),
        problems.into(),
        "--completions".into(),
        completions.into(),
        "--build".into(),
        build.into(),
        "--json".into(),
    ];
    assay(&args, root, name, work, |report| {
        report["problems"]
            .as_array()
            .expect("problems")
            .iter()
            .map(|p| {
                p["multiple_statuses"][0]
                    .as_str()
                    .expect("one status a problem")
                    .to_owned()
            })
            .collect()
    })
}
