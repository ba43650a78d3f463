//! A lane: one build machine draining the queue of a shared store.
//!
//! A lane claims an item (`Store::claim_work`), runs it exactly as a local
//! `assay run` would, by running this binary with the arguments of the
//! item (`WorkItem::args`: every setting it was queued with, none of
//! the lane's environment), and renews the item's lease while the run goes
//! on. An item an earlier claim had begun (its lane died, so its lease ran
//! out) is resumed, never begun again: `run --resume BATCH` keeps every
//! reply, verdict and score stored and does only the rest, so nothing is
//! drawn or scored twice. The run dies with the lane (`PR_SET_PDEATHSIG`),
//! and a lane that loses its lease (the store unreachable for a whole
//! lease, or the item taken over) stops the run, so two lanes never work
//! one item. How the run ended is read from its exit status
//! (`exit::ExitClass`) and its `--json` result, never from its words.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result};
use rustix::process::Signal;
use tokio::io::{AsyncBufReadExt, AsyncReadExt};
use tokio::task::JoinSet;

use crate::build::package;
use crate::engine::exit::ExitClass;
use crate::queue::item::{LiveSuitePart, Placed, WorkItem, FLAG_VARIABLES};
use crate::queue::place::{place, prune_carried, PlaceError};
use crate::store::{BatchId, BatchStatus, Claimed, Db, Store, WorkItemRow};
use crate::support::backoff::Policy;
use crate::support::owner::Owner;

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
    let mut backoff = STORE_AWAY.start();
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
                    let wait = backoff.next_wait();
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
    claimed: Claimed,
    claimed_at: tokio::time::Instant,
) -> Result<Ending> {
    let item = match WorkItem::from_json(&claimed.item) {
        Ok(item) => item,
        // Claimed again, it would be refused again: failed, saying why.
        Err(e) => return end(cfg, store, &claimed, RunOutcome::Failed(e.to_string())).await,
    };
    let begun = match (&item, claimed.batch) {
        (WorkItem::Batch(_), Some(batch)) => match take_over(store, batch).await? {
            // An earlier claim's run stored everything; only the item's
            // end was lost.
            Left::Nothing => return end(cfg, store, &claimed, RunOutcome::Done).await,
            Left::Rest => Some(batch),
        },
        (WorkItem::Batch(_), None) => None,
        (WorkItem::SuitePart(part) | WorkItem::LiveSuitePart(LiveSuitePart { part, .. }), _) => {
            // Always a resume of the part, which does only the programs
            // without a stored outcome.
            store
                .interrupt_suite_part(part.suite, &part.part, "its lane's lease ran out")
                .await?;
            None
        }
    };
    // The task and pools file as queued, on this machine's disk.
    let (placed, held) = match place(store, &item, &cfg.work_dir).await {
        Ok(placed) => placed,
        Err(PlaceError::Store(e)) if e.is_away() => {
            return end(cfg, store, &claimed, RunOutcome::GiveBack).await
        }
        Err(e) => return end(cfg, store, &claimed, RunOutcome::Failed(e.to_string())).await,
    };
    let mut child = command(cfg, &item, begun, &placed, claimed.id)
        .spawn()
        .with_context(|| format!("cannot start {}", cfg.exe.display()))?;
    let result = read_all(child.stdout.take().expect("piped"));
    let last_words = last_line(child.stderr.take().expect("piped"));
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
                match store.renew_lease(&claimed, lease_ms).await {
                    Ok(true) => held_from = sent,
                    Ok(false) => {
                        tracing::warn!(item = claimed.id, "lease lost: another lane has the item");
                        let _ = child.kill().await;
                        return Ok(Ending::Lost);
                    }
                    // The store away for a moment: keep going while the
                    // lease holds, and stop the run before it can run out,
                    // so no other lane's resume ever runs beside it.
                    Err(e) => {
                        tracing::warn!(item = claimed.id, "cannot renew the lease: {e}");
                        if !lease_outlives_next_try(held_from.elapsed(), renew_every, cfg.lease) {
                            let _ = child.kill().await;
                            return Ok(Ending::Lost);
                        }
                    }
                }
            }
        }
    };
    let result = result.await.unwrap_or_default();
    let last_words = last_words.await.unwrap_or_default();
    let outcome = RunOutcome::of(status, &result, &last_words);
    if let RunOutcome::Done = outcome {
        tracing::info!(
            item = claimed.id,
            "lane {} did {}",
            cfg.name,
            item.describe()
        );
    }
    let ending = end(cfg, store, &claimed, outcome).await;
    drop(held);
    match prune_carried(store, &cfg.work_dir).await {
        Ok(removed) if !removed.is_empty() => {
            tracing::info!(
                "removed the task copies no item needs: {}",
                removed.join(", ")
            )
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("cannot prune the task copies: {e}"),
    }
    ending
}

