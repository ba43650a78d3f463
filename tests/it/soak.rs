//! The soak (issue 25 §5): one machine and one warm work directory held at
//! once by batches of both bundled tasks (two of them sharing one database,
//! one of those two probed serially), suites from the fixture, two lanes
//! draining batches queued on PostgreSQL (one lane SIGKILLed in the middle
//! of an item, and a third lane taking its place) and two CPU hogs.
//!
//! Each kind of work is first run alone, as its reference. Under load,
//! every batch and suite must finish and come to what its reference came
//! to (verdicts, counts, statuses; never a timing), leave nothing
//! `running` in any store and no scratch directory in the soak's own
//! temporary directory, and log no error or panic. (A lane's runs' logs
//! cannot be read: a lane keeps only the last line of a run's stderr, as
//! a failed run's reason; the queue's record of each item stands for them.)
//!
//! `cargo test --profile ci --test it soak::` runs the smaller form that CI runs;
//! `ASSAY_SOAK_FULL=1` runs the issue's whole load. docs/testing.md gives
//! both forms' times.

use crate::common;
use crate::common::pg;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{repo, shared_work_dir, FixtureSuite, Scratch};
use serde_json::{json, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Task {
    Absolute,
    Shellwords,
}

impl Task {
    const ALL: [Task; 2] = [Task::Absolute, Task::Shellwords];

    fn name(self) -> &'static str {
        match self {
            Task::Absolute => "absolute",
            Task::Shellwords => "shellwords",
        }
    }

    fn spec(self) -> String {
        repo().join("specs").join(self.name()).display().to_string()
    }

    fn named(name: &str) -> Task {
        Task::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .unwrap_or_else(|| panic!("no bundled task {name:?}"))
    }
}

/// A batch run beside the rest, in database `db` (an index: batches with
/// the same index share one SQLite file).
struct Batch {
    task: Task,
    serial: bool,
    db: usize,
}

/// How much runs at once.
struct Form {
    name: &'static str,
    batches: &'static [Batch],
    suites: usize,
    /// Batches queued on PostgreSQL for the lanes.
    queued: &'static [Task],
}

const fn batch(task: Task, serial: bool, db: usize) -> Batch {
    Batch { task, serial, db }
}

/// Run by CI on every push: every kind of load once.
const SMALL: Form = Form {
    name: "small",
    batches: &[
        batch(Task::Absolute, false, 0),
        batch(Task::Shellwords, true, 0),
    ],
    suites: 1,
    queued: &[Task::Absolute, Task::Shellwords],
};

/// The issue's: 6 batches, 2 suites, 4 queued batches.
const FULL: Form = Form {
    name: "full",
    batches: &[
        batch(Task::Absolute, false, 0),
        batch(Task::Shellwords, true, 0),
        batch(Task::Absolute, false, 1),
        batch(Task::Shellwords, false, 2),
        batch(Task::Absolute, false, 3),
        batch(Task::Shellwords, false, 4),
    ],
    suites: 2,
    queued: &[
        Task::Absolute,
        Task::Shellwords,
        Task::Absolute,
        Task::Shellwords,
    ],
};

impl Form {
    fn chosen() -> &'static Form {
        match std::env::var("ASSAY_SOAK_FULL").as_deref() {
            Ok("1") => &FULL,
            _ => &SMALL,
        }
    }

    fn databases(&self) -> usize {
        self.batches.iter().map(|b| b.db + 1).max().unwrap_or(0)
    }
}

/// Longer than any form takes on a loaded machine: only a hang reaches it,
/// and it then fails naming what did not end instead of holding CI.
const HANG: Duration = Duration::from_secs(40 * 60);

/// A lane's lease: long enough that no load on this machine makes a live
/// lane lose one, so only the killed lane's item is claimed twice.
const LEASE_S: &str = "10";

/// The soak's folder: its own temporary directory (every `assay` of the
/// soak runs with it as `TMPDIR`, so the scratch directories found there
/// are the soak's alone) and its processes' logs.
struct Soak {
    dir: Scratch,
    tmp: PathBuf,
}

impl Soak {
    fn new() -> Soak {
        use std::os::unix::fs::PermissionsExt;
        let dir = Scratch::new();
        let tmp = dir.join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        // Like /tmp: the runs' unprivileged user must reach its directories.
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).unwrap();
        std::fs::create_dir(dir.join("logs")).unwrap();
        Soak { dir, tmp }
    }

    /// `assay args` as `scratch` runs it, in the soak's temporary directory.
    fn assay(&self, scratch: &Scratch, args: &[&str]) -> Command {
        let mut cmd = scratch.command(args);
        cmd.env("TMPDIR", &self.tmp);
        cmd
    }

    /// `assay args` on the PostgreSQL store `db`.
    fn assay_on(&self, db: &str, args: &[&str]) -> Command {
        let mut cmd = self.assay(&self.dir, args);
        cmd.env("ASSAY_DB", db);
        cmd
    }

    fn start(&self, name: &str, cmd: Command) -> Job {
        Job::start(name, cmd, &self.dir.join("logs"))
    }

    /// The scratch directories left in the soak's temporary directory.
    fn scratch_dirs_left(&self) -> Vec<String> {
        std::fs::read_dir(&self.tmp)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("assay-"))
            .collect()
    }
}

