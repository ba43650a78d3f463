//! Running a plan: a replay pool serves its corpus in order; HTTP pools
//! share the batch in one of two ways.
//!
//! Fixed: pool i serves its share of reply indices, at most `max_in_flight`
//! at once. Race: every pool keeps `max_in_flight` requests going until N
//! replies are in; a reply takes the next free index as it arrives, and the
//! requests still out are cancelled then (dropping a stream closes its
//! connection, which is how an engine learns to stop).
//!
//! In both, a pool that refuses a request for good (401, 403, 404) is
//! stopped: one notice, and its remaining work is not sent (fixed: those
//! replies are recorded as `pool_stopped`; race: the other pools take it).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinSet;

use super::http::HttpPool;
use super::{Attempt, DrawError, DrawEvent, Drawn, ErrorText, Outcome, Plan, Pool, Reply, Split};
use crate::support::progress::{PoolBar, Progress};

/// Whether a pool was stopped, and why.
#[derive(Default)]
struct Stop {
    stopped: AtomicBool,
    reason: Mutex<Option<String>>,
}

impl Stop {
    fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Stops the pool after `reply` refused; returns the notice to send the
    /// first time only.
    fn stop(&self, pool: &str, reply: &Reply) -> Option<DrawEvent> {
        let mut reason = self.reason.lock().unwrap();
        if reason.is_some() {
            return None;
        }
        let text = format!(
            "refused with {}: {}",
            reply.outcome,
            reply
                .error
                .as_ref()
                .map_or("(no message)", |e| e.message.as_str())
        );
        *reason = Some(text.clone());
        self.stopped.store(true, Ordering::SeqCst);
        Some(DrawEvent::PoolStopped {
            pool: pool.to_owned(),
            reason: text,
        })
    }

    fn stopped_reply(&self, pool: &str) -> Reply {
        let reason = self.reason.lock().unwrap().clone().unwrap_or_default();
        Reply {
            outcome: Outcome::PoolStopped,
            error: Some(ErrorText {
                message: format!("not sent: pool `{pool}` {reason}"),
                body: None,
            }),
            ..Reply::default()
        }
    }
}

/// Fixed shares: pool i serves `counts[i]` indices, in order after the
/// pools before it. Indices below `skip` are already stored.
pub(super) async fn fixed(
    pools: &[Arc<HttpPool>],
    counts: &[usize],
    skip: usize,
    tx: mpsc::UnboundedSender<DrawEvent>,
    progress: &Progress,
) {
    let mut offset = 0;
    let todo = counts
        .iter()
        .map(|&count| {
            let range = offset..offset + count;
            offset += count;
            range.filter(|i| *i >= skip).collect()
        })
        .collect();
    fixed_lists(pools, todo, None, tx, progress).await
}

/// Pool i serves the reply indices `todo[i]`, in order; with `asks`, reply
/// `idx` asks `asks[idx]` instead of the pool's own prompt (a repair
/// round, whose every reply has its parent's prompt).
pub(super) async fn fixed_lists(
    pools: &[Arc<HttpPool>],
    todo: Vec<Vec<usize>>,
    asks: Option<Arc<BTreeMap<usize, String>>>,
    tx: mpsc::UnboundedSender<DrawEvent>,
    progress: &Progress,
) {
    let mut tasks = JoinSet::new();
    let mut bars = Vec::new();
    for (pool, todo) in pools.iter().zip(todo) {
        if todo.is_empty() {
            continue;
        }
        let bar = Arc::new(progress.pool_bar(pool.name(), todo.len()));
        bars.push(bar.clone());
        let stop = Arc::new(Stop::default());
        let slots = Arc::new(Semaphore::new(pool.max_in_flight()));
        let (pool, tx, asks) = (pool.clone(), tx.clone(), asks.clone());
        // One driver per pool hands out slots in index order, so requests
        // go out in order (and a stopped pool stops at the next index).
        tasks.spawn(async move {
            let mut running = JoinSet::new();
            for idx in todo {
                let slot = slots.clone().acquire_owned().await.expect("never closed");
                let (pool, bar, stop, tx) = (pool.clone(), bar.clone(), stop.clone(), tx.clone());
                let asked = asks.as_ref().and_then(|a| a.get(&idx).cloned());
                running.spawn(async move {
                    let _slot = slot;
                    let name = pool.name().to_owned();
                    let reply = if stop.is_stopped() {
                        bar.skipped();
                        stop.stopped_reply(&name)
                    } else {
                        bar.started();
                        let reply = match &asked {
                            Some(prompt) => pool.request_asking(idx as u64, prompt).await,
                            None => pool.request(idx as u64).await,
                        };
                        bar.ended(Some((reply.outcome.is_ok(), reply.completion_tokens)));
                        if reply.outcome.is_refusal() {
                            if let Some(notice) = stop.stop(&name, &reply) {
                                let _ = tx.send(notice);
                            }
                        }
                        reply
                    };
                    let _ = tx.send(DrawEvent::Reply(Drawn {
                        idx,
                        pool: name,
                        reply,
                    }));
                });
            }
            while running.join_next().await.is_some() {}
        });
    }
    while tasks.join_next().await.is_some() {}
    bars.iter().for_each(|b| b.finish());
}

