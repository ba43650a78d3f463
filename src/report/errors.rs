//! What rustc said of the units that did not build, read from the store:
//! `assay show N --errors` and `assay suite show S --errors`. The text of
//! each unit is the text of its error file ([`file_text`], the one format
//! `engine::errors` writes), so any machine that reaches the store prints
//! what the lane that built the batch found, whichever disk holds the
//! files.

use std::collections::HashMap;
use std::fmt;

use crate::store::{BatchId, Store, StoreError, SuiteId};

/// An error file's text: a header line naming the unit and its verdict, a
/// blank line, then what rustc said.
pub fn file_text(unit: &str, verdict: &dyn fmt::Display, diagnostics: &str) -> String {
    format!("{unit}: {verdict}\n\n{diagnostics}")
}

/// One unit that did not build: a task's candidate or a suite's program.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct UnitErrors {
    /// `candidate 3`, or `PROBLEM #2` for a suite's program.
    pub unit: String,
    pub verdict: String,
    pub diagnostics: String,
}

impl fmt::Display for UnitErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&file_text(&self.unit, &self.verdict, &self.diagnostics))
    }
}

/// The units' texts, a blank line between two.
pub fn render(units: &[UnitErrors]) -> String {
    units
        .iter()
        .map(|u| {
            let text = u.to_string();
            if text.ends_with('\n') {
                text
            } else {
                text + "\n"
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Asked for one unit the stored record does not hold.
#[derive(Debug, thiserror::Error)]
pub enum ErrorsError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("batch {batch} has no candidate {candidate}")]
    NoCandidate { batch: BatchId, candidate: usize },
    #[error("suite {suite} has no problem `{problem}`")]
    NoProblem { suite: SuiteId, problem: String },
}

/// The batch's candidates that did not build, in candidate order (only
/// `only`, when given), from the batch's own probe run: the verdicts
/// `show` lists, repair rounds' included.
pub async fn batch_errors(
    store: &Store,
    batch: BatchId,
    only: Option<usize>,
) -> Result<Vec<UnitErrors>, ErrorsError> {
    if let Some(candidate) = only {
        if !store
            .candidates(batch)
            .await?
            .iter()
            .any(|c| c.idx == candidate)
        {
            return Err(ErrorsError::NoCandidate { batch, candidate });
        }
    }
    let Some(run) = store.first_probe_run(batch).await? else {
        return Ok(Vec::new());
    };
    Ok(store
        .probe_verdicts(batch, run)
        .await?
        .into_iter()
        .filter(|v| !v.verdict.compiled() && only.is_none_or(|c| c == v.idx))
        .map(|v| UnitErrors {
            unit: format!("candidate {}", v.idx),
            verdict: v.verdict.to_string(),
            diagnostics: v.diagnostics,
        })
        .collect())
}

/// The suite's programs that did not build, in problem then completion
/// order (only those of `problem`, when given).
pub async fn suite_errors(
    store: &Store,
    suite: SuiteId,
    problem: Option<&str>,
) -> Result<Vec<UnitErrors>, ErrorsError> {
    let problems = store.suite_problems(suite).await?;
    if let Some(name) = problem {
        if !problems.iter().any(|p| p.problem.name == name) {
            return Err(ErrorsError::NoProblem {
                suite,
                problem: name.to_owned(),
            });
        }
    }
    let names: HashMap<BatchId, &str> = problems
        .iter()
        .map(|p| (p.batch_id, p.problem.name.as_str()))
        .collect();
    let mut units = Vec::new();
    for c in store.suite_completions(suite).await? {
        let Some(&name) = names.get(&c.batch_id) else {
            continue;
        };
        if problem.is_some_and(|p| p != name) {
            continue;
        }
        let Some(outcome) = c.outcome else { continue };
        let (Some(verdict), Some(diagnostics)) = (outcome.probe, outcome.diagnostics) else {
            continue;
        };
        if verdict.compiled() {
            continue;
        }
        units.push(UnitErrors {
            unit: format!("{name} #{}", c.idx),
            verdict: verdict.to_string(),
            diagnostics,
        });
    }
    Ok(units)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_printed_a_blank_line_apart() {
        let unit = |n: usize, text: &str| UnitErrors {
            unit: format!("candidate {n}"),
            verdict: "compile_error(E0425)".into(),
            diagnostics: text.into(),
        };
        assert_eq!(
            render(&[unit(1, "error[E0425]: a"), unit(4, "error[E0425]: b\n")]),
            "candidate 1: compile_error(E0425)\n\nerror[E0425]: a\n\n\
             candidate 4: compile_error(E0425)\n\nerror[E0425]: b\n"
        );
        assert_eq!(render(&[]), "");
    }

    #[test]
    fn a_unit_prints_as_its_error_file_reads() {
        let unit = UnitErrors {
            unit: "candidate 3".into(),
            verdict: "compile_error(E0308)".into(),
            diagnostics: "error[E0308]: mismatched types".into(),
        };
        assert_eq!(
            unit.to_string(),
            "candidate 3: compile_error(E0308)\n\nerror[E0308]: mismatched types"
        );
        assert_eq!(
            unit.to_string(),
            file_text(
                "candidate 3",
                &"compile_error(E0308)",
                "error[E0308]: mismatched types"
            )
        );
    }
}
