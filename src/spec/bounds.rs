//! The ranges a number given by a person (a spec's key, a flag) is held
//! to, in one place, so that a spec's key and the flag that overrides it
//! refuse the same values in the same words. A check's error says why, for
//! the caller to put after the key's or flag's name.

use std::time::Duration;

/// The most CPU seconds a spec may give one target's compile.
pub const MAX_COMPILE_CPU_S: u64 = 3600;
/// The least and most memory a spec may give one target's compile, in MiB.
pub const MIN_COMPILE_MEMORY_MB: u64 = 256;
pub const MAX_COMPILE_MEMORY_MB: u64 = 1 << 20;

/// Processes one scoring run may hold at once unless the spec says.
pub const DEFAULT_PROCESSES: u64 = 32;

/// The most candidates one batch may ask for (the spec's `draw.n`, `-n`).
pub const MAX_CANDIDATES: usize = 1_000_000;
/// The longest wall-time limit of a run or a case: one day.
pub const MAX_WALL_MS: u64 = 86_400_000;
/// The most processes a run may hold: the kernel's own ceiling for a pids
/// cgroup (`PID_MAX_LIMIT` on 64-bit), which refuses more.
pub const MAX_PROCESSES: u64 = 4_194_304;
/// The largest memory limit of a run: 16 TiB, so that the limit in bytes
/// (and any sum of it) fits in a u64 with room to spare.
pub const MAX_MEMORY_MB: u64 = 16 << 20;

/// The longest per-build time limit a flag or spec may set (a day): past
/// it, a stuck build is not worth waiting for.
pub const MAX_BUILD_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// The largest wave size a flag or spec may ask for: beyond it a wave
/// waits for its timer or the end of the draw anyway, so a bigger number
/// is a typo, not a wish.
pub const MAX_WAVE_SIZE: usize = 100_000;

/// The longest a candidate may be asked to wait for its wave.
pub const MAX_WAVE_WAIT: Duration = Duration::from_secs(3600);

/// The most repair rounds a batch may run (`[repair] rounds`, `--rounds`):
/// past a few rounds the self-repair literature finds nothing left to
/// gain, so a larger number is a typo.
pub const MAX_ROUNDS: u64 = 50;

/// The most parents of one kind a round may repair.
pub const MAX_PARENTS: u64 = 10_000;

/// The most compiler errors or failed cases one prompt may show.
pub const MAX_FEEDBACK_ITEMS: u64 = 100;

/// The most characters of compiler errors one prompt may carry.
pub const MAX_ERROR_CHARS: u64 = 100_000;

/// The most characters of one case's value one prompt may carry.
pub const MAX_CASE_CHARS: u64 = 100_000;

/// The largest output-token budget a run may be given (`--max-tokens`).
pub const MAX_TOKEN_BUDGET: u64 = 1 << 50;

/// A number of repair rounds is between 0 (none) and [`MAX_ROUNDS`].
pub fn check_rounds(rounds: u64) -> Result<u32, String> {
    in_range(rounds, 0, MAX_ROUNDS).map(|r| r as u32)
}

/// An output-token budget is between 1 and [`MAX_TOKEN_BUDGET`].
pub fn check_token_budget(tokens: u64) -> Result<u64, String> {
    in_range(tokens, 1, MAX_TOKEN_BUDGET)
}

/// A batch's number of candidates is between 1 and [`MAX_CANDIDATES`].
pub fn check_candidates(n: usize) -> Result<usize, String> {
    in_range(n as u64, 1, MAX_CANDIDATES as u64).map(|_| n)
}

/// The shortest and longest lease a lane may hold its claims under
/// (`lane --lease`): under 3 s a renewal every third of it is busier than
/// the work; past a day a dead lane's work waits too long.
pub const MIN_LEASE: Duration = Duration::from_secs(3);
pub const MAX_LEASE: Duration = Duration::from_secs(86_400);

/// The shortest and longest wall time one run of a suite's program may be
/// given (`suite run --run-timeout`).
pub const MIN_RUN_TIMEOUT: Duration = Duration::from_millis(100);
pub const MAX_RUN_TIMEOUT: Duration = Duration::from_secs(3600);

/// A lane runs at least one item at once (`lane --jobs`).
pub fn check_jobs(jobs: usize) -> Result<usize, String> {
    at_least_one(jobs, "at least 1")
}