/// What a race shares between its workers.
struct Race {
    /// The next free reply index.
    next_idx: Mutex<usize>,
    n: usize,
    /// Request numbers (the seed offset), unique across pools.
    requests: AtomicU64,
    full: watch::Sender<bool>,
}

/// A race: every pool keeps its slots full until `n` replies are in.
pub(super) async fn race(
    pools: &[Arc<HttpPool>],
    n: usize,
    skip: usize,
    tx: mpsc::UnboundedSender<DrawEvent>,
    progress: &Progress,
) {
    let (full, _) = watch::channel(skip >= n);
    let race = Arc::new(Race {
        next_idx: Mutex::new(skip),
        n,
        requests: AtomicU64::new(skip as u64),
        full,
    });
    let mut tasks = JoinSet::new();
    let mut bars = Vec::new();
    for pool in pools {
        let bar = Arc::new(progress.pool_bar(pool.name(), n - skip));
        bars.push(bar.clone());
        let stop = Arc::new(Stop::default());
        for _ in 0..pool.max_in_flight() {
            tasks.spawn(worker(
                pool.clone(),
                race.clone(),
                bar.clone(),
                stop.clone(),
                tx.clone(),
            ));
        }
    }
    while tasks.join_next().await.is_some() {}
    bars.iter().for_each(|b| b.finish());
    // Every pool stopped before the race was full: the rest are not sent.
    let rest: Vec<usize> = {
        let mut next = race.next_idx.lock().unwrap();
        let rest = (*next..n).collect();
        *next = n;
        rest
    };
    for (i, idx) in rest.into_iter().enumerate() {
        let pool = &pools[i % pools.len()];
        let reply = Reply {
            outcome: Outcome::PoolStopped,
            error: Some(ErrorText {
                message: "not sent: every pool of the race was stopped".into(),
                body: None,
            }),
            ..Reply::default()
        };
        let _ = tx.send(DrawEvent::Reply(Drawn {
            idx,
            pool: pool.name().to_owned(),
            reply,
        }));
    }
}

async fn worker(
    pool: Arc<HttpPool>,
    race: Arc<Race>,
    bar: Arc<PoolBar>,
    stop: Arc<Stop>,
    tx: mpsc::UnboundedSender<DrawEvent>,
) {
    let mut full = race.full.subscribe();
    let name = pool.name().to_owned();
    loop {
        if *full.borrow() || stop.is_stopped() {
            break;
        }
        let k = race.requests.fetch_add(1, Ordering::SeqCst);
        bar.started();
        let began = Instant::now();
        let reply = tokio::select! {
            reply = pool.request(k) => reply,
            _ = async { let _ = full.wait_for(|f| *f).await; } => {
                bar.ended(None);
                let attempts = vec![Attempt {
                    number: 1,
                    started_ms: 0.0,
                    duration_ms: began.elapsed().as_secs_f64() * 1e3,
                    outcome: Outcome::Cancelled,
                    error: None,
                    retry_after_ms: None,
                    delay_ms: None,
                }];
                let _ = tx.send(DrawEvent::Cancelled { pool: name.clone(), attempts });
                break;
            }
        };
        let refused = reply.outcome.is_refusal();
        let idx = {
            let mut next = race.next_idx.lock().unwrap();
            if *next < race.n {
                let idx = *next;
                *next += 1;
                if *next == race.n {
                    race.full.send_replace(true);
                }
                Some(idx)
            } else {
                None
            }
        };
        match idx {
            Some(idx) => {
                bar.ended(Some((reply.outcome.is_ok(), reply.completion_tokens)));
                if refused {
                    if let Some(notice) = stop.stop(&name, &reply) {
                        let _ = tx.send(notice);
                    }
                }
                let _ = tx.send(DrawEvent::Reply(Drawn {
                    idx,
                    pool: name.clone(),
                    reply,
                }));
            }
            None => {
                // Finished just after the race filled: not a reply.
                bar.ended(None);
                let mut attempts = reply.attempts;
                if let Some(last) = attempts.last_mut() {
                    last.outcome = Outcome::Cancelled;
                }
                let _ = tx.send(DrawEvent::Cancelled {
                    pool: name.clone(),
                    attempts,
                });
                break;
            }
        }
        if refused {
            break;
        }
    }
}

