//! Helpers shared by the tests that run the real binary: a scratch
//! directory per test with its own database ([`Scratch`]), the warm work
//! directory every test shares, a way to start `assay` stopped at a test
//! point, and the store and direct SQL on the scratch database.
//!
//! The one place that knows where a test's database is and how to reach
//! it (`Scratch::db`, `store`, `connect`, `sql`, `draw_replies`), so a
//! switch of the tests' database backend happens here.
//!
//! `scripted` holds the repair tests' gateway plumbing; `hosts` starts a
//! lane as a second host that sees none of this one's folders; `json` compares
//! reports, `llama` starts llama.cpp servers, `mbpp` reads MBPP-RS, `net`
//! finds free ports and `pg` gives each test a PostgreSQL schema. Each is
//! declared here once, so the one test binary holds one copy of each
//! helper's statics (one shared llama.cpp server, one schema counter).

#![allow(dead_code)]

pub mod hosts;
pub mod json;
pub mod llama;
pub mod mbpp;
pub mod net;
pub mod pg;
pub mod scripted;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The work directory every test shares (generated packages and their
/// cargo target), under cargo's test tmpdir, so no test rebuilds the
/// dependency tree.
pub fn shared_work_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("assay-work")
}

/// The cargo target directory of the shared work directory.
pub fn shared_target_dir() -> PathBuf {
    shared_work_dir().join("target")
}

/// `--run-timeout` for the fixture suite where a test does not compare it
/// with MultiPL-E's method: its `fx_factorial` spinner runs to the limit
/// four times a run (its `main`, then its three cases alone), 8 s of CPU
/// at 2 s against 20 s at MultiPL-E's 5 s. The fixture's other programs
/// end in milliseconds; 2 s is the margin the bundled tasks' wall limit
/// keeps (docs/testing.md). The fixture's comparisons with the reference
/// method (tests/it/suite.rs) keep the default, which that method shares.
const FIXTURE_RUN_TIMEOUT: &str = "2";

/// The whole fixture suite (tests/fixtures/suite, 40 completions of 20
/// problems).
pub struct FixtureSuite {
    pub problems: String,
    pub completions: String,
    /// Each completion's status by the reference method.
    pub expected: String,
}

impl FixtureSuite {
    pub fn new() -> FixtureSuite {
        let dir = repo().join("tests/fixtures/suite");
        let path = |file: &str| dir.join(file).display().to_string();
        FixtureSuite {
            problems: path("problems.jsonl"),
            completions: path("completions.jsonl"),
            expected: path("expected.jsonl"),
        }
    }

    /// `suite run` of every completion at [`FIXTURE_RUN_TIMEOUT`], then
    /// `extra`.
    pub fn run<'a>(&'a self, extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec![
            "suite",
            "run",
            &self.problems,
            "--completions",
            &self.completions,
            "--run-timeout",
            FIXTURE_RUN_TIMEOUT,
        ];
        args.extend_from_slice(extra);
        args
    }
}

pub fn tiny() -> String {
    repo().join("tests/fixtures/tiny").display().to_string()
}

/// Copies a directory tree (a fixture task, harness included).
pub fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let to = dst.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to);
        } else {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
}

/// Replaces the first `from` in the file with `to`; `from` must be there.
pub fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{} lacks {from:?}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

/// Checks a refusal of `assay args`: exit 2, one line of stderr holding
/// every fragment of `want`, nothing on stdout. Returns the line.
pub fn assert_refused(out: &Output, args: &[&str], want: &[&str]) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?}: not one line: {err}"
    );
    for fragment in want {
        assert!(
            err.contains(fragment),
            "{args:?}: {err:?} lacks {fragment:?}"
        );
    }
    assert!(out.stdout.is_empty(), "{args:?}: printed to stdout");
    err
}

/// The variable that tells a test it runs in the process [`alone`]
/// started for it; its value is the test's name.
const ALONE: &str = "ASSAY_TEST_ALONE";

/// For a test that must have its process to itself (it measures the
/// process's own CPU time, which the other tests' threads would add to):
/// in the shared test process, runs the test `name` (as the harness names
/// it, `module::test`) again in a process of its own, alone, waits for it
/// to pass and returns false; in that process returns true, and the test
/// goes on.
pub fn alone(name: &str) -> bool {
    if std::env::var_os(ALONE).is_some_and(|v| v == name) {
        return true;
    }
    let out = Command::new(std::env::current_exe().expect("the test binary's path"))
        .args([name, "--exact", "--test-threads", "1", "--nocapture"])
        .env(ALONE, name)
        .output()
        .expect("the test binary starts again");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{name}, alone in its process, failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    // A name that matches no test passes too: make sure it ran.
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "{name} did not run alone:\n{stdout}\n{stderr}"
    );
    false
}

