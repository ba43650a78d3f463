//! Interrupt: Ctrl-C and SIGTERM.
//!
//! The first SIGINT or SIGTERM asks the running batch to stop: the pipeline
//! drops its outstanding work (requests, cargo, scoring children are killed
//! on drop), keeps what is stored and marks the batch `interrupted`. A second
//! signal exits at once with status 130, after killing the scoring children
//! (they run in process groups of their own, so a terminal's Ctrl-C does not
//! reach them); whatever is stored stays, and the next `assay` to open the
//! database marks the batch interrupted because its owner is gone.

use std::fmt;

use tokio::sync::watch;

use crate::store::{BatchId, SuiteId};
use crate::support::hint::{CommandLine, Reach};

/// A request to stop, shared by whoever needs to notice it.
#[derive(Debug, Clone)]
pub struct Interrupt {
    rx: watch::Receiver<Option<&'static str>>,
    // Kept so a `never` interrupt's channel stays open.
    _tx: Option<std::sync::Arc<watch::Sender<Option<&'static str>>>>,
}

/// What a drive runs, named by the record its end is written to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    Batch(BatchId),
    Suite(SuiteId),
}

impl fmt::Display for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Run::Batch(id) => write!(f, "batch {id}"),
            Run::Suite(id) => write!(f, "suite {id}"),
        }
    }
}

/// The run was stopped by a signal; what it had is stored. The command
/// that finishes it needs the caller's flags:
/// [`Stopped`] names it.
#[derive(Debug, thiserror::Error)]
#[error("{run} interrupted by {signal}; what it had is kept")]
pub struct Interrupted {
    pub run: Run,
    pub signal: &'static str,
}

/// A batch or suite stopped by a signal, with the command that finishes
/// it: `--resume` and the flags that reach the same store.
#[derive(Debug, thiserror::Error)]
#[error("{what} interrupted by {signal}; what it had is kept; finish it with `{resume}`")]
pub struct Stopped {
    /// `batch 3`, `suite 2`.
    pub what: String,
    pub signal: &'static str,
    pub resume: CommandLine,
}

impl Stopped {
    /// The command that finishes an interrupted run.
    pub fn of(interrupted: &Interrupted, reach: &Reach) -> Stopped {
        match interrupted.run {
            Run::Batch(batch) => Stopped::batch(batch, interrupted.signal, reach),
            Run::Suite(suite) => Stopped::suite(suite, interrupted.signal, reach),
        }
    }

    pub fn batch(batch: i64, signal: &'static str, reach: &Reach) -> Stopped {
        Stopped {
            what: format!("batch {batch}"),
            signal,
            resume: CommandLine::assay(["run", "--resume", &batch.to_string()]).reaching(reach),
        }
    }

    pub fn suite(suite: i64, signal: &'static str, reach: &Reach) -> Stopped {
        Stopped {
            what: format!("suite {suite}"),
            signal,
            resume: CommandLine::assay(["suite", "run", "--resume", &suite.to_string()])
                .reaching(reach),
        }
    }
}

impl Interrupt {
    /// An interrupt that never fires (library use, tests).
    pub fn never() -> Interrupt {
        let (tx, rx) = watch::channel(None);
        Interrupt {
            rx,
            _tx: Some(std::sync::Arc::new(tx)),
        }
    }

    /// Listens for SIGINT and SIGTERM. Must be called inside a tokio runtime.
    pub fn on_signals() -> std::io::Result<Interrupt> {
        use tokio::signal::unix::{signal, SignalKind};
        let mut sigint = signal(SignalKind::interrupt())?;
        let mut sigterm = signal(SignalKind::terminate())?;
        let (tx, rx) = watch::channel(None);
        tokio::spawn(async move {
            let first = tokio::select! {
                _ = sigint.recv() => "SIGINT",
                _ = sigterm.recv() => "SIGTERM",
            };
            // Said always, not logged: whoever pressed Ctrl-C waits for it.
            eprintln!("assay: stopping on {first}; a second signal exits at once");
            let _ = tx.send(Some(first));
            tokio::select! {
                _ = sigint.recv() => {}
                _ = sigterm.recv() => {}
            }
            crate::score::kill_live_groups();
            eprintln!("assay: stopped at once by a second signal");
            std::process::exit(130);
        });
        Ok(Interrupt { rx, _tx: None })
    }

    /// Resolves with the signal's name once a stop was asked for.
    pub async fn fired(&self) -> &'static str {
        let mut rx = self.rx.clone();
        loop {
            if let Some(signal) = *rx.borrow_and_update() {
                return signal;
            }
            if rx.changed().await.is_err() {
                // The listener is gone: no stop will ever be asked for.
                std::future::pending::<()>().await;
            }
        }
    }
}
