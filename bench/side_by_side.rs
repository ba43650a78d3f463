//! Side-by-side builds (issue 36): what a batch costs when another batch
//! runs beside it on the same machine and work directory.
//!
//! Every row runs the real binary on one shared work directory, warmed
//! first (each task built in each slot), each batch with a store and an
//! output folder of its own:
//!
//! - `absolute alone`, `shellwords alone`: the bundled tasks on their
//!   replay corpora, one batch at a time;
//! - `two tasks together`: one batch of each, started at once;
//! - `one task twice`: two `absolute` batches, started at once;
//! - `beside a bomb`: a `shellwords` batch started with an `absolute`
//!   batch one of whose candidates is a constant whose evaluation never
//!   ends (stopped only by its compile limit, `compile_cpu_s` set to
//!   [`BOMB_LIMIT_S`] in a copy of the task); the row is the `shellwords`
//!   batch's wall time, and the bomb's batch is interrupted once it ends.
//!
//! Each row is measured twice in one run, alternately: with the default
//! pool of build slots, and with `ASSAY_BUILD_SLOTS=1` (one package folder
//! and one target directory per work directory, as before issue 36). The
//! goals: two batches together take at most the sum of their times alone,
//! and a batch beside a bomb at most 1.5 × its time alone. Every batch's
//! verdicts must be its task's alone run's (the bench exits 1 otherwise).
//!
//! `cargo bench --bench side_by_side -- [--rounds R]` (default 2; the
//! bomb row runs once per round and setting).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The bomb's compile limit, CPU seconds: shorter than the bundled task's
/// 60 so the one-slot row (which waits for all of it) stays short.
const BOMB_LIMIT_S: u64 = 20;

/// How long the bomb's batch runs before the other starts.
const BOMB_HEAD_START: Duration = Duration::from_secs(2);

/// The two settings each row is measured under.
const SETTINGS: [(&str, Option<&str>); 2] = [("slots", None), ("one slot", Some("1"))];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1))
        .map_or(2, |v| v.parse().expect("--rounds: a number"));
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scratch = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch");
    let bench = Bench {
        root: scratch.path().to_path_buf(),
        work: scratch.path().join("work"),
        absolute: repo.join("specs/absolute"),
        shellwords: repo.join("specs/shellwords"),
        bomb: bomb_task(&repo.join("specs/absolute"), &scratch.path().join("bomb")),
        runs: std::cell::Cell::new(0),
    };

    // Warm: each task built in each slot of the pool.
    for pair in [
        [&bench.absolute, &bench.shellwords],
        [&bench.shellwords, &bench.absolute],
        [&bench.absolute, &bench.absolute],
        [&bench.shellwords, &bench.shellwords],
    ] {
        bench.together(&pair, None);
    }
    let want_abs = bench.together(&[&bench.absolute], None)[0].verdicts.clone();
    let want_sw = bench.together(&[&bench.shellwords], None)[0]
        .verdicts
        .clone();

    let mut rows: Vec<Row> = Vec::new();
    let mut agree = true;
    let mut check = |label: &str, got: &Batch, want: &[String]| {
        if got.verdicts != want {
            agree = false;
            eprintln!("{label}: verdicts differ from the task's alone run's");
        }
    };
    for _ in 0..rounds {
        for (setting, slots) in SETTINGS {
            let row = |name: &str| format!("{name} ({setting})");
            let abs = bench.together(&[&bench.absolute], slots).remove(0);
            let sw = bench.together(&[&bench.shellwords], slots).remove(0);
            check(&row("absolute alone"), &abs, &want_abs);
            check(&row("shellwords alone"), &sw, &want_sw);
            let two = bench.together(&[&bench.absolute, &bench.shellwords], slots);
            check(&row("two tasks"), &two[0], &want_abs);
            check(&row("two tasks"), &two[1], &want_sw);
            let twice = bench.together(&[&bench.absolute, &bench.absolute], slots);
            check(&row("one task twice"), &twice[0], &want_abs);
            check(&row("one task twice"), &twice[1], &want_abs);
            let beside = bench.beside_bomb(slots);
            check(&row("beside a bomb"), &beside, &want_sw);
            rows.push(Row {
                setting,
                abs: abs.wall,
                sw: sw.wall,
                two: two.iter().map(|b| b.wall).fold(0.0, f64::max),
                twice: twice.iter().map(|b| b.wall).fold(0.0, f64::max),
                beside: beside.wall,
            });
        }
    }
    report(&rows);
    if !agree {
        std::process::exit(1);
    }
}

/// One round's figures under one setting, wall seconds.
struct Row {
    setting: &'static str,
    abs: f64,
    sw: f64,
    /// Both batches of `two tasks together` done.
    two: f64,
    /// Both batches of `one task twice` done.
    twice: f64,
    /// The `shellwords` batch beside the bomb.
    beside: f64,
}

fn report(rows: &[Row]) {
    println!(
        "{:<9} {:>8} {:>8} {:>10} {:>10} {:>10} {:>11} {:>12} {:>13}",
        "setting",
        "abs (s)",
        "sw (s)",
        "two (s)",
        "twice (s)",
        "beside (s)",
        "two/(a+s)",
        "twice/(2a)",
        "beside/sw"
    );
    for r in rows {
        println!(
            "{:<9} {:>8.2} {:>8.2} {:>10.2} {:>10.2} {:>10.2} {:>11.2} {:>12.2} {:>13.2}",
            r.setting,
            r.abs,
            r.sw,
            r.two,
            r.twice,
            r.beside,
            r.two / (r.abs + r.sw),
            r.twice / (2.0 * r.abs),
            r.beside / r.sw
        );
    }
    println!("goals: two/(a+s) <= 1, twice/(2a) <= 1, beside/sw <= 1.5 (with slots)");
}

