//! Test points: named places in the pipeline where a test can stop a batch.
//!
//! For tests only. `ASSAY_TEST_POINT=ACTION@NAME` (or `ACTION@NAME#K` for
//! the K-th time the point is passed, counting from 1) makes the process
//! print `assay-test: ACTION at NAME#K` on stderr when it gets there, then:
//!
//! - `pause`: wait forever, the way a slow stage would; a Ctrl-C still stops
//!   the batch cleanly. Tests use it to SIGKILL or SIGINT the process at a
//!   known point.
//! - `stall`: block the thread forever, the way a stage stuck in a system
//!   call would; only a second Ctrl-C (or a kill) ends the process.
//! - `kill`: go on, but SIGKILL the next nested cargo build's process group
//!   as soon as it starts, the way the OOM killer would (only at points
//!   before a build: `probe.build`).
//! - `hold`: go on, but stop (SIGSTOP) the next nested cargo build's process
//!   group as soon as it starts, print `assay-test: holding build PGID`, and
//!   wait forever: a build that is certainly still running when the test
//!   interrupts or kills assay (only at points before a build).
//!
//! Unset, a point costs one comparison against a value read once. The names
//! are listed in docs/crash-safety.md; they are not part of the interface.
//!
//! Only a build with the feature `test-points` reads the variable: the
//! tests' and benches' (`cargo test` builds the binary they run with it,
//! through the package's dev-dependency on itself), never `cargo build`'s
//! or `cargo run`'s, where every point is a no-op the optimiser removes.
//! The code is compiled and type-checked either way.
//!
//! Why not the `fail` crate's fail points: its `pause` blocks the thread
//! (this module's `stall`), while `pause` here awaits a future that never
//! ends, so a Ctrl-C still cancels the batch cleanly; and `kill` and
//! `hold` act on the next cargo build's process group, which no fail
//! action does. Through `fail`, each point would be a `return(ACTION)`
//! read back and acted on here, and `ASSAY_TEST_POINT` translated into its
//! syntax (`K-1*off->1*return(pause)` for `#K`) and announced with its
//! count: a wrapper as large as this module, plus a global registry.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use rustix::process::{Pid, Signal};

/// The variable that arms a test point.
pub const VAR: &str = "ASSAY_TEST_POINT";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Pause,
    Stall,
    Kill,
    Hold,
}

/// Set by a `kill` point; taken by the next nested cargo build.
static KILL_NEXT_BUILD: AtomicBool = AtomicBool::new(false);

/// Set by a `hold` point; taken by the next nested cargo build.
static HOLD_NEXT_BUILD: AtomicBool = AtomicBool::new(false);

#[derive(Debug)]
struct Armed {
    action: Action,
    name: String,
    nth: usize,
    seen: Mutex<HashMap<String, usize>>,
}

fn armed() -> Option<&'static Armed> {
    // Without the feature nothing is ever armed, so every point below
    // folds away.
    if !cfg!(feature = "test-points") {
        return None;
    }
    static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
    ARMED
        .get_or_init(|| parse(&std::env::var(VAR).ok()?))
        .as_ref()
}

fn parse(value: &str) -> Option<Armed> {
    let (action, point) = value.split_once('@')?;
    let action = match action {
        "pause" => Action::Pause,
        "stall" => Action::Stall,
        "kill" => Action::Kill,
        "hold" => Action::Hold,
        _ => return None,
    };
    let (name, nth) = match point.split_once('#') {
        Some((name, nth)) => (name, nth.parse().ok()?),
        None => (point, 1),
    };
    Some(Armed {
        action,
        name: name.to_owned(),
        nth,
        seen: Mutex::default(),
    })
}

/// The action armed for this passage of `name`, if any.
fn matched(name: &str) -> Option<(Action, usize)> {
    let armed = armed()?;
    if armed.name != name {
        return None;
    }
    let mut seen = armed.seen.lock().unwrap_or_else(|e| e.into_inner());
    let count = seen.entry(name.to_owned()).or_insert(0);
    *count += 1;
    (*count == armed.nth).then_some((armed.action, *count))
}

fn announce(action: Action, name: &str, nth: usize) {
    let word = match action {
        Action::Pause => "pause",
        Action::Stall => "stall",
        Action::Kill => "kill",
        Action::Hold => "hold",
    };
    eprintln!("assay-test: {word} at {name}#{nth}");
}

/// Passes the point `name` in async code.
pub async fn reached(name: &str) {
    if let Some((action, nth)) = matched(name) {
        announce(action, name, nth);
        match action {
            Action::Pause => std::future::pending::<()>().await,
            Action::Stall => stall(),
            Action::Kill => KILL_NEXT_BUILD.store(true, Ordering::SeqCst),
            Action::Hold => HOLD_NEXT_BUILD.store(true, Ordering::SeqCst),
        }
    }
}

/// Whether a `kill` point asked for the build about to start to be killed;
/// asks only once.
pub fn take_kill_next_build() -> bool {
    cfg!(feature = "test-points") && KILL_NEXT_BUILD.swap(false, Ordering::SeqCst)
}

/// Passes the point `name` in code that cannot wait (a callback): `pause`
/// and `stall` block the thread.
pub fn reached_blocking(name: &str) {
    if let Some((action, nth)) = matched(name) {
        announce(action, name, nth);
        match action {
            Action::Pause | Action::Stall => stall(),
            Action::Kill => KILL_NEXT_BUILD.store(true, Ordering::SeqCst),
            Action::Hold => HOLD_NEXT_BUILD.store(true, Ordering::SeqCst),
        }
    }
}

/// Holds the build just started (process group `pgid`) if a `hold` point
/// asked for it: stops it and never returns. Asks only once.
pub async fn hold_build(pgid: u32) {
    if cfg!(feature = "test-points") && HOLD_NEXT_BUILD.swap(false, Ordering::SeqCst) {
        if let Some(group) = i32::try_from(pgid).ok().and_then(Pid::from_raw) {
            let _ = rustix::process::kill_process_group(group, Signal::STOP);
        }
        eprintln!("assay-test: holding build {pgid}");
        std::future::pending::<()>().await;
    }
}

fn stall() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_or_are_ignored() {
        let a = parse("pause@draw.reply#3").unwrap();
        assert_eq!(
            (a.action, a.name.as_str(), a.nth),
            (Action::Pause, "draw.reply", 3)
        );
        let a = parse("stall@persist").unwrap();
        assert_eq!(
            (a.action, a.name.as_str(), a.nth),
            (Action::Stall, "persist", 1)
        );
        let a = parse("kill@probe.build#2").unwrap();
        assert_eq!(
            (a.action, a.name.as_str(), a.nth),
            (Action::Kill, "probe.build", 2)
        );
        let a = parse("hold@probe.build").unwrap();
        assert_eq!(
            (a.action, a.name.as_str(), a.nth),
            (Action::Hold, "probe.build", 1)
        );
        for bad in ["", "persist", "explode@persist", "pause@x#y"] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }
}
