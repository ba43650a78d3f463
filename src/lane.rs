//! A lane: one build machine draining the queue of a shared store.
//!
//! A lane claims an item (`Store::claim_work`), runs it exactly as a local
//! `assay run` would, by running this binary's `run` with the item's
//! arguments, and renews the item's lease while the run goes on. An item
//! an earlier claim had begun (its lane died, so its lease ran out) is
//! resumed, never begun again: `run --resume BATCH` keeps every reply,
//! verdict and score stored and does only the rest, so nothing is drawn or
//! scored twice. The run dies with the lane (`PR_SET_PDEATHSIG`), and a
//! lane that loses its lease (the store unreachable for a whole lease, or
//! the item taken over) stops the run, so two lanes never work one item.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::AsyncReadExt;
use tokio::task::JoinSet;

use crate::owner::Owner;
use crate::store::{BatchStatus, Claimed, Db, Store, WorkKind};

/// How a lane runs.
#[derive(Debug, Clone)]
pub struct LaneConfig {
    pub db: Db,
    /// The lane's name in the store (default: the host's).
    pub name: String,
    /// Items run at once.
    pub jobs: usize,
    /// How long a claim holds without renewal; renewed every third of it.
    pub lease: Duration,
    pub out: PathBuf,
    pub work_dir: PathBuf,
    /// Stop once every item is done or failed (else poll). An item another
    /// lane runs is not done: should that lane die, this one takes it over.
    pub until_empty: bool,
    /// This binary.
    pub exe: PathBuf,
}

/// What a lane did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct LaneSummary {
    pub done: usize,
    pub failed: usize,
    /// Items whose lease this lane lost: another lane has them.
    pub lost: usize,
}

enum Ending {
    Done,
    Failed,
    Lost,
}

/// How often an idle lane asks for work.
const POLL: Duration = Duration::from_secs(2);