/// A lane's lease, in (possibly fractional) seconds, between
/// [`MIN_LEASE`] and [`MAX_LEASE`].
pub fn check_lease(secs: f64) -> Result<Duration, String> {
    checked_secs(secs, MIN_LEASE, MAX_LEASE).map_err(|_| {
        format!(
            "from {} to {} seconds",
            MIN_LEASE.as_secs(),
            MAX_LEASE.as_secs()
        )
    })
}

/// One run of a suite's program, in (possibly fractional) seconds,
/// between [`MIN_RUN_TIMEOUT`] and [`MAX_RUN_TIMEOUT`].
pub fn check_run_timeout(secs: f64) -> Result<Duration, String> {
    checked_secs(secs, MIN_RUN_TIMEOUT, MAX_RUN_TIMEOUT)
}

/// A replay runs each mode at least once (`replay --runs`).
pub fn check_runs(runs: usize) -> Result<usize, String> {
    at_least_one(runs, "must be at least 1")
}

/// A queued suite's part holds at least one problem (`suite run --chunk`).
pub fn check_chunk(problems: usize) -> Result<usize, String> {
    at_least_one(problems, "at least 1 problem")
}

/// pass@k is asked of at least one completion (`suite compare -k`).
pub fn check_pass_k(k: usize) -> Result<usize, String> {
    at_least_one(k, "must be at least 1")
}

/// Checks a per-build time limit given by a person, in (possibly
/// fractional) seconds; the error says why, for the caller to put after the
/// flag's or key's name.
pub fn check_build_timeout(secs: f64) -> Result<Duration, String> {
    checked_secs(secs, Duration::from_secs(1), MAX_BUILD_TIMEOUT)
}

fn at_least_one(value: usize, why: &str) -> Result<usize, String> {
    if value >= 1 {
        Ok(value)
    } else {
        Err(why.to_owned())
    }
}

pub(super) fn in_range(value: u64, min: u64, max: u64) -> Result<u64, String> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(format!("must be between {min} and {max}"))
    }
}

/// `secs` as a duration if it lies in `min..=max` (NaN and infinities do
/// not).
pub(super) fn checked_secs(secs: f64, min: Duration, max: Duration) -> Result<Duration, String> {
    if secs >= min.as_secs_f64() && secs <= max.as_secs_f64() {
        Ok(Duration::from_secs_f64(secs))
    } else {
        Err(format!(
            "must be between {} and {} seconds",
            min.as_secs_f64(),
            max.as_secs_f64()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flags checked here refuse in the words the binary has always
    /// printed after the flag's name.
    #[test]
    fn the_flags_bounds_refuse_in_their_own_words() {
        assert_eq!(check_jobs(0), Err("at least 1".to_owned()));
        assert_eq!(check_jobs(4), Ok(4));
        assert_eq!(check_runs(0), Err("must be at least 1".to_owned()));
        assert_eq!(check_chunk(0), Err("at least 1 problem".to_owned()));
        assert_eq!(check_pass_k(0), Err("must be at least 1".to_owned()));
        assert_eq!(check_lease(60.0), Ok(Duration::from_secs(60)));
        for bad in [2.9, 86_400.5, f64::NAN, f64::INFINITY, -1.0] {
            assert_eq!(
                check_lease(bad),
                Err("from 3 to 86400 seconds".to_owned()),
                "{bad}"
            );
        }
        assert_eq!(check_run_timeout(0.1), Ok(Duration::from_millis(100)));
        for bad in [0.05, 3600.5, f64::NAN] {
            assert_eq!(
                check_run_timeout(bad),
                Err("must be between 0.1 and 3600 seconds".to_owned()),
                "{bad}"
            );
        }
    }

    #[test]
    fn build_timeouts_out_of_range_are_refused() {
        assert_eq!(check_build_timeout(600.0), Ok(Duration::from_secs(600)));
        assert_eq!(check_build_timeout(1.5), Ok(Duration::from_millis(1500)));
        for bad in [0.0, 0.5, -3.0, 86_401.0, f64::NAN, f64::INFINITY] {
            assert_eq!(
                check_build_timeout(bad),
                Err("must be between 1 and 86400 seconds".to_owned()),
                "{bad}"
            );
        }
    }
}
