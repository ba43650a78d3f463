//! What `assay`'s exit status says: one class per status. The binary maps
//! a command's outcome to its class; a lane reads its runs' statuses back
//! to tell a run that failed from one whose store went away.

use crate::store::StoreError;

/// An error that is the user's input, not a failure of the run: a flag's
/// value, or a combination of flags, refused with one line.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The classes of `assay`'s exit statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitClass {
    /// 0: the command did what it was asked.
    Done,
    /// 1: it failed (the batch or suite is marked failed, with the reason).
    Failed,
    /// 2: its input was refused before anything was written.
    BadInput,
    /// 3: the store went away (not reached, or its connection lost):
    /// what was stored is kept, and `--resume` goes on once it is back.
    StoreAway,
    /// 130: stopped by Ctrl-C or SIGTERM; what was stored is kept.
    Interrupted,
}

impl ExitClass {
    pub const ALL: [ExitClass; 5] = [
        ExitClass::Done,
        ExitClass::Failed,
        ExitClass::BadInput,
        ExitClass::StoreAway,
        ExitClass::Interrupted,
    ];

    /// The exit status.
    pub const fn code(self) -> u8 {
        match self {
            ExitClass::Done => 0,
            ExitClass::Failed => 1,
            ExitClass::BadInput => 2,
            ExitClass::StoreAway => 3,
            ExitClass::Interrupted => 130,
        }
    }

    /// The class of a command's error, by the causes in its chain: a stop
    /// first, then a store that went away, then bad input; else a failure.
    pub fn of(e: &anyhow::Error) -> ExitClass {
        if e.chain().any(is_stop) {
            ExitClass::Interrupted
        } else if is_store_away(e) {
            ExitClass::StoreAway
        } else if e.chain().any(is_bad_input) {
            ExitClass::BadInput
        } else {
            ExitClass::Failed
        }
    }

    /// The class of an exit status; `None` for one `assay` never exits
    /// with (a crash, a signal).
    pub fn of_code(code: i32) -> Option<ExitClass> {
        ExitClass::ALL
            .into_iter()
            .find(|class| i32::from(class.code()) == code)
    }
}

/// A lane's run could not open its store. The lane reached that store just
/// before (it claimed the item there, with the same address and
/// environment), so the store went away; the address was not mistyped.
#[derive(Debug, thiserror::Error)]
#[error("the lane's store went away")]
pub struct LaneStoreAway;

/// Whether a command failed because its store went away, rather than for
/// its input or its work: [`ExitClass::StoreAway`].
pub fn is_store_away(e: &anyhow::Error) -> bool {
    e.downcast_ref::<LaneStoreAway>().is_some()
        || e.chain().any(|cause| {
            cause
                .downcast_ref::<StoreError>()
                .is_some_and(StoreError::is_away)
        })
}

/// The store of a run that `work_item` says a lane started, as opened: an
/// error opening it means the store went away ([`LaneStoreAway`]). A run
/// a person started keeps its error, where a store that cannot be opened
/// is bad input.
pub fn opened_for<T>(work_item: Option<i64>, opened: anyhow::Result<T>) -> anyhow::Result<T> {
    match (work_item, opened) {
        (Some(_), Err(e))
            if e.chain().any(|c| {
                matches!(
                    c.downcast_ref::<StoreError>(),
                    Some(StoreError::Open { .. })
                )
            }) =>
        {
            Err(e.context(LaneStoreAway))
        }
        (_, opened) => opened,
    }
}

fn is_stop(cause: &(dyn std::error::Error + 'static)) -> bool {
    cause.is::<crate::engine::interrupt::Interrupted>()
        || cause.is::<crate::engine::interrupt::Stopped>()
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
        || cause.is::<crate::repair::setup::RepairRefused>()
        || cause.is::<crate::suite::SuiteError>()
        || cause.is::<crate::engine::outputs::PathError>()
        || cause.is::<crate::report::views::SuiteBatch>()
        || cause.is::<crate::build::package::BuildTimedOut>()
        || cause.is::<crate::engine::promote::PromoteError>()
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
    fn every_class_round_trips_through_its_status() {
        for class in ExitClass::ALL {
            assert_eq!(ExitClass::of_code(class.code().into()), Some(class));
        }
        assert_eq!(ExitClass::of_code(101), None, "a panic is no class");
    }

    #[test]
    fn a_lane_s_run_that_cannot_open_its_store_found_it_away() {
        let db: crate::store::Db = "postgres://lane@localhost/rig".parse().unwrap();
        let open = || -> anyhow::Result<()> {
            Err(StoreError::Open {
                db: db.clone(),
                message: "cannot connect: connection refused".into(),
            }
            .into())
        };
        let by_lane = opened_for(Some(4), open()).unwrap_err();
        assert!(is_store_away(&by_lane));
        assert!(
            format!("{by_lane:#}").contains("connection refused"),
            "the store's own words stay: {by_lane:#}"
        );
        assert!(!is_store_away(&opened_for(None, open()).unwrap_err()));
        // Not the store's: a lane's run keeps its error.
        let other = opened_for::<()>(Some(4), Err(anyhow::anyhow!("no spec"))).unwrap_err();
        assert!(!is_store_away(&other));
    }

    #[test]
    fn a_cause_anywhere_in_the_chain_decides() {
        let usage = anyhow::Error::new(UsageError("-n: must be at least 1".into()));
        assert_eq!(ExitClass::of(&usage), ExitClass::BadInput);
        assert_eq!(
            ExitClass::of(&usage.context("while starting")),
            ExitClass::BadInput
        );
        let stopped = anyhow::Error::new(crate::engine::interrupt::Interrupted {
            run: crate::engine::interrupt::Run::Batch(1),
            signal: "SIGINT",
        });
        assert_eq!(ExitClass::of(&stopped).code(), 130);
        let host = anyhow::anyhow!("disk full");
        assert_eq!(ExitClass::of(&host).code(), 1);
    }
}
