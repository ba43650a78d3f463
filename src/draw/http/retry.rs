//! Whether a failed attempt is tried again, and after how long.

use std::time::Duration;

use super::ending::End;
use crate::draw::pools::PoolConfig;
use crate::support::backoff::{Backoff, Policy};

/// The waits between one request's attempts: under 250 ms, the ceiling
/// doubling to 8 s, jittered so that the slots of a pool that all met the
/// same 429 do not come back at once.
pub(super) const BACKOFF: Policy = Policy::new(Duration::from_millis(250), Duration::from_secs(8));

/// The wait before the attempt after attempt `number`, which ended as
/// `end`; `None` when there is none: the outcome is not worth retrying,
/// `number` was the last attempt, or the server asks for a longer wait
/// than the pool honours. A `Retry-After` longer than the backoff wins.
pub(super) fn wait_before_next(
    end: &End,
    number: u32,
    cfg: &PoolConfig,
    waits: &mut Backoff,
) -> Option<Duration> {
    let worth = end.outcome.is_retryable()
        && number < cfg.max_attempts
        && end
            .retry_after
            .is_none_or(|r| r.as_secs_f64() <= cfg.max_retry_wait_s);
    if !worth {
        return None;
    }
    let backoff = waits.next_wait();
    Some(end.retry_after.map_or(backoff, |r| r.max(backoff)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::draw::Outcome;

    fn cfg() -> PoolConfig {
        toml::from_str(
            "base_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n\
             max_attempts = 4\nmax_retry_wait_s = 10\n",
        )
        .unwrap()
    }

    fn end(outcome: Outcome, retry_after: Option<Duration>) -> End {
        End {
            retry_after,
            outcome,
            ..End::ok()
        }
    }

    #[test]
    fn retry_delays_back_off_and_honour_retry_after() {
        let (cfg, busy) = (cfg(), Outcome::HttpError { status: 503 });
        let mut waits = Backoff::seeded(BACKOFF, 1);
        for number in 1..=3 {
            let wait = wait_before_next(&end(busy, None), number, &cfg, &mut waits).unwrap();
            let ceiling = BACKOFF.ceiling(number);
            assert!(
                wait >= ceiling / 2 && wait < ceiling,
                "attempt {number}: {wait:?}"
            );
        }
        let two_s = Some(Duration::from_secs(2));
        assert_eq!(
            wait_before_next(&end(busy, two_s), 1, &cfg, &mut BACKOFF.start()),
            two_s,
            "Retry-After longer than the backoff"
        );
        let tiny = Some(Duration::from_millis(1));
        let wait = wait_before_next(&end(busy, tiny), 1, &cfg, &mut BACKOFF.start()).unwrap();
        assert!(wait >= BACKOFF.ceiling(1) / 2, "the backoff when longer");
    }

    #[test]
    fn what_is_not_retried() {
        let cfg = cfg();
        let none = |e: End, number| wait_before_next(&e, number, &cfg, &mut BACKOFF.start());
        let busy = Outcome::HttpError { status: 429 };
        assert_eq!(none(end(busy, None), 4), None, "the last attempt");
        assert_eq!(
            none(end(busy, Some(Duration::from_secs(11))), 1),
            None,
            "a wait longer than max_retry_wait_s"
        );
        assert_eq!(
            none(end(busy, Some(Duration::MAX)), 1),
            None,
            "a wait too long to hold"
        );
        let refused = Outcome::HttpError { status: 401 };
        assert_eq!(none(end(refused, None), 1), None, "a refusal");
        assert_eq!(none(end(Outcome::MalformedChunk, None), 1), None);
        assert!(none(end(Outcome::ConnectionError, None), 3).is_some());
    }
}