/// A process of the soak, its output written to files; killed if the test
/// ends before it does.
struct Job {
    name: String,
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

/// What a job left: its status and both outputs.
struct Ended {
    name: String,
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Job {
    fn start(name: &str, mut cmd: Command, logs: &Path) -> Job {
        let stdout = logs.join(format!("{name}.out"));
        let stderr = logs.join(format!("{name}.err"));
        let child = cmd
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("{name} does not start: {e}"));
        Job {
            name: name.to_owned(),
            child,
            stdout,
            stderr,
        }
    }

    /// Waits for the job's end, at most until `deadline`.
    fn finish(mut self, deadline: Instant) -> Ended {
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "{} did not end", self.name);
            std::thread::sleep(Duration::from_millis(100));
        };
        let read = |path: &Path| std::fs::read_to_string(path).unwrap();
        Ended {
            name: self.name.clone(),
            status,
            stdout: read(&self.stdout),
            stderr: read(&self.stderr),
        }
    }

    fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        // A no-op once the child is reaped.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Ended {
    /// Its `--json` result, once it succeeded and logged no error.
    fn result(&self) -> Value {
        assert!(
            self.status.success(),
            "{} failed ({}): {}",
            self.name,
            self.status,
            self.stderr
        );
        self.assert_no_error();
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {}", self.name, self.stdout))
    }

    /// No line of its log says something went wrong; its warnings are
    /// shown, for whoever reads the test's output.
    fn assert_no_error(&self) {
        let wrong: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| l.contains("ERROR") || l.starts_with("error") || l.contains("panicked"))
            .collect();
        assert!(wrong.is_empty(), "{} logged: {wrong:#?}", self.name);
        for line in self.stderr.lines().filter(|l| l.contains("WARN")) {
            eprintln!("soak: {} warned: {line}", self.name);
        }
    }
}

/// Busy loops on every core the soak may want, stopped when dropped (and,
/// should the test process die first, with the thread that started them:
/// `PR_SET_PDEATHSIG`).
struct Hogs(Vec<Child>);

impl Hogs {
    fn start(n: usize) -> Hogs {
        use std::os::unix::process::CommandExt;
        let hog = || {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", "while :; do :; done"]);
            // SAFETY: prctl is async-signal-safe and touches no memory.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            cmd.spawn().expect("a CPU hog starts")
        };
        Hogs((0..n).map(|_| hog()).collect())
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        for hog in &mut self.0 {
            let _ = hog.kill();
            let _ = hog.wait();
        }
    }
}

/// What a batch came to, without what depends on timing: its counts,
/// status, best and committed scores and groups, and each candidate's
/// verdicts, cases and admission. A rank is left out (admission ranks ties
/// by the runs' CPU time, a measurement).
fn batch_verdicts(result: &Value) -> Value {
    const SUMMARY: [&str; 10] = [
        "replies",
        "extracted",
        "unique",
        "compiled",
        "admitted",
        "best",
        "committed",
        "status",
        "groups",
        "other_groups",
    ];
    const CANDIDATE: [&str; 8] = [
        "candidate_id",
        "extract",
        "dup_of",
        "alpha_dup_of",
        "probe",
        "score",
        "cases",
        "admitted",
    ];
    let pick = |v: &Value, keys: &[&str]| -> Value {
        keys.iter().map(|&k| (k.to_owned(), v[k].clone())).collect()
    };
    let candidates: Vec<Value> = result["candidates"]
        .as_array()
        .unwrap_or_else(|| panic!("no candidates: {result}"))
        .iter()
        .map(|c| pick(c, &CANDIDATE))
        .collect();
    json!({ "summary": pick(result, &SUMMARY), "candidates": candidates })
}

/// What a suite came to: its status, counts and each problem's statuses
/// and cases passed.
fn suite_verdicts(result: &Value) -> Value {
    const KEYS: [&str; 7] = [
        "status",
        "completions",
        "programs",
        "pending",
        "problems",
        "pass_at_1",
        "pass_at_k",
    ];
    KEYS.iter()
        .map(|&k| (k.to_owned(), result[k].clone()))
        .collect()
}

fn suite_args() -> Vec<String> {
    let fixture = FixtureSuite::new();
    fixture.run(&[]).into_iter().map(String::from).collect()
}

