//! What a shared rustc may spend before its group is split: a CPU budget
//! drawn from what honest groups of this package cost, not from the
//! per-unit limit.
//!
//! A group's rustc is held to [`super::scaled`] limits, which grow with
//! the group so that a compile bomb needs many honest units' worth before
//! it stops the crate. Waiting that long, then for each half it is in,
//! made one slow unit cost its wave minutes (issue 37). A budget stops a
//! group that spends far more than groups of its size have spent here, and
//! the group is then split (never blamed): only a unit built alone gets a
//! verdict, under its own per-unit limits, so a budget can cost time but
//! never change a verdict.
//!
//! The honest rate is the highest CPU time per unit any group that built
//! has cost in this package (rustc and its linker, as the compile wrapper
//! measures them), kept in the package's folder across runs. A group's
//! budget is [`MARGIN`] times that rate for its size, at least
//! [`FLOOR_SECS`], never above its scaled limit. Before anything is known,
//! a group may spend what one unit alone may: an honest group costs a
//! small fraction of that.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::spec::CompileLimits;

/// How many times the highest honest rate a group may spend: room for a
/// unit several times heavier than any before it, and for a loaded
/// machine's slower caches, so that honest groups do not overrun.
const MARGIN: f64 = 3.0;

/// No group's budget is below this: a crate's fixed cost (std's prelude,
/// its `main`, the link) is paid once whatever its size.
const FLOOR_SECS: u64 = 2;

/// The file in the package's folder that keeps the honest rate.
const RATE_FILE: &str = "honest-compile-rate";

/// The budgets of one package's shared builds.
#[derive(Debug)]
pub struct Budgets {
    /// CPU seconds per unit, the highest an honest group has cost.
    rate: Mutex<Option<f64>>,
    file: PathBuf,
}

impl Budgets {
    /// The budgets of the package in `dir`, with the rate its earlier
    /// builds left there.
    pub fn of_package(dir: &Path) -> Budgets {
        let file = dir.join(RATE_FILE);
        let rate = std::fs::read_to_string(&file)
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|r| r.is_finite() && *r > 0.0);
        Budgets {
            rate: Mutex::new(rate),
            file,
        }
    }

    /// The CPU seconds a rustc of `units` units may spend, where a unit
    /// alone gets `one` and the group's scaled limit is `cap`.
    pub fn cpu_secs(&self, units: usize, one: CompileLimits, cap: CompileLimits) -> u64 {
        if units <= 1 {
            return one.cpu_secs;
        }
        let rate = *self.rate.lock().unwrap_or_else(|e| e.into_inner());
        let budget = match rate {
            None => one.cpu_secs,
            // To the millisecond first, so that 12.000000000000002 s is 12.
            Some(rate) => {
                let millis = (MARGIN * rate * units as f64 * 1000.0).round();
                ((millis / 1000.0).ceil() as u64).max(FLOOR_SECS)
            }
        };
        budget.min(cap.cpu_secs)
    }

    /// Whether an honest group's cost is known: until then a group may
    /// spend one unit's limit.
    pub fn known(&self) -> bool {
        self.rate
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Learns from a group of `units` that built, spending `cpu_secs`.
    pub fn observe(&self, units: usize, cpu_secs: f64) {
        if units <= 1 || !cpu_secs.is_finite() || cpu_secs <= 0.0 {
            return;
        }
        let seen = cpu_secs / units as f64;
        let mut rate = self.rate.lock().unwrap_or_else(|e| e.into_inner());
        if rate.is_some_and(|r| r >= seen) {
            return;
        }
        *rate = Some(seen);
        // Best effort: a rate not kept is learned again next time.
        let tmp = self.file.with_extension("tmp");
        if std::fs::write(&tmp, format!("{seen}\n")).is_ok() {
            let _ = std::fs::rename(&tmp, &self.file);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: CompileLimits = CompileLimits {
        cpu_secs: 15,
        memory_bytes: 1 << 30,
    };

    fn cap(cpu_secs: u64) -> CompileLimits {
        CompileLimits { cpu_secs, ..ONE }
    }

    #[test]
    fn before_anything_is_known_a_group_may_spend_what_one_unit_may() {
        let dir = tempfile::tempdir().unwrap();
        let budgets = Budgets::of_package(dir.path());
        assert_eq!(budgets.cpu_secs(40, ONE, cap(73)), 15);
        assert_eq!(budgets.cpu_secs(1, ONE, cap(15)), 15);
        assert_eq!(budgets.cpu_secs(2, ONE, cap(9)), 9, "never above the cap");
    }

    #[test]
    fn the_budget_follows_the_highest_honest_rate_and_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let budgets = Budgets::of_package(dir.path());
        budgets.observe(40, 4.0);
        assert_eq!(budgets.cpu_secs(40, ONE, cap(73)), 12);
        assert_eq!(budgets.cpu_secs(5, ONE, cap(21)), FLOOR_SECS);
        budgets.observe(10, 0.5);
        assert_eq!(
            budgets.cpu_secs(40, ONE, cap(73)),
            12,
            "a cheaper group lowers nothing"
        );
        budgets.observe(10, 2.0);
        assert_eq!(budgets.cpu_secs(40, ONE, cap(73)), 24);
        assert_eq!(
            budgets.cpu_secs(1, ONE, cap(15)),
            15,
            "a unit alone: its own limit"
        );

        let again = Budgets::of_package(dir.path());
        assert_eq!(again.cpu_secs(40, ONE, cap(73)), 24);
        assert_eq!(again.cpu_secs(400, ONE, cap(613)), 240);
    }

    #[test]
    fn nothing_is_learned_from_a_unit_alone_or_a_nonsense_figure() {
        let dir = tempfile::tempdir().unwrap();
        let budgets = Budgets::of_package(dir.path());
        budgets.observe(1, 9.0);
        budgets.observe(4, f64::NAN);
        budgets.observe(4, 0.0);
        assert_eq!(budgets.cpu_secs(40, ONE, cap(73)), 15);
        std::fs::write(dir.path().join(RATE_FILE), "not a rate").unwrap();
        assert_eq!(
            Budgets::of_package(dir.path()).cpu_secs(40, ONE, cap(73)),
            15
        );
    }
}
