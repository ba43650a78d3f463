//! One drive for every run: a batch's or a suite's work goes on until it
//! ends or a signal comes, and a run that did not end by itself gets its
//! end written to its record (failed, with the reason, or interrupted).
//! A run that ends by itself has written its own end, with its last phase.

use std::future::Future;

use anyhow::Result;

use crate::engine::interrupt::{Interrupt, Interrupted, Run};
use crate::store::{BatchStatus, Store};
use crate::support::owner::Owner;

/// Runs `work` until it ends or `interrupt` fires. Dropping the work's
/// future cancels everything it has outstanding: the draw is aborted,
/// cargo and every run's process group are killed on drop. Every result
/// stored so far stays whole, because each write is one statement or one
/// transaction.
pub async fn drive<T>(
    store: &Store,
    interrupt: &Interrupt,
    run: Run,
    work: impl Future<Output = Result<T>>,
) -> Result<T> {
    let ended = tokio::select! {
        // A run that has just finished is finished, whatever came in at
        // the same moment.
        biased;
        done = work => Ok(done),
        signal = interrupt.fired() => Err(signal),
    };
    match ended {
        Ok(Ok(done)) => Ok(done),
        Ok(Err(e)) => {
            end(store, run, BatchStatus::Failed, &format!("{e:#}")).await?;
            Err(e.context(format!("{run} failed")))
        }
        Err(signal) => {
            end(
                store,
                run,
                BatchStatus::Interrupted,
                &format!("interrupted by {signal}"),
            )
            .await?;
            Err(Interrupted { run, signal }.into())
        }
    }
}

async fn end(store: &Store, run: Run, status: BatchStatus, reason: &str) -> Result<()> {
    match run {
        Run::Batch(batch) => store.finish_batch(batch, status, Some(reason)).await?,
        Run::Suite(suite) => {
            store
                .finish_suite(suite, &Owner::current(), status, Some(reason))
                .await?
        }
    }
    Ok(())
}