impl Plan {
    /// Draws replies `skip..n` (the first `skip` are already stored),
    /// sending each event as it happens. Returns when every reply is sent.
    pub async fn draw(
        &self,
        n: usize,
        skip: usize,
        tx: mpsc::Sender<DrawEvent>,
        progress: &Progress,
    ) -> Result<(), DrawError> {
        self.check(n)?;
        if let [Pool::Replay(r)] = self.pools.as_slice() {
            let bar = progress.pool_bar(&r.name, n);
            let (rtx, mut rrx) = mpsc::channel(64);
            let pool = r.clone();
            let serving = tokio::spawn(async move { pool.draw(n, skip, rtx).await });
            while let Some(d) = rrx.recv().await {
                bar.inc(1);
                if tx.send(DrawEvent::Reply(d)).await.is_err() {
                    break;
                }
            }
            bar.finish();
            return serving.await.expect("the replay task panicked");
        }
        let http: Vec<Arc<HttpPool>> = self
            .pools
            .iter()
            .map(|p| match p {
                Pool::Http(h) => h.clone(),
                Pool::Replay(_) => unreachable!("replay is never mixed (checked in build)"),
            })
            .collect();
        // Requests hand their replies to an unbounded queue, so a slot is
        // free again the moment its request ends, however long the caller
        // takes to store what came before. It holds at most N replies.
        let (qtx, qrx) = mpsc::unbounded_channel();
        let schedule = async {
            match &self.split {
                Split::Fixed(w) => fixed(&http, &apportion(n, w), skip, qtx, progress).await,
                Split::Race => race(&http, n, skip, qtx, progress).await,
            }
        };
        tokio::join!(schedule, forward(qrx, tx));
        Ok(())
    }

    /// Draws a repair round: reply `idx` asks `asks[idx]`, the pools
    /// sharing the round's replies as their weights say (a race shares
    /// them evenly: a reply's index names its parent, so no pool may take
    /// another's). Replies in `stored` are not asked again. A replay corpus
    /// cannot answer a prompt it has never seen, and is refused.
    pub async fn draw_asking(
        &self,
        asks: BTreeMap<usize, String>,
        stored: &BTreeSet<usize>,
        tx: mpsc::Sender<DrawEvent>,
        progress: &Progress,
    ) -> Result<(), DrawError> {
        let http = self.every_http_pool().ok_or_else(|| DrawError::BadChoice {
            what: "a repair round".into(),
            message: "a replay corpus cannot answer a repair prompt: name HTTP pools".into(),
        })?;
        let weights = match &self.split {
            Split::Fixed(w) => w.clone(),
            Split::Race => vec![1; http.len()],
        };
        let mut order = asks.keys().copied();
        let todo: Vec<Vec<usize>> = apportion(asks.len(), &weights)
            .into_iter()
            .map(|count| {
                order
                    .by_ref()
                    .take(count)
                    .filter(|i| !stored.contains(i))
                    .collect()
            })
            .collect();
        let (qtx, qrx) = mpsc::unbounded_channel();
        let schedule = fixed_lists(&http, todo, Some(Arc::new(asks)), qtx, progress);
        tokio::join!(schedule, forward(qrx, tx));
        Ok(())
    }

    /// The plan's pools when every one is an HTTP pool.
    fn every_http_pool(&self) -> Option<Vec<Arc<HttpPool>>> {
        self.pools
            .iter()
            .map(|p| match p {
                Pool::Http(h) => Some(h.clone()),
                Pool::Replay(_) => None,
            })
            .collect()
    }

    /// Whether the plan can draw a repair round (every pool is HTTP).
    pub fn can_repair(&self) -> bool {
        self.every_http_pool().is_some()
    }
}

/// Hands the queued events on to the caller in order, until the queue is
/// closed or the caller hangs up.
async fn forward(mut queue: mpsc::UnboundedReceiver<DrawEvent>, tx: mpsc::Sender<DrawEvent>) {
    while let Some(e) = queue.recv().await {
        if tx.send(e).await.is_err() {
            break;
        }
    }
}

/// Splits `n` over `weights` by largest remainders; ties go to the first.
pub(super) fn apportion(n: usize, weights: &[u64]) -> Vec<usize> {
    let total: u64 = weights.iter().sum();
    if total == 0 {
        return vec![0; weights.len()];
    }
    let mut counts: Vec<usize> = weights
        .iter()
        .map(|w| (n as u128 * *w as u128 / total as u128) as usize)
        .collect();
    let mut rest: Vec<(u128, usize)> = weights
        .iter()
        .enumerate()
        .map(|(i, w)| (n as u128 * *w as u128 % total as u128, i))
        .collect();
    rest.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let short = n - counts.iter().sum::<usize>();
    for (_, i) in rest.into_iter().take(short) {
        counts[i] += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apportion_by_largest_remainder() {
        assert_eq!(apportion(32, &[16, 16]), [16, 16]);
        assert_eq!(apportion(10, &[1, 1, 1]), [4, 3, 3]);
        assert_eq!(apportion(5, &[3, 1]), [4, 1]);
        assert_eq!(apportion(7, &[0, 2]), [0, 7]);
    }
}