/// How an item's run ended, for the queue.
#[derive(Debug, PartialEq)]
enum RunOutcome {
    Done,
    /// Failed, with the run's last words.
    Failed(String),
    /// The run's store went away, or it was interrupted: the item is not
    /// at fault, and a resume finishes it.
    GiveBack,
}

/// What a lane reads of a run's `--json` result: that there is one, and
/// its status (of the batch, or of the suite a part belongs to).
#[derive(Debug, serde::Deserialize)]
struct RunResult {
    status: String,
    /// A batch's own; a suite's result has none.
    batch_id: Option<BatchId>,
}

impl RunOutcome {
    /// From the run's exit status (its class, `exit::ExitClass`), its
    /// `--json` result on stdout and the last line of its stderr.
    fn of(status: std::process::ExitStatus, result: &[u8], last_words: &str) -> RunOutcome {
        match status.code().and_then(ExitClass::of_code) {
            Some(ExitClass::Done) => match serde_json::from_slice::<RunResult>(result) {
                // A batch's run ends with it finished; a part's, with its
                // suite finished or still running on other lanes.
                Ok(r) if r.batch_id.is_none() || r.status == "finished" => RunOutcome::Done,
                Ok(r) => RunOutcome::Failed(format!(
                    "assay exited 0 with batch {} {}",
                    r.batch_id.unwrap_or_default(),
                    r.status
                )),
                Err(e) => {
                    RunOutcome::Failed(format!("assay exited 0 without its --json result ({e})"))
                }
            },
            Some(ExitClass::StoreAway | ExitClass::Interrupted) => RunOutcome::GiveBack,
            _ => RunOutcome::Failed(format!("assay exited with {status}: {last_words}")),
        }
    }
}

/// Ends a claim as `outcome` says, retrying while the store is away.
async fn end(
    cfg: &LaneConfig,
    store: &Store,
    claimed: &Claimed,
    outcome: RunOutcome,
) -> Result<Ending> {
    let mut backoff = STORE_AWAY.start();
    let started = tokio::time::Instant::now();
    loop {
        let ended = match &outcome {
            RunOutcome::GiveBack => store.release_work(claimed).await.map(|()| true),
            RunOutcome::Done => store.finish_work(claimed, None).await,
            RunOutcome::Failed(why) => store.finish_work(claimed, Some(why)).await,
        };
        match (ended, &outcome) {
            (Ok(true), RunOutcome::Done) => return Ok(Ending::Done),
            (Ok(true), RunOutcome::Failed(_)) => return Ok(Ending::Failed),
            (Ok(_), _) => return Ok(Ending::Lost),
            // Everything is stored; only the item's end is not. Past the
            // lease another lane resumes it and finds nothing left to do.
            (Err(e), _) if started.elapsed() < cfg.lease => {
                let wait = backoff.next_wait();
                tracing::warn!(
                    item = claimed.id,
                    "cannot end the item (again in {wait:?}): {e}"
                );
                tokio::time::sleep(wait).await;
            }
            (Err(_), _) => return Ok(Ending::Lost),
        }
    }
}

/// The run of an item: this binary with the item's arguments, the lane's
/// store and folders, and none of the lane's variables that a flag reads
/// (`item::FLAG_VARIABLES`): the item's settings are the run's.
fn command(
    cfg: &LaneConfig,
    item: &WorkItem,
    begun: Option<BatchId>,
    placed: &Placed,
    id: i64,
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(&cfg.exe);
    cmd.args(item.args(begun, placed))
        .arg("--work-item")
        .arg(id.to_string())
        .arg("--db")
        .arg(cfg.db.to_string())
        .arg("--out")
        .arg(&cfg.out)
        .arg("--work-dir")
        .arg(&cfg.work_dir)
        .arg("--json")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for var in FLAG_VARIABLES {
        cmd.env_remove(var);
    }
    // Up to `jobs` runs at once, each in a build slot of its own (a slot
    // is held from before the draw), unless the lane was told how many.
    if std::env::var_os(package::SLOTS_VAR).is_none() {
        let slots = cfg.jobs.max(package::default_pool_size());
        cmd.env(package::SLOTS_VAR, slots.to_string());
    }
    // SAFETY: the closure runs between fork and exec and makes one
    // async-signal-safe system call (prctl), which asks the kernel to kill
    // the run when this lane's thread that spawned it dies.
    unsafe {
        cmd.as_std_mut().pre_exec(|| {
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            Ok(())
        });
    }
    cmd
}

/// Everything a run prints on stdout: its `--json` result.
fn read_all(mut out: tokio::process::ChildStdout) -> tokio::task::JoinHandle<Vec<u8>> {
    tokio::spawn(async move {
        let mut bytes = Vec::new();
        let _ = out.read_to_end(&mut bytes).await;
        bytes
    })
}

/// The last line a run prints on stderr that is not blank: its last words
/// (the error, when it failed). Read as it comes, so a chatty run costs no
/// memory.
fn last_line(err: tokio::process::ChildStderr) -> tokio::task::JoinHandle<String> {
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(err).lines();
        let mut last = String::new();
        while let Ok(Some(line)) = lines.next_line().await {
            if !line.trim().is_empty() {
                last = line;
            }
        }
        last
    })
}

