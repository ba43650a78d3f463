//! A round's draw: the replies it asks for that the store lacks, each
//! stored as it arrives, within the output-token budget.

use anyhow::{Context, Result};
use tokio::sync::mpsc;

use crate::draw::{Drawn, Plan};
use crate::engine::draw::{settle, Asks, TokenBudget};
use crate::engine::resume::ResumePlan;
use crate::engine::rounds::Round;
use crate::repair::planner::RoundPlan;
use crate::store::{BatchId, Store};
use crate::support::progress::Progress;
use crate::support::testpoint;

/// Aborts a spawned task when dropped, so cancelling the batch cancels the
/// requests it has outstanding.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Draws `n` replies, storing each (with its attempts, and in a repair
/// round its round and parent) as it arrives. Replies the resume plan has
/// stored are not requested again. Once the replies stored have spent
/// `max_tokens` output tokens, nothing more is asked: the requests still
/// out are cancelled.
#[allow(clippy::too_many_arguments)]
pub(super) async fn draw(
    plan: &Plan,
    n: usize,
    store: &Store,
    progress: &Progress,
    batch: BatchId,
    stored: &ResumePlan,
    tap: Option<mpsc::UnboundedSender<Drawn>>,
    round: &Round<RoundPlan>,
    max_tokens: Option<u64>,
) -> Result<Vec<Drawn>> {
    let mut replies: Vec<Drawn> = stored.replies().filter(|d| d.idx < n).cloned().collect();
    let budget = TokenBudget::new(
        max_tokens,
        stored
            .replies()
            .filter_map(|d| d.reply.completion_tokens)
            .sum(),
    );
    if budget.is_spent() {
        replies.sort_by_key(|d| d.idx);
        return Ok(replies);
    }
    // Every pool draws indices in order from `skip`, so skipping the stored
    // prefix asks for nothing twice below it; a reply past a gap that is
    // already stored is passed by (a race may leave such gaps).
    let asks = match round {
        Round::First => Asks::Count {
            n,
            skip: stored.stored_prefix().min(n),
        },
        Round::Repair(p) => Asks::Prompts {
            asks: p.asks(),
            stored: stored.replies().map(|d| d.idx).collect(),
        },
    };
    let (tx, mut rx) = mpsc::channel(64);
    let mut drawing = {
        let plan = plan.clone();
        let progress = progress.clone();
        AbortOnDrop(tokio::spawn(async move {
            asks.draw(&plan, tx, &progress).await
        }))
    };
    let mut budget_spent = false;
    let mut arrived = Vec::new();
    while let Some(event) = rx.recv().await {
        // Store what has arrived together in one transaction: a reply is
        // still written as soon as the store is free, but a burst of
        // streams ending at once costs one commit, not hundreds.
        let mut events = vec![event];
        while let Ok(more) = rx.try_recv() {
            events.push(more);
        }
        for event in events {
            if let Some(drawn) = settle(store, progress, batch, event).await? {
                if !stored.has_reply(drawn.idx) {
                    arrived.push(drawn);
                }
            }
        }
        // One transaction per reply: `draw.reply#K` holds the process with
        // exactly K replies stored, and a kill loses only unstored ones.
        for drawn in arrived.drain(..) {
            match round {
                Round::First => store.record_draw(batch, &drawn).await?,
                Round::Repair(p) => {
                    let parent = p
                        .parent_of(drawn.idx)
                        .context("a repair reply outside its round")?;
                    store
                        .record_repair_draw(batch, &drawn, p.round, parent)
                        .await?
                }
            }
            budget.spend(&drawn);
            if let Some(tap) = &tap {
                // The streaming probe may have stopped on an error of its
                // own, which the batch reports; the draw goes on regardless.
                let _ = tap.send(drawn.clone());
            }
            replies.push(drawn);
            testpoint::reached("draw.reply").await;
        }
        if budget.is_spent() {
            progress.note(&budget.spent_note());
            budget_spent = true;
            break;
        }
    }
    // Dropping the draw task cancels the requests still out.
    if !budget_spent {
        (&mut drawing.0).await.context("the draw task panicked")??;
    }
    replies.sort_by_key(|d| d.idx);
    Ok(replies)
}