pub async fn run(cfg: &LaneConfig, store: &Store) -> Result<LaneSummary> {
    let owner = Owner::current();
    let mut running = JoinSet::new();
    let mut summary = LaneSummary::default();
    let mut backoff = Backoff::default();
    loop {
        // Whether the store answered that nothing is left to claim.
        let mut empty = false;
        while running.len() < cfg.jobs {
            let lease_ms = cfg.lease.as_millis() as i64;
            let claimed_at = tokio::time::Instant::now();
            let item = match store.claim_work(&cfg.name, &owner, lease_ms).await {
                Ok(item) => {
                    backoff.reset();
                    item
                }
                // The store away: wait and ask again; a lane outlives it.
                Err(e) => {
                    let wait = backoff.next();
                    tracing::warn!("cannot claim work (again in {wait:?}): {e}");
                    tokio::time::sleep(wait).await;
                    break;
                }
            };
            let Some(item) = item else {
                empty = true;
                break;
            };
            tracing::info!(
                item = item.id,
                claim = item.claim,
                "lane {} took an item",
                cfg.name
            );
            let (cfg, store) = (cfg.clone(), store.clone());
            running.spawn(async move { work(&cfg, &store, item, claimed_at).await });
        }
        if running.is_empty() && cfg.until_empty && empty {
            // Nothing to claim now; the queue is drained only once no
            // other lane holds an item either (it may yet die).
            match store.open_work_items().await {
                Ok(0) => return Ok(summary),
                Ok(_) => {}
                Err(e) => tracing::warn!("cannot count the open items: {e}"),
            }
        }
        tokio::select! {
            Some(ended) = running.join_next() => match ended.context("a lane task panicked")?? {
                Ending::Done => summary.done += 1,
                Ending::Failed => summary.failed += 1,
                Ending::Lost => summary.lost += 1,
            },
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}

/// Runs one claimed item to its end, renewing its lease meanwhile;
/// `claimed_at` is when the claim was asked for.
async fn work(
    cfg: &LaneConfig,
    store: &Store,
    item: Claimed,
    claimed_at: tokio::time::Instant,
) -> Result<Ending> {
    let mut args = match (item.kind, item.batch) {
        // A part of a suite: always a resume of that part, which does only
        // the programs without a stored outcome.
        (WorkKind::Suite, _) => {
            take_over_suite_part(store, &item.args).await?;
            item.args.clone()
        }
        (WorkKind::Batch, Some(batch)) => {
            take_over(store, batch).await?;
            vec!["run".to_owned(), "--resume".to_owned(), batch.to_string()]
        }
        (WorkKind::Batch, None) => std::iter::once("run".to_owned())
            .chain(item.args.iter().cloned())
            .collect(),
    };
    args.extend(["--work-item".to_owned(), item.id.to_string()]);
    let mut cmd = tokio::process::Command::new(&cfg.exe);
    cmd.args(&args)
        .arg("--db")
        .arg(cfg.db.to_string())
        .arg("--out")
        .arg(&cfg.out)
        .arg("--work-dir")
        .arg(&cfg.work_dir)
        .arg("--json")
        .env_remove("ASSAY_DB")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // SAFETY: prctl is async-signal-safe; it only asks the kernel to kill
    // the run when this lane's thread that spawned it dies.
    unsafe {
        cmd.as_std_mut().pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {}", cfg.exe.display()))?;
    let mut stderr = child.stderr.take().expect("piped");
    let errors = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text).await;
        text
    });
    let renew_every = cfg.lease / 3;
    let lease_ms = cfg.lease.as_millis() as i64;
    // Taken before each request that extended the lease: the store's
    // lease runs out no earlier than this plus the lease.
    let mut held_from = claimed_at;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status?,
            _ = tokio::time::sleep(renew_every) => {
                let sent = tokio::time::Instant::now();
                match store.renew_lease(&item, lease_ms).await {
                    Ok(true) => held_from = sent,
                    Ok(false) => {
                        tracing::warn!(item = item.id, "lease lost: another lane has the item");
                        let _ = child.kill().await;
                        return Ok(Ending::Lost);
                    }
                    // The store away for a moment: keep going while the
                    // lease holds, and stop the run before it can run out,
                    // so no other lane's resume ever runs beside it.
                    Err(e) => {
                        tracing::warn!(item = item.id, "cannot renew the lease: {e}");
                        if !lease_outlives_next_try(held_from.elapsed(), renew_every, cfg.lease) {
                            let _ = child.kill().await;
                            return Ok(Ending::Lost);
                        }
                    }
                }
            }
        }
    };
    let errors = errors.await.unwrap_or_default();
    let last = errors
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let failure = (!status.success()).then(|| format!("assay run exited with {status}: {last}"));
    // A run that failed on the store (its error names it) failed for the
    // store, not for the item: given back, for a resume once it is back.
    let store_failed = failure.is_some() && last.contains(&cfg.db.to_string());
    let mut backoff = Backoff::default();
    let started = tokio::time::Instant::now();
    loop {
        let ended = if store_failed {
            store.release_work(&item).await.map(|()| true)
        } else {
            store.finish_work(&item, failure.as_deref()).await
        };
        match ended {
            Ok(true) if store_failed => return Ok(Ending::Lost),
            Ok(true) if failure.is_some() => return Ok(Ending::Failed),
            Ok(true) => return Ok(Ending::Done),
            Ok(false) => return Ok(Ending::Lost),
            // Everything is stored; only the item's end is not. Past the
            // lease another lane resumes it and finds nothing left to do.
            Err(e) if started.elapsed() < cfg.lease => {
                let wait = backoff.next();
                tracing::warn!(
                    item = item.id,
                    "cannot end the item (again in {wait:?}): {e}"
                );
                tokio::time::sleep(wait).await;
            }
            Err(_) => return Ok(Ending::Lost),
        }
    }
}

/// Whether a lease renewed `held` ago still holds when the next renewal
/// is tried, `renew_every` from now.
fn lease_outlives_next_try(held: Duration, renew_every: Duration, lease: Duration) -> bool {
    held + renew_every < lease
}

/// Waits between attempts on an unreachable store: 0.5 s, doubling to 30 s.
#[derive(Default)]
struct Backoff(u32);

impl Backoff {
    fn next(&mut self) -> Duration {
        let wait = Duration::from_millis(500) * 2u32.pow(self.0.min(6));
        self.0 += 1;
        wait.min(Duration::from_secs(30))
    }

