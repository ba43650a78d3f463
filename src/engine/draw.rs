//! What every draw of the engine shares, a task's batch's and a suite's
//! problems': what a draw asks the pools for, the output-token budget
//! (`--max-tokens`) it spends, and what becomes of a draw's events other
//! than replies.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Result;
use tokio::sync::mpsc;

use crate::draw::{DrawError, DrawEvent, Drawn, Plan};
use crate::store::{BatchId, Store};
use crate::support::progress::Progress;

/// What one draw asks of the pools.
#[derive(Debug, Clone)]
pub(crate) enum Asks {
    /// The first draw: replies `skip..n` of the plan's own prompt (a reply
    /// past a gap that is already stored is the caller's to pass by).
    Count { n: usize, skip: usize },
    /// A repair round: each reply index with its prompt, but those
    /// `stored`.
    Prompts {
        asks: BTreeMap<usize, String>,
        stored: BTreeSet<usize>,
    },
}

impl Asks {
    /// Draws what is asked through `plan`, each event sent down `tx`.
    pub(crate) async fn draw(
        self,
        plan: &Plan,
        tx: mpsc::Sender<DrawEvent>,
        progress: &Progress,
    ) -> Result<(), DrawError> {
        match self {
            Asks::Count { n, skip } => plan.draw(n, skip, tx, progress).await,
            Asks::Prompts { asks, stored } => plan.draw_asking(asks, &stored, tx, progress).await,
        }
    }
}

/// Output tokens spent by a run's stored replies (counted from the
/// servers' usage, so a reply without usage costs nothing here) against
/// its budget, after which nothing more is drawn.
#[derive(Debug, Default)]
pub(crate) struct TokenBudget {
    max: Option<u64>,
    spent: AtomicU64,
}

impl TokenBudget {
    /// A budget of `max` tokens (none: no limit) of which the replies
    /// stored so far spent `spent`.
    pub(crate) fn new(max: Option<u64>, spent: u64) -> TokenBudget {
        TokenBudget {
            max,
            spent: spent.into(),
        }
    }

    /// `drawn` is stored: its output tokens are spent.
    pub(crate) fn spend(&self, drawn: &Drawn) {
        self.spent.fetch_add(
            drawn.reply.completion_tokens.unwrap_or(0),
            Ordering::Relaxed,
        );
    }

    /// Whether the budget is spent: no draw starts, and no more is asked.
    pub(crate) fn is_spent(&self) -> bool {
        self.max
            .is_some_and(|max| self.spent.load(Ordering::Relaxed) >= max)
    }

    /// The sentence a draw that stops at the budget says.
    pub(crate) fn spent_note(&self) -> String {
        format!(
            "the output-token budget is spent ({} of {}): nothing more is drawn",
            self.spent.load(Ordering::Relaxed),
            self.max.unwrap_or_default()
        )
    }
}

/// One event of a draw for `batch`: a reply is handed back; a cancelled
/// request's attempts are stored, and a pool that stopped is said.
pub(crate) async fn settle(
    store: &Store,
    progress: &Progress,
    batch: BatchId,
    event: DrawEvent,
) -> Result<Option<Drawn>> {
    match event {
        DrawEvent::Reply(drawn) => return Ok(Some(drawn)),
        DrawEvent::Cancelled { pool, attempts } => {
            store.record_cancelled(batch, &pool, &attempts).await?;
        }
        DrawEvent::PoolStopped { pool, reason } => {
            progress.note(&format!(
                "warning: pool `{pool}` stopped: {reason}; its remaining requests are not sent"
            ));
        }
    }
    Ok(None)
}
