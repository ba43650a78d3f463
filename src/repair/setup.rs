//! Repair as a run resolves it before it starts: the flags refused where
//! the run cannot honour them (a task's and a suite's checks, side by
//! side), and a batch's settings from its flags (a new batch) or from what
//! it stored (a resume), with the pools the rounds draw from checked like
//! the batch's own.

use anyhow::Result;

use crate::draw::{DrawOptions, Plan};
use crate::repair::settings::{RepairFlags, RepairSettings};
use crate::spec::Spec;

/// What else a suite's command was asked, that repair depends on.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunShape {
    /// `--pool`: completions drawn live.
    pub live_draw: bool,
    /// `--completions`: completions read from a file.
    pub completions: bool,
    pub queue: bool,
    pub resume: bool,
}

impl RepairFlags {
    /// A batch's: refuses `--repair-pool` where no round would draw from
    /// it (no `--rounds` and a spec that asks for none), rather than
    /// dropping it.
    pub fn check_task(&self, spec: &Spec) -> Result<(), RepairRefused> {
        if !self.pools.is_empty() && self.rounds.unwrap_or(spec.repair.rounds) == 0 {
            return Err(RepairRefused::Flags(
                "--repair-pool: draws the repair rounds, and none is asked; add --rounds K".into(),
            ));
        }
        Ok(())
    }

    /// A suite's: refuses, with one line, what the rest of the command
    /// cannot honour; checked before anything is read or written.
    pub fn check_suite(&self, shape: RunShape) -> Result<(), RepairRefused> {
        let refuse = |m: &str| Err(RepairRefused::Flags(m.to_owned()));
        let budgeted = self.rounds.is_some() || self.max_tokens.is_some();
        if shape.resume {
            if budgeted || self.feedback.is_some() {
                return refuse(
                    "suite run --resume: --rounds, --feedback and --max-tokens are the suite's \
                     own; a resume goes on with what it stored",
                );
            }
            return Ok(());
        }
        if self.rounds.is_none() {
            if self.feedback.is_some() {
                return refuse("--feedback: says what repair prompts carry; only with --rounds");
            }
            if !self.pools.is_empty() {
                return refuse("--repair-pool: draws the repair rounds; only with --rounds");
            }
        }
        if budgeted && shape.completions {
            return refuse(
                "--rounds, --max-tokens: a completions file cannot answer a repair prompt; \
                 draw the completions from model pools (--pool NAME -n K)",
            );
        }
        if budgeted && shape.queue {
            return refuse(
                "--rounds, --max-tokens: a suite's repair rounds and budget span all its \
                 problems (one plan, one stop, one budget per round), which the parts that \
                 lanes run apart cannot share; run it here, without --queue",
            );
        }
        if budgeted && !shape.live_draw {
            return refuse(
                "--rounds, --max-tokens: repair rounds draw from model pools; name the pool \
                 that answers them (--pool NAME -n K)",
            );
        }
        Ok(())
    }
}

/// A run's repair, resolved before it starts, for a batch and a suite
/// alike: the settings it stores (`None` when it asks for neither rounds
/// nor a budget, and on a suite's resume, whose stored settings hold), and
/// the plan of the pools its rounds draw from when not the run's own
/// (`--repair-pool`).
#[derive(Debug, Clone, Default)]
pub struct Repairing {
    pub settings: Option<RepairSettings>,
    pub plan: Option<Plan>,
}

/// Repair asked for in a way no run can do: bad input (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum RepairRefused {
    #[error("--repair-pool: {0}")]
    BadPool(String),
    #[error(
        "--rounds: a replay corpus cannot answer a repair prompt; draw from HTTP pools (--pool or --repair-pool)"
    )]
    CannotRepair,
    /// Repair flags that the run cannot honour, or out of bounds.
    #[error("{0}")]
    Flags(String),
}

