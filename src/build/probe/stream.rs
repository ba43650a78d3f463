//! Streaming probe: candidates are probed in waves while the draw is still
//! running, so a batch finishes soon after its last reply instead of a
//! whole probe later.
//!
//! [`Waves`] only decides when a wave starts; the caller probes each wave
//! (in any mode) and stores its verdicts. Candidates arrive over a channel
//! of extracted sources, so the draw that feeds it needs no change: it
//! sends as it goes and closes the channel when done. A wave starts
//! (`spec::WavePolicy`) when `size` candidates wait, when the oldest has
//! waited `wait`, or when the channel closes; a wave takes everything
//! waiting, so candidates that arrive while a wave builds go together into
//! the next one.

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::spec::WavePolicy;

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

    /// Builds each wave with `build` as it forms, waves side by side (their
    /// honest groups take turns in the package's main lane, so a wave whose
    /// slow unit is left building beside it holds no wave behind it), and
    /// hands each wave's result to `done` as it finishes, in no particular
    /// order.
    pub async fn build_side_by_side<T, Fut>(
        &mut self,
        mut build: impl FnMut(Vec<StreamCandidate>) -> Fut,
        mut done: impl AsyncFnMut(T) -> anyhow::Result<()>,
    ) -> anyhow::Result<()>
    where
        Fut: std::future::Future<Output = anyhow::Result<T>>,
    {
        use futures::stream::{FuturesUnordered, StreamExt};
        let mut building = FuturesUnordered::new();
        let mut more = true;
        loop {
            tokio::select! {
                wave = self.next(), if more => match wave {
                    Some(wave) => building.push(build(wave)),
                    None => more = false,
                },
                Some(out) = building.next(), if !building.is_empty() => done(out?).await?,
                else => return Ok(()),
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
    use std::time::Duration;

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
