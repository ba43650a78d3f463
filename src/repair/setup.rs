//! A batch's repair rounds as a run resolves them before it starts: from
//! its flags (a new batch) or from what the batch stored (a resume), with
//! the pools the rounds draw from checked like the batch's own. Every
//! command that starts a batch with repair rounds asks here.

use anyhow::Result;

use crate::draw::{DrawOptions, Plan};
use crate::repair::planner::RepairSettings;
use crate::spec::{PoolChoice, Spec};

/// What a new batch's flags ask of repair.
#[derive(Debug, Clone, Default)]
pub struct RepairFlags {
    /// `--rounds` (checked by `spec::check_rounds`); `None`: the spec's.
    pub rounds: Option<u32>,
    /// `--repair-pool`: draw the rounds from these pools instead of the
    /// batch's own.
    pub pools: Vec<PoolChoice>,
    /// `--max-tokens` (checked by `spec::check_token_budget`).
    pub max_tokens: Option<u64>,
}

impl RepairFlags {
    /// Refuses `--repair-pool` where no round would draw from it (no
    /// `--rounds` and a spec that asks for none), rather than dropping it.
    pub fn check(&self, spec: &Spec) -> Result<(), RepairRefused> {
        if !self.pools.is_empty() && self.rounds.unwrap_or(spec.repair.rounds) == 0 {
            return Err(RepairRefused::Flags(
                "--repair-pool: draws the repair rounds, and none is asked; add --rounds K".into(),
            ));
        }
        Ok(())
    }
}

/// A batch's repair, resolved: its settings (stored with the batch) and
/// the plan of its own pools, when not the batch's.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub settings: RepairSettings,
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
/// `flags` (a new batch) or the settings it `stored` (a resume): `None`
/// when it asks for neither rounds nor a budget. The rounds' own pools are
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
) -> Result<Option<Resolved>> {
    let settings = match stored {
        Some(json) => RepairSettings::from_json(&json),
        None => {
            let mut s = RepairSettings::new(spec, flags.rounds, n);
            s.pools = flags.pools.iter().map(ToString::to_string).collect();
            s.max_tokens = flags.max_tokens;
            (s.rounds > 0 || s.max_tokens.is_some()).then_some(s)
        }
    };
    let Some(settings) = settings else {
        return Ok(None);
    };
    let pools: Vec<PoolChoice> = settings
        .pools
        .iter()
        .map(|p| p.parse())
        .collect::<Result<_, String>>()
        .map_err(RepairRefused::BadPool)?;
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
    Ok(Some(Resolved {
        settings,
        plan: repair_plan,
    }))
}
