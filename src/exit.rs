//! What `assay`'s exit status says: one class per status. The binary maps
//! a command's outcome to its class; a lane reads its runs' statuses back
//! to tell a run that failed from one whose store went away.

use crate::store::StoreError;

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
        (Some(_), Err(e)) if e.chain().any(|c| c.is::<StoreError>()) => {
            Err(e.context(LaneStoreAway))
        }
        (_, opened) => opened,
    }
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
}