/// Build slots per pool (docs/scaling.md) for the `assay` a test starts.
/// Two, not the default of a slot per CPU and one more: the tests share one
/// work directory, and with more slots than two its batches would seldom
/// find their own builds warm; with one, a test's build waits for every
/// other's (60 s of a cold run, docs/testing.md). A batch takes slot 0
/// when it is free and the other only when it is not, so slot 0 is the
/// warm one; a test that must find its builds warm, or must wait for a
/// slot, asks for [`Scratch::one_build_slot`] and never leaves slot 0.
pub const BUILD_SLOTS: usize = 2;

/// A scratch directory with its own database and output folder; `assay`
/// runs in it with the shared work directory (or, from
/// [`Scratch::with_own_work_dir`], one of its own).
pub struct Scratch {
    pub dir: tempfile::TempDir,
    /// `assay`'s work directory here: the shared one, or one of its own.
    work: Option<PathBuf>,
    /// `ASSAY_BUILD_SLOTS` for every `assay` started here.
    build_slots: usize,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().unwrap(),
            work: None,
            build_slots: BUILD_SLOTS,
        }
    }

    /// This scratch's `assay` builds in one slot of each pool of its work
    /// directory, slot 0, waiting while another test holds it: for a test
    /// whose second batch must find the first one's builds warm, or whose
    /// run must wait for a lock another holds.
    pub fn one_build_slot(mut self) -> Scratch {
        self.build_slots = 1;
        self
    }

    /// A scratch directory whose `assay` works in a work directory of its
    /// own (`work/` inside it), not the shared one: for a test that builds
    /// suites only. A suite's package has no dependency, so nothing warm
    /// is lost, and its builds wait on no other test's cargo lock and hold
    /// up none. One build slot: a second copy of its target would be
    /// built cold (`suite_hostile` took longer so).
    pub fn with_own_work_dir() -> Scratch {
        let mut scratch = Scratch::new().one_build_slot();
        scratch.work = Some(scratch.join("work"));
        scratch
    }

    /// The work directory `assay` runs with here.
    pub fn work_dir(&self) -> PathBuf {
        self.work.clone().unwrap_or_else(shared_work_dir)
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `name` inside the scratch directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path().join(name)
    }

    /// Writes `text` to `name` inside the scratch directory.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// The tiny task, harness included, copied into the scratch
    /// directory as `task/`, to be changed.
    pub fn tiny_copy(&self) -> PathBuf {
        let dst = self.path().join("task");
        copy_dir(Path::new(&tiny()), &dst);
        dst
    }

    /// A problem set of one problem (the fixture suite's first) with two
    /// completions, one right, one wrong: a suite that runs in seconds.
    /// Returns the problems' and the completions' paths.
    pub fn small_suite(&self) -> (String, String) {
        let fixture = repo().join("tests/fixtures/suite");
        let first = |file: &str, lines: usize| -> String {
            std::fs::read_to_string(fixture.join(file))
                .unwrap()
                .lines()
                .take(lines)
                .map(|l| format!("{l}\n"))
                .collect()
        };
        let problems = self.write("problems.jsonl", &first("problems.jsonl", 1));
        let completions = self.write("completions.jsonl", &first("completions.jsonl", 2));
        (
            problems.display().to_string(),
            completions.display().to_string(),
        )
    }

    /// The scratch database, as `ASSAY_DB` names it to every command.
    pub fn db(&self) -> PathBuf {
        self.join("assay.db")
    }

    /// Sets `cmd` up as `assay` runs here: in the scratch directory, with
    /// its database and its work directory, and none of the
    /// variables from the test's own environment that would change a run
    /// (logging, a test point, an output folder, the draw's settings). For
    /// a command that starts `assay` itself (`/usr/bin/time`, `cargo run`).
    /// [`BUILD_SLOTS`] build slots (`ASSAY_BUILD_SLOTS`), or one
    /// ([`Scratch::one_build_slot`]).
    pub fn prepare<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        cmd.current_dir(self.path())
            .env("ASSAY_DB", self.db())
            .env("ASSAY_WORK_DIR", self.work_dir())
            .env("ASSAY_BUILD_SLOTS", self.build_slots.to_string())
            .env_remove("RUST_LOG")
            .env_remove("ASSAY_TEST_POINT")
            .env_remove("ASSAY_OUT")
            .env_remove("NEV_MODEL_API_KEY")
            .env_remove("NEV_CANDIDATES")
            .env_remove("NEV_CONCURRENCY")
            .env_remove("MAX_COMPLETION_TOKENS")
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_assay"));
        cmd.args(args);
        self.prepare(&mut cmd);
        cmd
    }

    pub fn assay(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("assay starts")
    }

    pub fn assay_ok(&self, args: &[&str]) -> String {
        let out = self.assay(args);
        assert!(
            out.status.success(),
            "assay {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let text = self.assay_ok(args);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    }

    /// `assay run SPEC --json`, which must succeed; returns the batch id.
    pub fn run_batch(&self, spec: &Path) -> String {
        let summary = self.json(&["run", &spec.display().to_string(), "--json"]);
        summary["batch_id"].as_i64().unwrap().to_string()
    }

    /// Starts `assay` with a test point armed and returns once it has
    /// reached it (its stderr says so).
    pub fn start_at(&self, point: &str, args: &[&str]) -> Stopped {
        Scratch::start_command_at(self.command(args), point)
    }

    /// [`Scratch::start_at`] for a command set up by the caller.
    pub fn start_command_at(mut cmd: Command, point: &str) -> Stopped {
        let mut child = cmd
            .env("ASSAY_TEST_POINT", point)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("assay starts");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut seen = Vec::new();
        loop {
            match rx.recv_timeout(Duration::from_secs(300)) {
                Ok(line) if line.starts_with("assay-test: ") => {
                    return Stopped {
                        child,
                        stderr: rx,
                        seen,
                    }
                }
                Ok(line) => seen.push(line),
                Err(_) => {
                    let _ = child.kill();
                    let status = child.wait().unwrap();
                    panic!(
                        "assay never reached {point} ({status}):\n{}",
                        seen.join("\n")
                    );
                }
            }
        }
    }

    /// The store on the scratch database (which must exist), as `assay`
    /// opens it.
    pub async fn store(&self) -> assay::store::Store {
        assay::store::Store::open(&self.db()).await.unwrap()
    }

    /// Creates the scratch database, empty but for its schema, as the
    /// first `run` would (reading commands never create one).
    pub fn create_empty_db(&self) {
        block_on(async {
            assay::store::Store::open(&self.db())
                .await
                .expect("a new database opens")
                .close()
                .await
        });
    }

    /// The replies a batch's draw stored, in the store's order.
    pub fn draw_replies(&self, batch: i64) -> Vec<assay::draw::Drawn> {
        block_on(async {
            let store = self.store().await;
            let replies = store.draw_replies(batch).await.unwrap();
            store.close().await;
            replies
        })
    }

    /// A second connection to the database file, as another process would
    /// open one, for SQL the store has no method for. Close it when done.
    pub async fn connect(&self) -> sqlx::SqlitePool {
        let options = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(self.db())
            .busy_timeout(Duration::from_secs(10));
        sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .unwrap()
    }

    /// Runs SQL against the database file over [`Scratch::connect`], from
    /// a test that is not async.
    pub fn sql<T>(&self, f: impl AsyncFnOnce(&sqlx::SqlitePool) -> T) -> T {
        block_on(async {
            let pool = self.connect().await;
            let out = f(&pool).await;
            pool.close().await;
            out
        })
    }
}

/// Runs `f` to its end on a runtime of its own (the tests that call this
/// are not async).
fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// An `assay` process held at a test point.
pub struct Stopped {
    pub child: Child,
    stderr: mpsc::Receiver<String>,
    pub seen: Vec<String>,
}

/// A test that fails while holding a process at a point must not leave it
/// paused (holding, say, a task package's lock) after the test is gone.
impl Drop for Stopped {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Stopped {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY: kill only sends a signal to our own child.
        assert_eq!(unsafe { libc::kill(self.pid(), signal) }, 0);
    }

    /// SIGKILLs the process and reaps it.
    pub fn kill9(mut self) {
        self.signal(libc::SIGKILL);
        let status = self.child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
    }

    /// Every line the process wrote to stderr after the test point, up to
    /// its end of file: the reader thread ends (and drops its sender) once
    /// the last writer of the pipe is gone, so no line is lost.
    fn rest_of_stderr(&self) -> String {
        let mut lines = Vec::new();
        loop {
            match self.stderr.recv_timeout(Duration::from_secs(120)) {
                Ok(line) => lines.push(line),
                Err(mpsc::RecvTimeoutError::Disconnected) => return lines.join("\n"),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("stderr still open 120 s after assay ended: {lines:?}")
                }
            }
        }
    }

    /// Waits for the line `wanted` (a substring) on stderr; panics naming
    /// what it saw if the process ends or says nothing for `limit`.
    pub fn wait_for_line(&mut self, wanted: &str, limit: Duration) -> String {
        loop {
            match self.stderr.recv_timeout(limit) {
                Ok(line) if line.contains(wanted) => return line,
                Ok(line) => self.seen.push(line),
                Err(e) => panic!("no line with {wanted:?} ({e}): {:?}", self.seen),
            }
        }
    }

    /// Waits for the process to end; returns its status and the rest of
    /// its stderr.
    pub fn wait(mut self, limit: Duration) -> (std::process::ExitStatus, String) {
        let start = std::time::Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status, self.rest_of_stderr());
            }
            if start.elapsed() > limit {
                let _ = self.child.kill();
                panic!("assay did not end within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
