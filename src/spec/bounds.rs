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

/// Checks a per-build time limit given by a person, in (possibly
/// fractional) seconds; the error says why, for the caller to put after the
/// flag's or key's name.
pub fn check_build_timeout(secs: f64) -> Result<Duration, String> {
    checked_secs(secs, Duration::from_secs(1), MAX_BUILD_TIMEOUT)
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
