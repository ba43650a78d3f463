//! Exit codes: which errors are the user's input (2), which a run stopped
//! by a signal (130), and which a failed run (1). Decided here, once, so
//! every front end (the binary, a library caller, a lane reading its
//! runs) classes an error the same way.

use crate::store::StoreError;

/// An error that is the user's input, not a failure of the run: a flag's
/// value, or a combination of flags, refused with one line.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// How a command ended, as its exit code says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitClass {
    /// Bad input: nothing was done, and the one line says what to fix.
    BadInput,
    /// Stopped by Ctrl-C or SIGTERM; what was stored is kept.
    Stopped,
    /// The run failed (a host error, a broken build, a lost store).
    Failed,
}

impl ExitClass {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            ExitClass::BadInput => 2,
            ExitClass::Stopped => 130,
            ExitClass::Failed => 1,
        }
    }

    /// The class of an error, by the first cause in its chain that has one.
    pub fn of(e: &anyhow::Error) -> ExitClass {
        if e.chain().any(is_stop) {
            ExitClass::Stopped
        } else if e.chain().any(is_bad_input) {
            ExitClass::BadInput
        } else {
            ExitClass::Failed
        }
    }
}

fn is_stop(cause: &(dyn std::error::Error + 'static)) -> bool {
    cause.is::<crate::interrupt::Interrupted>()
        || cause.is::<crate::interrupt::Stopped>()
        || cause.is::<crate::suite_run::SuiteInterrupted>()
}

fn is_bad_input(cause: &(dyn std::error::Error + 'static)) -> bool {
    cause.is::<crate::spec::SpecError>()
        || cause.is::<crate::draw::DrawError>()
        || matches!(
            cause.downcast_ref::<StoreError>(),
            Some(
                StoreError::Open { .. }
                    | StoreError::Migrate { .. }
                    | StoreError::NoBatch { .. }
                    | StoreError::NoSuite { .. }
                    | StoreError::TooNew { .. }
                    | StoreError::ReadOnly { .. }
                    | StoreError::NotResumable { .. }
                    | StoreError::Missing { .. }
            )
        )
        || cause.is::<UsageError>()
        || cause.is::<crate::suite::SuiteError>()
        || cause.is::<crate::outputs::PathError>()
        || cause.is::<crate::views::SuiteBatch>()
        || cause.is::<crate::package::BuildTimedOut>()
        || cause.is::<crate::promote::PromoteError>()
        || cause.is::<crate::task::TaskError>()
        || matches!(
            cause.downcast_ref::<crate::task::SkeletonError>(),
            Some(
                crate::task::SkeletonError::BadName { .. }
                    | crate::task::SkeletonError::Exists { .. }
            )
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_anywhere_in_the_chain_decides() {
        let usage = anyhow::Error::new(UsageError("-n: must be at least 1".into()));
        assert_eq!(ExitClass::of(&usage), ExitClass::BadInput);
        assert_eq!(
            ExitClass::of(&usage.context("while starting")),
            ExitClass::BadInput
        );
        let stopped = anyhow::Error::new(crate::interrupt::Interrupted {
            batch: 1,
            signal: "SIGINT",
        });
        assert_eq!(ExitClass::of(&stopped).code(), 130);
        let host = anyhow::anyhow!("disk full");
        assert_eq!(ExitClass::of(&host).code(), 1);
    }
}
