//! What a run asks of repair, in one shape for both kinds: the flags as a
//! command got them ([`RepairFlags`], checked before anything is written),
//! the settings stored with a batch or a suite so that a resume goes on
//! with the same ([`RepairSettings`]), and the one stop rule every round
//! loop asks after each round ([`stop_rule`]).

use serde::{Deserialize, Serialize};

use crate::spec::{Feedback, PoolChoice, Spec, StopWhen};

/// What a command's flags ask of repair, as given (clap checked only their
/// types and bounds): `run` and `suite run` fill the same struct.
#[derive(Debug, Clone, Default)]
pub struct RepairFlags {
    /// `--rounds`: repair rounds after the first draw (`spec::check_rounds`);
    /// `None`: a task's spec decides, a suite repairs not.
    pub rounds: Option<u32>,
    /// `--feedback` (a suite's): what a repair prompt carries; a task's
    /// spec says it.
    pub feedback: Option<Feedback>,
    /// `--repair-pool`: draw the rounds from these pools instead of the
    /// run's own.
    pub pools: Vec<PoolChoice>,
    /// `--max-tokens`: no draw starts once the replies have spent this many
    /// output tokens (`spec::check_token_budget`).
    pub max_tokens: Option<u64>,
}

/// A run's repair settings, stored as JSON with its batch
/// (`batches.repair`) or its suite (`suites.repair`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairSettings {
    /// Repair rounds after the first draw.
    pub rounds: u32,
    /// Replies a task's repair round draws, spread over its parents; a
    /// suite's round asks one child of each failing completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<usize>,
    /// When a task's rounds stop early (`all_pass`, `beats_committed`,
    /// `never`); a suite's problem stops once one completion passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<String>,
    /// `full` or `errors_only`.
    pub feedback: String,
    /// The pools repair rounds draw from (`--repair-pool`); empty: the
    /// run's own.
    #[serde(default)]
    pub pools: Vec<String>,
    /// Output tokens after which nothing more is drawn (`--max-tokens`).
    #[serde(default)]
    pub max_tokens: Option<u64>,
}

impl RepairSettings {
    /// A task's: the spec's `[repair]` table with the flags' overrides,
    /// `n` replies per round unless the spec says otherwise. `None` when
    /// it asks for neither rounds nor a budget.
    pub fn for_task(spec: &Spec, flags: &RepairFlags, n: usize) -> Option<RepairSettings> {
        RepairSettings {
            rounds: flags.rounds.unwrap_or(spec.repair.rounds),
            candidates: Some(spec.repair.candidates.unwrap_or(n)),
            stop: Some(spec.repair.stop.as_str().to_owned()),
            feedback: spec.repair.feedback.as_str().to_owned(),
            pools: flags.pools.iter().map(ToString::to_string).collect(),
            max_tokens: flags.max_tokens,
        }
        .asked()
    }

    /// A suite's, from its flags alone; `None` when they ask for neither
    /// rounds nor a budget.
    pub fn for_suite(flags: &RepairFlags) -> Option<RepairSettings> {
        RepairSettings {
            rounds: flags.rounds.unwrap_or(0),
            candidates: None,
            stop: None,
            feedback: flags.feedback.unwrap_or_default().as_str().to_owned(),
            pools: flags.pools.iter().map(ToString::to_string).collect(),
            max_tokens: flags.max_tokens,
        }
        .asked()
    }

    fn asked(self) -> Option<RepairSettings> {
        (self.rounds > 0 || self.max_tokens.is_some()).then_some(self)
    }

    pub fn stop_when(&self) -> StopWhen {
        self.stop
            .as_deref()
            .and_then(|s| s.parse().ok())
            .unwrap_or_default()
    }

    pub fn feedback_mode(&self) -> Feedback {
        self.feedback.parse().unwrap_or_default()
    }

    /// The pools the rounds draw from, parsed; the error is the sentence.
    pub fn pool_choices(&self) -> Result<Vec<PoolChoice>, String> {
        self.pools.iter().map(|p| p.parse()).collect()
    }

    /// Stored as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("plain data serialises")
    }

    pub fn from_json(json: &str) -> Option<RepairSettings> {
        serde_json::from_str(json).ok()
    }
}

/// Why no round follows the last one (stored as the snake_case name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Stopped {
    /// A task's candidate passes every case; every problem of a suite has a
    /// passing completion.
    AllPass,
    /// A task's candidate passes more cases than the committed one.
    BeatsCommitted,
    /// Every round asked for has run.
    RoundsDone,
    /// No failing candidate or completion is left to repair.
    NoParents,
    /// The output-token budget is spent.
    Budget,
}

impl Stopped {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What follows a round, for either kind: the next round as planned (and
/// stored), or why none does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next<P> {
    Round(P),
    Stop(Stopped),
}

/// The one stop rule, asked after round `done` ended, before the next
/// round is planned; in this order: what the rounds came to (`solved`, the
/// kind's own reading: a task's stop rule, a suite's every problem
/// passing), then the output-token budget (`spent`), then the rounds asked
/// for. `None`: plan the next round (which stops as `NoParents` when it
/// finds none).
pub fn stop_rule(
    settings: &RepairSettings,
    done: u32,
    solved: Option<Stopped>,
    spent: u64,
) -> Option<Stopped> {
    solved
        .or(settings
            .max_tokens
            .filter(|max| spent >= *max)
            .map(|_| Stopped::Budget))
        .or((done >= settings.rounds).then_some(Stopped::RoundsDone))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(rounds: u32, max_tokens: Option<u64>) -> RepairSettings {
        RepairSettings {
            rounds,
            candidates: Some(4),
            stop: Some("all_pass".into()),
            feedback: "full".into(),
            pools: vec!["fixer".into()],
            max_tokens,
        }
    }

    #[test]
    fn the_stop_rule_asks_in_one_order() {
        let s = settings(2, Some(100));
        // Solved first: a pass is the reason even when the budget is spent
        // and the rounds are done.
        assert_eq!(
            stop_rule(&s, 2, Some(Stopped::AllPass), 500),
            Some(Stopped::AllPass)
        );
        assert_eq!(stop_rule(&s, 2, None, 500), Some(Stopped::Budget));
        assert_eq!(stop_rule(&s, 2, None, 99), Some(Stopped::RoundsDone));
        assert_eq!(stop_rule(&s, 1, None, 99), None);
        assert_eq!(stop_rule(&settings(1, None), 0, None, u64::MAX), None);
    }

    #[test]
    fn a_task_s_and_a_suite_s_settings_round_trip_through_json() {
        let task = settings(2, Some(4000));
        assert_eq!(RepairSettings::from_json(&task.to_json()), Some(task));
        // A suite's row, as stored before the settings were one struct.
        let stored = r#"{"rounds":2,"feedback":"errors_only","pools":["fixer"],"max_tokens":100}"#;
        let suite = RepairSettings::from_json(stored).unwrap();
        assert_eq!((suite.candidates, suite.stop.as_deref()), (None, None));
        assert_eq!(suite.feedback_mode(), Feedback::ErrorsOnly);
        assert_eq!(suite.to_json(), stored);
    }

    #[test]
    fn flags_that_ask_nothing_give_no_settings() {
        assert_eq!(RepairSettings::for_suite(&RepairFlags::default()), None);
        let budget = RepairFlags {
            max_tokens: Some(10),
            ..RepairFlags::default()
        };
        assert_eq!(
            RepairSettings::for_suite(&budget).map(|s| s.rounds),
            Some(0)
        );
    }
}