/// Refuses, before a batch is queued, repair its lane could not do: rounds
/// (`--rounds`, else the spec's) drawn from a replay corpus. The rounds
/// draw from `--repair-pool`, else the batch's own pools (`--pool`, else
/// the spec's `draw.pools`). Nothing is read: the pools file is checked
/// and the keys are read by the lane that runs the item.
pub fn check_queued(
    spec: &Spec,
    draw: &DrawOptions,
    flags: &RepairFlags,
) -> Result<(), RepairRefused> {
    let rounds = flags.rounds.unwrap_or(spec.repair.rounds);
    let pools = if flags.pools.is_empty() {
        &draw.pools
    } else {
        &flags.pools
    };
    if rounds > 0 && Plan::draws_replay(spec, pools) {
        return Err(RepairRefused::CannotRepair);
    }
    Ok(())
}

/// The repair of a batch drawn by `plan` with `draw`'s options, from
/// `flags` (a new batch) or the settings it `stored` (a resume): no
/// settings when it asks for neither rounds nor a budget. The rounds' own pools are
/// planned and must accept a connection; each warning their plan has is
/// handed to `warn` as it comes. A replay corpus cannot answer a repair
/// prompt.
pub async fn resolve(
    spec: &Spec,
    n: usize,
    plan: &Plan,
    draw: &DrawOptions,
    flags: RepairFlags,
    stored: Option<String>,
    warn: &dyn Fn(&str),
) -> Result<Repairing> {
    let settings = match stored {
        Some(json) => RepairSettings::from_json(&json),
        None => RepairSettings::for_task(spec, &flags, n),
    };
    let Some(settings) = settings else {
        return Ok(Repairing::default());
    };
    let pools = settings.pool_choices().map_err(RepairRefused::BadPool)?;
    let repair_plan = if pools.is_empty() {
        None
    } else {
        let opts = DrawOptions {
            pools,
            ..draw.clone()
        };
        let (p, warnings) = Plan::build(spec, &opts)?;
        for w in warnings {
            warn(&w);
        }
        p.check_reachable().await?;
        Some(p)
    };
    if settings.rounds > 0 && !repair_plan.as_ref().unwrap_or(plan).can_repair() {
        return Err(RepairRefused::CannotRepair.into());
    }
    Ok(Repairing {
        settings: Some(settings),
        plan: repair_plan,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Feedback;

    fn flags(rounds: Option<u32>, feedback: bool, pool: bool, tokens: Option<u64>) -> RepairFlags {
        RepairFlags {
            rounds,
            feedback: feedback.then_some(Feedback::ErrorsOnly),
            pools: if pool {
                vec!["fixer".parse().unwrap()]
            } else {
                Vec::new()
            },
            max_tokens: tokens,
        }
    }

    #[test]
    fn a_suite_s_repair_flags_are_refused_where_they_cannot_be_honoured() {
        let live = RunShape {
            live_draw: true,
            ..RunShape::default()
        };
        let file = RunShape {
            completions: true,
            ..RunShape::default()
        };
        let queued = RunShape {
            queue: true,
            ..live
        };
        let resume = RunShape {
            resume: true,
            ..RunShape::default()
        };
        let refused =
            |f: RepairFlags, shape: RunShape| f.check_suite(shape).unwrap_err().to_string();
        assert!(flags(Some(2), true, true, Some(10))
            .check_suite(live)
            .is_ok());
        assert!(flags(None, false, false, Some(10))
            .check_suite(live)
            .is_ok());
        assert!(flags(None, false, true, None).check_suite(resume).is_ok());
        assert!(refused(flags(None, true, false, None), live).starts_with("--feedback:"));
        assert!(refused(flags(None, false, true, None), live).starts_with("--repair-pool:"));
        assert!(refused(flags(Some(1), false, false, None), file).contains("completions file"));
        assert!(refused(flags(Some(1), false, false, None), queued).contains("lanes"));
        assert!(
            refused(flags(Some(1), false, false, None), RunShape::default())
                .contains("--pool NAME")
        );
        assert!(refused(flags(Some(1), false, false, None), resume).contains("--resume"));
    }
}
