//! Streaming probe: candidates are probed in waves while the draw is still
//! running, so a batch finishes soon after its last reply instead of a
//! whole probe later.
//!
//! [`Waves`] only decides when a wave starts; the caller probes each wave
//! (in any mode) and stores its verdicts. Candidates arrive over a channel
//! of extracted sources, so the draw that feeds it needs no change: it
//! sends as it goes and closes the channel when done. A wave starts when
//! `size` candidates wait, when the oldest has waited `wait`, or when the
//! channel closes; a wave takes everything waiting, so candidates that
//! arrive while a wave builds go together into the next one.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

/// When a wave starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WavePolicy {
    /// Start a wave once this many candidates wait.
    pub size: usize,
    /// Start a wave once the oldest waiting candidate has waited this long.
    pub wait: Duration,
}

/// A candidate ready to probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamCandidate {
    pub idx: usize,
    pub source: String,
}

/// Groups a channel of candidates into waves.
#[derive(Debug)]
pub struct Waves {
    rx: mpsc::UnboundedReceiver<StreamCandidate>,
    policy: WavePolicy,
    pending: Vec<StreamCandidate>,
    oldest: Option<Instant>,
    closed: bool,
    /// Waves handed out so far.
    pub count: usize,
}

impl Default for WavePolicy {
    /// Big enough that a wave's cargo start-up is small beside its builds,
    /// short enough that a slow pool's replies are not left waiting.
    fn default() -> WavePolicy {
        WavePolicy {
            size: 32,
            wait: Duration::from_secs(3),
        }
    }
}

/// The largest wave size a flag or spec may ask for: beyond it a wave
/// waits for its timer or the end of the draw anyway, so a bigger number
/// is a typo, not a wish.
pub const MAX_WAVE_SIZE: usize = 100_000;

/// The longest a candidate may be asked to wait for its wave.
pub const MAX_WAVE_WAIT: Duration = Duration::from_secs(3600);

impl WavePolicy {
    /// Checks a wave size given by a person; the error says why, for the
    /// caller to put after the flag's or key's name.
    pub fn check_size(size: usize) -> Result<usize, String> {
        if (1..=MAX_WAVE_SIZE).contains(&size) {
            Ok(size)
        } else {
            Err(format!("must be between 1 and {MAX_WAVE_SIZE}"))
        }
    }

    /// Checks a wave wait given in (possibly fractional) seconds. Zero is
    /// refused: every candidate would be a wave of its own, each paying
    /// cargo's start-up.
    pub fn check_wait(secs: f64) -> Result<Duration, String> {
        super::checked_secs(secs, Duration::from_millis(1), MAX_WAVE_WAIT)
    }
}

impl Waves {
    pub fn new(rx: mpsc::UnboundedReceiver<StreamCandidate>, policy: WavePolicy) -> Waves {
        Waves {
            rx,
            policy: WavePolicy {
                size: policy.size.max(1),
                ..policy
            },
            pending: Vec::new(),
            oldest: None,
            closed: false,
            count: 0,
        }
    }

    /// The next wave, or `None` once the channel is closed and drained.
    pub async fn next(&mut self) -> Option<Vec<StreamCandidate>> {
        loop {
            self.take_buffered();
            if self.due() {
                self.count += 1;
                self.oldest = None;
                return Some(std::mem::take(&mut self.pending));
            }
            if self.closed {
                return None;
            }
            let deadline = self.oldest.map(|t| t + self.policy.wait);
            tokio::select! {
                got = self.rx.recv() => match got {
                    Some(candidate) => self.push(candidate),
                    None => self.closed = true,
                },
                _ = sleep_until(deadline), if deadline.is_some() => {}
            }
        }
    }

    fn take_buffered(&mut self) {
        loop {
            match self.rx.try_recv() {
                Ok(candidate) => self.push(candidate),
                Err(mpsc::error::TryRecvError::Empty) => return,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    self.closed = true;
                    return;
                }
            }
        }
    }

    fn push(&mut self, candidate: StreamCandidate) {
        self.oldest.get_or_insert_with(Instant::now);
        self.pending.push(candidate);
    }

    fn due(&self) -> bool {
        !self.pending.is_empty()
            && (self.closed
                || self.pending.len() >= self.policy.size
                || self.oldest.is_some_and(|t| t.elapsed() >= self.policy.wait))
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(idx: usize) -> StreamCandidate {
        StreamCandidate {
            idx,
            source: format!("fn f{idx}() {{}}"),
        }
    }

    fn idxs(wave: Option<Vec<StreamCandidate>>) -> Vec<usize> {
        wave.expect("a wave").iter().map(|c| c.idx).collect()
    }

    #[test]
    fn wave_sizes_and_waits_out_of_range_are_refused() {
        assert_eq!(WavePolicy::check_size(1), Ok(1));
        assert_eq!(WavePolicy::check_size(MAX_WAVE_SIZE), Ok(MAX_WAVE_SIZE));
        for bad in [0, MAX_WAVE_SIZE + 1] {
            assert_eq!(
                WavePolicy::check_size(bad),
                Err("must be between 1 and 100000".to_owned())
            );
        }
        assert_eq!(WavePolicy::check_wait(0.25), Ok(Duration::from_millis(250)));
        assert_eq!(WavePolicy::check_wait(3600.0), Ok(MAX_WAVE_WAIT));
        for bad in [0.0, -1.0, 3600.5, f64::NAN, f64::INFINITY] {
            let err = WavePolicy::check_wait(bad).unwrap_err();
            assert!(err.starts_with("must be between"), "{bad}: {err}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_wave_starts_at_its_size_its_wait_or_the_end() {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut waves = Waves::new(
            rx,
            WavePolicy {
                size: 3,
                wait: Duration::from_secs(5),
            },
        );
        // Everything already waiting goes into one wave, past the size.
        for i in 0..4 {
            tx.send(cand(i)).unwrap();
        }
        assert_eq!(idxs(waves.next().await), [0, 1, 2, 3]);

        // One candidate waits out the timer, alone.
        tx.send(cand(4)).unwrap();
        let started = Instant::now();
        assert_eq!(idxs(waves.next().await), [4]);
        assert_eq!(started.elapsed(), Duration::from_secs(5));

        // Candidates trickling in start a wave when the size is reached.
        let sender = tx.clone();
        tokio::spawn(async move {
            for i in 5..8 {
                tokio::time::sleep(Duration::from_secs(1)).await;
                sender.send(cand(i)).unwrap();
            }
        });
        let started = Instant::now();
        assert_eq!(idxs(waves.next().await), [5, 6, 7]);
        assert_eq!(started.elapsed(), Duration::from_secs(3));

        // Closing the channel flushes the rest, then ends.
        tx.send(cand(8)).unwrap();
        drop(tx);
        assert_eq!(idxs(waves.next().await), [8]);
        assert_eq!(waves.next().await, None);
        assert_eq!(waves.count, 4);
    }
}