fn batch_args(task: Task, serial: bool) -> Vec<String> {
    let mut args = vec!["run".to_owned(), task.spec()];
    if serial {
        args.extend(["--probe".to_owned(), "serial".to_owned()]);
    }
    args.push("--json".to_owned());
    args
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// Each kind of work run alone, one after the other: what it must come to
/// under load.
struct References {
    batches: Vec<(Task, Value)>,
    suite: Value,
}

impl References {
    fn run(soak: &Soak) -> References {
        let alone = |name: &str, args: &[String]| {
            let scratch = Scratch::new();
            let job = soak.start(name, soak.assay(&scratch, &strs(args)));
            job.finish(Instant::now() + HANG).result()
        };
        let batches = Task::ALL
            .into_iter()
            .map(|task| {
                let result = alone(
                    &format!("reference-{}", task.name()),
                    &batch_args(task, false),
                );
                let verdicts = batch_verdicts(&result);
                // What is compared holds verdicts, not only their absence.
                assert!(verdicts.to_string().contains("scored("), "{verdicts}");
                (task, verdicts)
            })
            .collect();
        let mut args = suite_args();
        args.push("--json".into());
        let suite = suite_verdicts(&alone("reference-suite", &args));
        for status in ["OK", "Exception", "SyntaxError", "Timeout"] {
            assert!(suite.to_string().contains(status), "{status}: {suite}");
        }
        References { batches, suite }
    }

    fn batch(&self, task: Task) -> &Value {
        &self.batches.iter().find(|(t, _)| *t == task).unwrap().1
    }
}

/// Polls the PostgreSQL store until `sql` selects a value; returns it.
fn wait_for_value(schema: &pg::PgSchema, what: &str, sql: &str, deadline: Instant) -> String {
    loop {
        let value = schema.value(sql);
        if !value.is_empty() {
            return value;
        }
        assert!(Instant::now() < deadline, "never {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The lane `name` on the PostgreSQL store, with its own output folder and
/// the shared work directory; `point` arms a test point in its runs.
fn lane(soak: &Soak, db: &str, name: &str, out: &Scratch, point: Option<&str>) -> Job {
    let out = out.path().display().to_string();
    let work = shared_work_dir().display().to_string();
    let args = [
        "lane",
        "--lane",
        name,
        "--until-empty",
        "--lease",
        LEASE_S,
        "--out",
        &out,
        "--work-dir",
        &work,
    ];
    let mut cmd = soak.assay_on(db, &args);
    if let Some(point) = point {
        cmd.env("ASSAY_TEST_POINT", point);
    }
    soak.start(&format!("lane-{name}"), cmd)
}

/// The lanes' part of the load: `form.queued` batches queued on a
/// PostgreSQL store, lane a and lane b draining them; lane a is SIGKILLed
/// once its first run has stored its probe verdicts (held there by a test
/// point, so before any scoring run and its scratch directory), and lane c
/// takes its place.
struct Lanes {
    schema: pg::PgSchema,
    outs: [Scratch; 3],
    /// The item lane a was killed in.
    killed_item: i64,
    lanes: Vec<Job>,
}

impl Lanes {
    fn queue(soak: &Soak, form: &Form) -> pg::PgSchema {
        let schema = pg::PgSchema::new();
        for &task in form.queued {
            let mut args = batch_args(task, false);
            args.push("--queue".into());
            let out = soak.assay_on(&schema.url, &strs(&args)).output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        schema
    }

    fn start(soak: &Soak, schema: pg::PgSchema, deadline: Instant) -> Lanes {
        let outs = [Scratch::new(), Scratch::new(), Scratch::new()];
        let db = schema.url.clone();
        let a = lane(soak, &db, "a", &outs[0], Some("pause@probe.stored"));
        // Lane b starts once lane a holds an item, so lane a has one to be
        // killed in however slowly it starts.
        let killed_item: i64 = wait_for_value(
            &schema,
            "lane a took an item",
            "SELECT id FROM work_items WHERE lane = 'a'",
            deadline,
        )
        .parse()
        .unwrap();
        let b = lane(soak, &db, "b", &outs[1], None);
        // `builds` is set by record_probe_run_stats, the run's last write
        // before the point: once it is, the verdicts are stored. (Not
        // `origin`: it has a default, so it is set from the run's first
        // write. Nor lane a's stderr: the run is the lane's child, whose
        // stderr the lane keeps.)
        wait_for_value(
            &schema,
            "lane a's run stored its probe",
            &format!(
                "SELECT r.builds FROM work_items w JOIN probe_runs r USING (batch_id)
                  WHERE w.id = {killed_item} AND r.builds IS NOT NULL"
            ),
            deadline,
        );
        a.kill9();
        let c = lane(soak, &db, "c", &outs[2], None);
        Lanes {
            schema,
            outs,
            killed_item,
            lanes: vec![b, c],
        }
    }

    /// Waits for lanes b and c, then checks that every item is done once
    /// (lane a's twice), and that every batch finished with its task's
    /// reference; lane a's was resumed, not begun again.
    fn check(self, soak: &Soak, refs: &References, deadline: Instant) {
        for lane in self.lanes {
            let ended = lane.finish(deadline);
            assert!(ended.status.success(), "{}: {}", ended.name, ended.stderr);
            ended.assert_no_error();
        }
        let db = self.schema.url.as_str();
        let json = |args: &[&str]| -> Value {
            let out = soak.assay_on(db, args).output().unwrap();
            assert!(
                out.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            serde_json::from_slice(&out.stdout).unwrap()
        };
        let items = json(&["queue", "--json"]);
        for item in items.as_array().unwrap() {
            let id = item["id"].as_i64().unwrap();
            let claims = if id == self.killed_item { 2 } else { 1 };
            assert_eq!(
                (&item["state"], &item["claims"], &item["failure"]),
                (&json!("done"), &json!(claims), &Value::Null),
                "{item:#}"
            );
            let batch = item["batch_id"].as_i64().unwrap().to_string();
            let shown = json(&["show", &batch, "--json"]);
            let task = Task::named(shown["task"].as_str().unwrap());
            assert_eq!(
                batch_verdicts(&shown),
                *refs.batch(task),
                "queued batch {batch} ({})",
                task.name()
            );
            if id == self.killed_item {
                assert_eq!(shown["lane"], "a", "the lane that began it");
                let resumes = shown["resumes"].as_array().unwrap();
                assert_eq!(resumes.len(), 1, "{shown:#}");
                assert!(resumes[0]["probed_kept"].as_u64() > Some(0), "{shown:#}");
            }
        }
        let batches = json(&["batches", "--json"]);
        let batches = batches.as_array().unwrap();
        assert_eq!(batches.len(), items.as_array().unwrap().len());
        assert!(
            batches.iter().all(|b| b["status"] == "finished"),
            "{batches:#?}"
        );
        drop(self.outs);
    }
}

#[test]
fn issue_25_the_whole_machine_held_at_once() {
    let form = Form::chosen();
    let soak = Soak::new();
    let started = Instant::now();
    let refs = References::run(&soak);
    let alone = started.elapsed();

    let load = Instant::now();
    let deadline = load + HANG;
    let hogs = Hogs::start(2);
    let schema = Lanes::queue(&soak, form);
    let dbs: Vec<Scratch> = (0..form.databases()).map(|_| Scratch::new()).collect();
    let mut batches = Vec::new();
    for (i, b) in form.batches.iter().enumerate() {
        let name = format!("batch{i}-{}", b.task.name());
        let cmd = soak.assay(&dbs[b.db], &strs(&batch_args(b.task, b.serial)));
        batches.push((b.task, soak.start(&name, cmd)));
    }
    let suite_dbs: Vec<Scratch> = (0..form.suites).map(|_| Scratch::new()).collect();
    let mut suites = Vec::new();
    for (i, db) in suite_dbs.iter().enumerate() {
        let mut args = suite_args();
        args.push("--json".into());
        suites.push(soak.start(&format!("suite{i}"), soak.assay(db, &strs(&args))));
    }
    let lanes = Lanes::start(&soak, schema, deadline);

    for (task, job) in batches {
        let ended = job.finish(deadline);
        assert_eq!(
            batch_verdicts(&ended.result()),
            *refs.batch(task),
            "{}",
            ended.name
        );
    }
    for job in suites {
        let ended = job.finish(deadline);
        assert_eq!(
            suite_verdicts(&ended.result()),
            refs.suite,
            "{}",
            ended.name
        );
    }
    lanes.check(&soak, &refs, deadline);
    let loaded = load.elapsed();
    drop(hogs);

    // Nothing is left running in any store, and no scratch directory.
    for (i, db) in dbs.iter().enumerate() {
        let listed = db.json(&["batches", "--json"]);
        let listed = listed.as_array().unwrap();
        let want = form.batches.iter().filter(|b| b.db == i).count();
        assert_eq!(listed.len(), want, "{listed:#?}");
        assert!(
            listed.iter().all(|b| b["status"] == "finished"),
            "{listed:#?}"
        );
    }
    for db in &suite_dbs {
        let listed = db.json(&["suite", "list", "--json"]);
        assert_eq!(listed.as_array().unwrap().len(), 1, "{listed:#}");
        assert_eq!(listed[0]["status"], "finished", "{listed:#}");
    }
    let left = soak.scratch_dirs_left();
    assert!(left.is_empty(), "scratch directories left: {left:?}");
    eprintln!(
        "soak ({} form): references alone {:.0} s, under load {:.0} s",
        form.name,
        alone.as_secs_f64(),
        loaded.as_secs_f64()
    );
}