    fn reset(&mut self) {
        self.0 = 0;
    }
}

/// A batch an earlier claim began: if the store still says it runs, its
/// lane is gone (the lease ran out), so it is marked interrupted for
/// `--resume` to take.
async fn take_over(store: &Store, batch: i64) -> Result<()> {
    if store.batch(batch).await?.status != BatchStatus::Running {
        return Ok(());
    }
    let owner = store
        .running_batches()
        .await?
        .into_iter()
        .find(|r| r.id == batch)
        .and_then(|r| r.owner);
    store
        .interrupt_if_owned(batch, owner.as_ref(), "its lane's lease ran out")
        .await?;
    Ok(())
}

/// A part of a suite an earlier claim may have begun: its batches still
/// marked running belong to a lane that is gone.
async fn take_over_suite_part(store: &Store, args: &[String]) -> Result<()> {
    let (Some(suite), Some(part)) = (flag_value(args, "--resume"), flag_value(args, "--part"))
    else {
        return Ok(());
    };
    let suite: i64 = suite.parse().context("a queued suite item's --resume")?;
    let part: crate::store::SuitePart = part
        .parse()
        .map_err(|e: String| anyhow::anyhow!("a queued suite item's --part: {e}"))?;
    store
        .interrupt_suite_part(suite, &part, "its lane's lease ran out")
        .await?;
    Ok(())
}

/// The value after `flag` in a stored command line.
fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a String> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
}

/// What an item is, in a few words: the spec of a batch, the suite and
/// part of a suite's item.
fn task_of(item: &crate::store::WorkItemRow) -> String {
    let args = &item.args;
    match item.kind {
        WorkKind::Batch => format!("batch {}", args.first().map_or("", String::as_str)),
        WorkKind::Suite => match (flag_value(args, "--resume"), flag_value(args, "--part")) {
            (Some(suite), Some(part)) => format!("suite {suite} part {part}"),
            _ => "suite".to_owned(),
        },
    }
}

/// `assay queue`: one line per item, its state, lane and batch.
pub fn queue_table(items: &[crate::store::WorkItemRow]) -> String {
    use std::fmt::Write;
    let mut out = String::from("item  state     lane             batch  claims  task\n");
    for w in items {
        let state = match (w.state, w.lease_expired) {
            (crate::store::WorkState::Running, true) => "lapsed",
            (s, _) => match s {
                crate::store::WorkState::Queued => "queued",
                crate::store::WorkState::Running => "running",
                crate::store::WorkState::Done => "done",
                crate::store::WorkState::Failed => "failed",
            },
        };
        let batch = w.batch_id.map_or("-".to_owned(), |b| b.to_string());
        let _ = writeln!(
            out,
            "{:>4}  {state:<8}  {:<15}  {batch:>5}  {:>6}  {}",
            w.id,
            w.lane.as_deref().unwrap_or("-"),
            w.claims,
            task_of(w),
        );
        if let Some(why) = &w.failure {
            let _ = writeln!(out, "      {why}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lane cut off from the store stops its run before the lease it
    /// last renewed can run out, never after: past that, another lane may
    /// resume the item beside it.
    #[test]
    fn a_run_stops_while_its_lease_still_holds() {
        let lease = Duration::from_secs(60);
        let every = lease / 3;
        // Renewals from a last good one, `every` apart, all failing: the
        // last one the run survives leaves it time before the lease ends.
        let mut held = Duration::ZERO;
        let mut tries = 0;
        loop {
            held += every;
            tries += 1;
            if !lease_outlives_next_try(held, every, lease) {
                break;
            }
        }
        assert!(held < lease, "stopped {held:?} after, lease {lease:?}");
        assert_eq!(tries, 2, "one failed renewal is ridden out");
    }

    #[test]
    fn a_backoff_doubles_to_thirty_seconds_and_starts_over() {
        let mut b = Backoff::default();
        let waits: Vec<u64> = (0..8).map(|_| b.next().as_millis() as u64).collect();
        assert_eq!(waits, [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000]);
        b.reset();
        assert_eq!(b.next(), Duration::from_millis(500));
    }
}
