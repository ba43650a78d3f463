//! Waits between retries: exponential, capped, with jitter.
//!
//! Everything in assay that waits before trying something remote again (a
//! draw's request, a lane's claim or an item's ending on a store that went
//! away) waits as a [`Policy`] says. The waits come from `backon`: a floor
//! that doubles up to a cap, plus a random share of itself ("equal
//! jitter"), so wait `n` lies in `[c/2, c)` where `c`, the policy's
//! [`Policy::ceiling`], is `first` doubled `n - 1` times, at most `max`.
//! Callers that fail together (every slot of a pool hit by one 429, every
//! lane of a store that restarts) spread out instead of coming back in
//! lockstep, and no wait is longer than the nominal one.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

/// How long to wait before each retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// The ceiling of the first wait.
    first: Duration,
    /// The ceiling of every wait.
    max: Duration,
}

impl Policy {
    /// Waits under `first`, the ceiling doubling up to `max`.
    pub const fn new(first: Duration, max: Duration) -> Policy {
        Policy { first, max }
    }

    /// The ceiling of wait `n` (from 1): every wait lies in
    /// `[ceiling / 2, ceiling)`.
    pub fn ceiling(&self, n: u32) -> Duration {
        let doublings = n.saturating_sub(1).min(31);
        self.first.saturating_mul(1 << doublings).min(self.max)
    }

    /// A fresh sequence of waits.
    pub fn start(&self) -> Backoff {
        Backoff {
            policy: *self,
            waits: self.builder().build(),
            seed: None,
        }
    }

    /// backon adds up to the floor again, so the floor is half the ceiling.
    fn builder(&self) -> ExponentialBuilder {
        ExponentialBuilder::new()
            .with_min_delay(self.first / 2)
            .with_max_delay(self.max / 2)
            .with_factor(2.0)
            .without_max_times()
            .with_jitter()
    }
}

/// The waits of one thing being retried, in order.
#[derive(Debug)]
pub struct Backoff {
    policy: Policy,
    waits: ExponentialBackoff,
    /// The jitter's seed when fixed (tests), else the OS's randomness.
    seed: Option<u64>,
}

impl Backoff {
    /// The next wait.
    pub fn next_wait(&mut self) -> Duration {
        // Without a bound on attempts the sequence never ends.
        self.waits.next().unwrap_or(self.policy.max)
    }

    /// Starts again from the first wait: what was retried succeeded.
    pub fn reset(&mut self) {
        let builder = self.policy.builder();
        self.waits = match self.seed {
            Some(seed) => builder.with_jitter_seed(seed).build(),
            None => builder.build(),
        };
    }

    /// The same waits every run: `policy`'s, jittered from `seed`.
    #[cfg(test)]
    pub(crate) fn seeded(policy: Policy, seed: u64) -> Backoff {
        Backoff {
            policy,
            waits: policy.builder().with_jitter_seed(seed).build(),
            seed: Some(seed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: Policy = Policy::new(Duration::from_millis(250), Duration::from_secs(8));

    #[test]
    fn ceilings_double_up_to_the_cap() {
        let ms: Vec<u128> = (1..=8).map(|n| POLICY.ceiling(n).as_millis()).collect();
        assert_eq!(ms, [250, 500, 1000, 2000, 4000, 8000, 8000, 8000]);
        assert_eq!(POLICY.ceiling(u32::MAX), POLICY.max);
    }

    /// Every wait of a thousand sequences lies in `[c/2, c)`, and the
    /// waits of one retry differ between sequences.
    #[test]
    fn every_wait_lies_between_half_its_ceiling_and_its_ceiling() {
        let mut out_of_bounds = Vec::new();
        let mut firsts = std::collections::BTreeSet::new();
        for seed in 0..1000 {
            let mut b = Backoff::seeded(POLICY, seed);
            for n in 1..=10 {
                let (wait, c) = (b.next_wait(), POLICY.ceiling(n));
                if wait < c / 2 || wait >= c {
                    out_of_bounds.push(format!("seed {seed}, wait {n}: {wait:?}, ceiling {c:?}"));
                }
                if n == 1 {
                    firsts.insert(wait);
                }
            }
        }
        assert!(out_of_bounds.is_empty(), "{}", out_of_bounds.join("\n"));
        assert!(firsts.len() > 900, "jittered: {} distinct", firsts.len());
    }

    #[test]
    fn a_reset_starts_from_the_first_wait() {
        let mut b = Backoff::seeded(POLICY, 7);
        let first = b.next_wait();
        for _ in 0..5 {
            b.next_wait();
        }
        b.reset();
        assert_eq!(b.next_wait(), first);
    }
}