/// Whether a lease renewed `held` ago still holds when the next renewal
/// is tried, `renew_every` from now.
fn lease_outlives_next_try(held: Duration, renew_every: Duration, lease: Duration) -> bool {
    held + renew_every < lease
}

/// Waits between attempts on an unreachable store: under 0.5 s, the
/// ceiling doubling to 30 s, jittered so the lanes of a store that
/// restarts do not all come back at once.
const STORE_AWAY: Policy = Policy::new(Duration::from_millis(500), Duration::from_secs(30));

/// What is left of a batch an earlier claim began.
enum Left {
    /// It is finished: the earlier run stored everything.
    Nothing,
    Rest,
}

/// A batch an earlier claim began: if the store still says it runs, its
/// lane is gone (the lease ran out), so it is marked interrupted for
/// `--resume` to take.
async fn take_over(store: &Store, batch: BatchId) -> Result<Left> {
    match store.batch(batch).await?.status {
        BatchStatus::Finished => return Ok(Left::Nothing),
        BatchStatus::Running => {}
        _ => return Ok(Left::Rest),
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
    Ok(Left::Rest)
}

/// What an item is, in a few words: a batch's spec and size, a suite's
/// part; an item queued before migration 0011, its command line.
fn task_of(row: &WorkItemRow) -> String {
    if let Ok(item) = WorkItem::from_json(&row.item) {
        return item.describe();
    }
    match serde_json::from_value::<Vec<String>>(row.item.clone()) {
        Ok(args) => format!("queued as `{}` by an older assay", args.join(" ")),
        Err(_) => format!("unreadable: {}", row.item),
    }
}

/// `assay queue`: one line per item, its state, lane and batch.
pub fn queue_table(items: &[WorkItemRow]) -> String {
    use crate::support::table::{Column, Table};
    let mut table = Table::new(vec![
        Column::right("item").min_width(4),
        Column::left("state").min_width(8),
        Column::left("lane").min_width(15),
        Column::right("batch").min_width(5),
        Column::right("claims").min_width(6),
        Column::left("task"),
    ]);
    for w in items {
        let state: &str = match (w.state, w.lease_expired) {
            (crate::store::WorkState::Running, true) => "lapsed",
            (s, _) => s.into(),
        };
        table.row([
            w.id.to_string(),
            state.to_owned(),
            w.lane.as_deref().unwrap_or("-").to_owned(),
            w.batch_id.map_or("-".to_owned(), |b| b.to_string()),
            w.claims.to_string(),
            task_of(w),
        ]);
        if let Some(why) = &w.failure {
            table.text(format!("      {why}"));
        }
    }
    table.render()
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

    /// A run's end is read from its exit status and its `--json` result,
    /// never its words: a failure whose last line names the store is a
    /// failure, and a store away is given back whatever it said.
    #[test]
    fn a_run_s_end_is_its_exit_class_and_its_result() {
        use std::os::unix::process::ExitStatusExt;
        let exited = |code: i32| std::process::ExitStatus::from_raw(code << 8);
        let batch = br#"{"batch_id": 4, "status": "finished", "candidates": []}"#;
        let part = br#"{"suite_id": 2, "status": "running"}"#;
        let store = "error: postgres://lane@db/rig: no batch 4";
        let cases: [(std::process::ExitStatus, &[u8], &str, RunOutcome); 8] = [
            (exited(0), batch, "", RunOutcome::Done),
            // A part ends with its suite still running on other lanes.
            (exited(0), part, "", RunOutcome::Done),
            (exited(3), b"", "error: anything", RunOutcome::GiveBack),
            (exited(130), b"", "assay: interrupted", RunOutcome::GiveBack),
            (
                exited(2),
                b"",
                store,
                RunOutcome::Failed(format!("assay exited with exit status: 2: {store}")),
            ),
            (
                exited(0),
                b"",
                "",
                RunOutcome::Failed(
                    "assay exited 0 without its --json result (EOF while parsing a value at line 1 column 0)"
                        .into(),
                ),
            ),
            (
                exited(0),
                br#"{"batch_id": 4, "status": "failed"}"#,
                "",
                RunOutcome::Failed("assay exited 0 with batch 4 failed".into()),
            ),
            (
                std::process::ExitStatus::from_raw(libc::SIGKILL),
                b"",
                "",
                RunOutcome::Failed("assay exited with signal: 9 (SIGKILL): ".into()),
            ),
        ];
        for (status, result, last, want) in cases {
            assert_eq!(
                RunOutcome::of(status, result, last),
                want,
                "{status} {last}"
            );
        }
    }

    #[test]
    fn a_backoff_doubles_to_thirty_seconds() {
        let ceilings: Vec<u128> = (1..=8).map(|n| STORE_AWAY.ceiling(n).as_millis()).collect();
        assert_eq!(ceilings, [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000]);
    }
}