/// A batch's end: its wall time from the common start, and each
/// candidate's verdicts.
struct Batch {
    wall: f64,
    verdicts: Vec<String>,
}

struct Bench {
    root: PathBuf,
    work: PathBuf,
    absolute: PathBuf,
    shellwords: PathBuf,
    bomb: PathBuf,
    /// Runs so far, naming each run's folder.
    runs: std::cell::Cell<usize>,
}

impl Bench {
    /// Starts a batch of `task` (its store and output folder its own, the
    /// work directory shared), its JSON report going to a file.
    fn start(&self, task: &Path, slots: Option<&str>) -> (Child, PathBuf) {
        let n = self.runs.get();
        self.runs.set(n + 1);
        let dir = self.root.join(format!("run-{n}"));
        std::fs::create_dir_all(&dir).expect("run folder");
        let report = dir.join("report.json");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_assay"));
        cmd.env_remove("RUST_LOG").env_remove("ASSAY_BUILD_SLOTS");
        if let Some(slots) = slots {
            cmd.env("ASSAY_BUILD_SLOTS", slots);
        }
        let child = cmd
            .arg("run")
            .arg(task)
            .arg("--json")
            .arg("--db")
            .arg(dir.join("assay.db"))
            .arg("--out")
            .arg(dir.join("out"))
            .arg("--work-dir")
            .arg(&self.work)
            .stdout(File::create(&report).expect("report file"))
            .stderr(File::create(dir.join("stderr")).expect("stderr file"))
            .spawn()
            .expect("assay starts");
        (child, report)
    }

    /// Starts a batch of each task at once; each one's wall time runs from
    /// that common start to its own end.
    fn together(&self, tasks: &[&PathBuf], slots: Option<&str>) -> Vec<Batch> {
        let started = Instant::now();
        let mut running: Vec<_> = tasks.iter().map(|t| self.start(t, slots)).collect();
        let mut ended: Vec<Option<f64>> = vec![None; running.len()];
        while ended.iter().any(Option::is_none) {
            for (i, (child, _)) in running.iter_mut().enumerate() {
                if ended[i].is_none() && child.try_wait().expect("wait").is_some() {
                    ended[i] = Some(started.elapsed().as_secs_f64());
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        running
            .into_iter()
            .zip(ended)
            .map(|((mut child, report), wall)| {
                let status = child.wait().expect("wait");
                assert!(status.success(), "{}: {status}", report.display());
                Batch {
                    wall: wall.expect("ended"),
                    verdicts: verdicts(&report),
                }
            })
            .collect()
    }

    /// A `shellwords` batch started with the bomb's batch; the bomb's is
    /// interrupted once the other has ended.
    fn beside_bomb(&self, slots: Option<&str>) -> Batch {
        let (mut bomb, _) = self.start(&self.bomb, slots);
        // The bomb's draw (a replay) and its package take a fraction of a
        // second: by now its build has begun.
        std::thread::sleep(BOMB_HEAD_START);
        let batch = self.together(&[&self.shellwords], slots).remove(0);
        // SAFETY: kill(2) on a child we started and have not reaped.
        unsafe { libc::kill(bomb.id() as i32, libc::SIGINT) };
        let _ = bomb.wait();
        batch
    }
}

/// Each candidate's probe and score verdict, from a batch's JSON report.
fn verdicts(report: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(report).expect("report");
    let json: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: no JSON report ({e})", report.display()));
    json["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .map(|c| format!("{} {}", c["probe"], c["score"]))
        .collect()
}

/// A copy of the task at `from` whose first reply carries a compile bomb,
/// with a compile limit of [`BOMB_LIMIT_S`] (the harness stays where it
/// is, linked back).
fn bomb_task(from: &Path, to: &Path) -> PathBuf {
    std::fs::create_dir_all(to).expect("bomb folder");
    for entry in std::fs::read_dir(from).expect("task folder") {
        let entry = entry.expect("entry");
        let dest = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            std::os::unix::fs::symlink(entry.path(), dest).expect("link");
        } else {
            std::fs::copy(entry.path(), dest).expect("copy");
        }
    }
    let spec = std::fs::read_to_string(to.join("spec.toml")).expect("spec");
    let spec = format!("{spec}\n[probe]\ncompile_cpu_s = {BOMB_LIMIT_S}\n");
    std::fs::write(to.join("spec.toml"), spec).expect("spec");
    let replies = std::fs::read_to_string(to.join("replies.jsonl")).expect("replies");
    let mut lines: Vec<serde_json::Value> = replies
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a reply"))
        .collect();
    let content = lines[0]["content"].as_str().expect("content").to_owned();
    let fence = content.find("```rust\n").expect("a rust fence") + "```rust\n".len();
    lines[0]["content"] = format!("{}{SPIN}{}", &content[..fence], &content[fence..]).into();
    let corpus: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(to.join("replies.jsonl"), corpus).expect("bomb corpus");
    to.to_path_buf()
}

/// A constant whose evaluation never ends, which the default policy allows
/// and only the compile's own CPU limit stops (as bench/slow_compile.rs).
const SPIN: &str = "#[allow(long_running_const_eval)]\nconst _: u64 = {\n    \
    let mut i: u64 = 0;\n    while i < u64::MAX {\n        i += 1;\n    }\n    i\n};\n\n";
