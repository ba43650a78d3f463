//! The reference method: MultiPL-E's Rust evaluation as every
//! MultiPL-E-derived harness runs it (MultiPL-E's `eval_rust.py` and
//! `main.py`, bigcode-evaluation-harness's copy of them), ported here so
//! that the bench and the tests can run it without Python.
//!
//! - The program is `prompt + completion + "\n" + tests`, the completion
//!   cut at the first occurrence of any stop token (`stop_at_stop_token`,
//!   done by MultiPL-E at generation time).
//! - Each program is written to a temporary directory and built alone by
//!   `rustc --edition 2021 main.rs -o main` (no `-O`: debug assertions and
//!   overflow checks on), with a 15 s limit; then `main` is run with a 5 s
//!   limit, stdin closed, and its process group killed at the limit.
//!   MultiPL-E's own `rustc PATH -o EXE` names no edition, so its
//!   published figures are edition 2015's; [`evaluate_in`] builds in any
//!   edition, [`evaluate`] in 2021, assay's default.
//! - Status: rustc failed -> `SyntaxError`; a limit passed -> `Timeout`;
//!   exit 0 -> `OK`; anything else (a panic's 101, a signal) -> `Exception`.
//!
//! Shared by bench/suite.rs and tests/it/suite.rs (through `#[path]`). It
//! deliberately does not use `assay::suite::program`, so that the tests can
//! check that module against it.

#![allow(dead_code)]

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use assay::suite::Status;

pub const COMPILE_TIMEOUT: Duration = Duration::from_secs(15);
pub const RUN_TIMEOUT: Duration = Duration::from_secs(5);

/// MultiPL-E's `stop_at_stop_token`, then its `cached_eval_script`
/// concatenation.
pub fn multiple_program(
    prompt: &str,
    completion: &str,
    tests: &str,
    stop_tokens: &[String],
) -> String {
    let mut min_stop_index = completion.len();
    for stop_token in stop_tokens {
        if let Some(stop_index) = completion.find(stop_token.as_str()) {
            if stop_index < min_stop_index {
                min_stop_index = stop_index;
            }
        }
    }
    format!("{prompt}{}\n{tests}", &completion[..min_stop_index])
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Exited(i32),
    Signalled(i32),
    TimedOut,
}

/// Runs `cmd` in its own process group with `stdin` fed and stdout kept
/// (up to 1 MiB; stderr discarded), killing the whole group at `limit`.
pub fn run_limited(cmd: &mut Command, stdin: &[u8], limit: Duration) -> (End, Vec<u8>) {
    let mut child = cmd
        .stdin(if stdin.is_empty() {
            Stdio::null()
        } else {
            Stdio::piped()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    if let Some(mut pipe) = child.stdin.take() {
        use std::io::Write;
        // A child that exits before reading closes the pipe; that is its own
        // outcome, not ours (Rust ignores SIGPIPE, so this is an error).
        let _ = pipe.write_all(stdin);
    }
    let mut out = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 8192];
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 {
                break;
            }
            if kept.len() < 1 << 20 {
                kept.extend_from_slice(&buf[..n]);
            }
        }
        kept
    });
    let pgid = child.id() as i32;
    let deadline = Instant::now() + limit;
    let end = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break match (status.code(), status.signal()) {
                (Some(code), _) => End::Exited(code),
                (None, Some(sig)) => End::Signalled(sig),
                (None, None) => End::Signalled(0),
            };
        }
        if Instant::now() >= deadline {
            break End::TimedOut;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // As MultiPL-E's safe_subprocess: the group goes, whatever happened.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    let _ = child.wait();
    (end, reader.join().unwrap_or_default())
}

/// One program, MultiPL-E's way, in its own temporary directory under
/// `scratch`, as edition 2021.
pub fn evaluate(program: &str, scratch: &Path) -> Status {
    evaluate_in(program, scratch, "2021")
}

/// [`evaluate`] with `rustc --edition EDITION` (`2015` is MultiPL-E's own).
pub fn evaluate_in(program: &str, scratch: &Path, edition: &str) -> Status {
    let dir = tempfile::tempdir_in(scratch).expect("temporary directory");
    std::fs::write(dir.path().join("main.rs"), program).expect("write main.rs");
    let mut rustc = Command::new("rustc");
    rustc
        .args(["--edition", edition, "main.rs", "-o", "main"])
        .current_dir(dir.path());
    match run_limited(&mut rustc, b"", COMPILE_TIMEOUT).0 {
        End::Exited(0) => {}
        End::TimedOut => return Status::Timeout,
        _ => return Status::SyntaxError,
    }
    let mut main = Command::new(dir.path().join("main"));
    main.current_dir(dir.path());
    match run_limited(&mut main, b"", RUN_TIMEOUT).0 {
        End::Exited(0) => Status::Ok,
        End::TimedOut => Status::Timeout,
        _ => Status::Exception,
    }
}

/// `f` over `items` on `workers` threads, results in input order.
pub fn pool<T: Sync, R: Send>(items: &[T], workers: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..workers.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                results.lock().unwrap()[i] = Some(r);
            });
        }
    });
    results
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|r| r.expect("every item ran"))
        .collect()
}

/// The reference method over many programs: one worker per CPU.
pub fn evaluate_all(programs: &[String], scratch: &Path) -> Vec<Status> {
    pool(programs, cpus(), |p| evaluate(p, scratch))
}

pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
