//! A suite run as figures: per problem n, compiled, passed and the status
//! of every completion in input order; pass@1 and pass@k over the suite;
//! and two runs over the same problems side by side. Pure: built from
//! outcomes, so every command that prints a suite prints the same thing.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{paired_bootstrap, pass_at_k, suite_pass_at_k, CompletionOutcome, Interval, Status};

/// The k of `pass_at_k` reports, those up to the smallest n.
pub const REPORTED_K: [usize; 3] = [1, 10, 100];

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SuiteReport {
    pub problems: Vec<ProblemReport>,
    /// The suite mean of pass@1; None when a problem has no completion.
    pub pass_at_1: Option<f64>,
    /// k -> suite mean, for k in [`REPORTED_K`] up to the smallest n.
    pub pass_at_k: BTreeMap<usize, f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProblemReport {
    pub name: String,
    pub n: usize,
    pub compiled: usize,
    /// Completions whose assay status is OK.
    pub passed: usize,
    /// assay's status of each completion, in input order.
    #[serde(serialize_with = "status_strings")]
    pub statuses: Vec<Status>,
    /// MultiPL-E's status of the same completions.
    #[serde(serialize_with = "status_strings")]
    pub multiple_statuses: Vec<Status>,
    /// Cases passed over cases run, summed over the completions.
    pub cases_passed: usize,
    pub cases: usize,
    /// Each completion's (cases passed, cases), in input order; `None` for
    /// one that did not run. Not in the JSON, whose export rows carry it.
    #[serde(skip)]
    pub case_counts: Vec<Option<(usize, usize)>>,
}

impl ProblemReport {
    pub fn new(name: &str, outcomes: &[CompletionOutcome]) -> ProblemReport {
        let statuses: Vec<Status> = outcomes.iter().map(CompletionOutcome::status).collect();
        let case_counts: Vec<Option<(usize, usize)>> = outcomes
            .iter()
            .map(|o| matches!(o, CompletionOutcome::Ran { .. }).then(|| o.cases_passed()))
            .collect();
        let (cases_passed, cases) = case_counts
            .iter()
            .flatten()
            .fold((0, 0), |(p, t), (dp, dt)| (p + dp, t + dt));
        ProblemReport {
            name: name.to_owned(),
            n: outcomes.len(),
            compiled: outcomes
                .iter()
                .filter(|o| matches!(o, CompletionOutcome::Ran { .. }))
                .count(),
            passed: statuses.iter().filter(|s| **s == Status::Ok).count(),
            multiple_statuses: outcomes
                .iter()
                .map(CompletionOutcome::multiple_status)
                .collect(),
            statuses,
            cases_passed,
            cases,
            case_counts,
        }
    }

    pub fn pass_at(&self, k: usize) -> Option<f64> {
        pass_at_k(self.n, self.passed, k)
    }
}

impl SuiteReport {
    /// `problems` pairs each problem's name with its completions' outcomes.
    pub fn new<'a>(
        problems: impl IntoIterator<Item = (&'a str, &'a [CompletionOutcome])>,
    ) -> SuiteReport {
        let problems: Vec<ProblemReport> = problems
            .into_iter()
            .map(|(name, outcomes)| ProblemReport::new(name, outcomes))
            .collect();
        let nc: Vec<(usize, usize)> = problems.iter().map(|p| (p.n, p.passed)).collect();
        let pass_at_k = REPORTED_K
            .iter()
            .filter_map(|&k| suite_pass_at_k(&nc, k).map(|v| (k, v)))
            .collect();
        SuiteReport {
            pass_at_1: suite_pass_at_k(&nc, 1),
            pass_at_k,
            problems,
        }
    }
}

/// Two runs over the same problems: per-problem pass@k, both means, and
/// the difference (b - a) with its paired bootstrap interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SuiteComparison {
    pub k: usize,
    /// (name, a's pass@k, b's pass@k), ordered by |b - a|, largest first,
    /// then by name.
    pub problems: Vec<(String, f64, f64)>,
    pub mean_a: f64,
    pub mean_b: f64,
    #[serde(serialize_with = "interval")]
    pub difference: Interval,
}

/// Why two runs cannot be compared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompareError {
    #[error("the runs are over different problems (first difference: `{0}`)")]
    DifferentProblems(String),
    #[error("problem `{problem}` has {n_a} completions in the first run and {n_b} in the second; pass@{k} needs at least {k} in each")]
    TooFewSamples {
        problem: String,
        k: usize,
        n_a: usize,
        n_b: usize,
    },
    #[error("the runs have no problem")]
    Empty,
}

impl SuiteComparison {
    pub fn new(
        a: &SuiteReport,
        b: &SuiteReport,
        k: usize,
        resamples: usize,
        seed: u64,
    ) -> Result<SuiteComparison, CompareError> {
        if a.problems.len() != b.problems.len() {
            let name = a.problems.iter().chain(&b.problems).find(|p| {
                !a.problems.iter().any(|q| q.name == p.name)
                    || !b.problems.iter().any(|q| q.name == p.name)
            });
            return Err(CompareError::DifferentProblems(
                name.map_or_else(String::new, |p| p.name.clone()),
            ));
        }
        let mut rows = Vec::with_capacity(a.problems.len());
        for (pa, pb) in a.problems.iter().zip(&b.problems) {
            if pa.name != pb.name {
                return Err(CompareError::DifferentProblems(pa.name.clone()));
            }
            let too_few = || CompareError::TooFewSamples {
                problem: pa.name.clone(),
                k,
                n_a: pa.n,
                n_b: pb.n,
            };
            rows.push((
                pa.name.clone(),
                pa.pass_at(k).ok_or_else(too_few)?,
                pb.pass_at(k).ok_or_else(too_few)?,
            ));
        }
        let xs: Vec<f64> = rows.iter().map(|r| r.1).collect();
        let ys: Vec<f64> = rows.iter().map(|r| r.2).collect();
        let difference = paired_bootstrap(&xs, &ys, resamples, seed).ok_or(CompareError::Empty)?;
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        rows.sort_by(|x, y| {
            (y.2 - y.1)
                .abs()
                .total_cmp(&(x.2 - x.1).abs())
                .then_with(|| x.0.cmp(&y.0))
        });
        Ok(SuiteComparison {
            k,
            mean_a: mean(&xs),
            mean_b: mean(&ys),
            problems: rows,
            difference,
        })
    }
}

fn status_strings<S: serde::Serializer>(statuses: &[Status], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(statuses.iter().map(|x| x.as_str()))
}

fn interval<S: serde::Serializer>(i: &Interval, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(5))?;
    m.serialize_entry("diff", &i.diff)?;
    m.serialize_entry("low", &i.low)?;
    m.serialize_entry("high", &i.high)?;
    m.serialize_entry("resamples", &i.resamples)?;
    m.serialize_entry("seed", &i.seed)?;
    m.end()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::CaseEnd::*;

    fn ok() -> CompletionOutcome {
        CompletionOutcome::Ran {
            whole: Passed,
            cases: vec![Passed, Passed],
        }
    }
    fn fails() -> CompletionOutcome {
        CompletionOutcome::Ran {
            whole: Failed { code: 101 },
            cases: vec![Passed, Failed { code: 101 }],
        }
    }
    fn early() -> CompletionOutcome {
        CompletionOutcome::Ran {
            whole: ExitedEarly,
            cases: vec![ExitedEarly, Passed],
        }
    }

    #[test]
    fn per_problem_figures_and_means() {
        let a = [ok(), CompletionOutcome::CompileError, early()];
        let b = [fails(), ok(), ok()];
        let report = SuiteReport::new([("a", &a[..]), ("b", &b[..])]);
        let p = &report.problems[0];
        assert_eq!(
            (p.n, p.compiled, p.passed, p.cases_passed, p.cases),
            (3, 2, 1, 3, 4)
        );
        assert_eq!(
            p.statuses,
            [Status::Ok, Status::SyntaxError, Status::Exception]
        );
        assert_eq!(
            p.multiple_statuses,
            [Status::Ok, Status::SyntaxError, Status::Ok]
        );
        let expect = (1.0 / 3.0 + 2.0 / 3.0) / 2.0;
        assert!((report.pass_at_1.unwrap() - expect).abs() < 1e-12);
        // n = 3: only k = 1 is reported.
        assert_eq!(report.pass_at_k.keys().copied().collect::<Vec<_>>(), [1]);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(
            json["problems"][0]["statuses"],
            serde_json::json!(["OK", "SyntaxError", "Exception"])
        );
        assert_eq!(json["pass_at_k"]["1"], json["pass_at_1"]);
    }

    #[test]
    fn a_problem_without_completions_leaves_the_mean_undefined() {
        let report = SuiteReport::new([("a", &[ok()][..]), ("b", &[][..])]);
        assert_eq!(report.pass_at_1, None);
        assert!(report.pass_at_k.is_empty());
    }

    #[test]
    fn comparison_orders_by_difference_and_checks_the_problems() {
        let a = SuiteReport::new([
            ("x", &[ok(), fails()][..]),
            ("y", &[fails(), fails()][..]),
            ("z", &[ok(), ok()][..]),
        ]);
        let b = SuiteReport::new([
            ("x", &[ok(), ok()][..]),
            ("y", &[fails(), fails()][..]),
            ("z", &[fails(), fails()][..]),
        ]);
        let c = SuiteComparison::new(&a, &b, 1, 1000, 3).unwrap();
        let names: Vec<&str> = c.problems.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(names, ["z", "x", "y"]);
        assert!((c.mean_a - 0.5).abs() < 1e-12 && (c.mean_b - 1.0 / 3.0).abs() < 1e-12);
        assert!((c.difference.diff - (c.mean_b - c.mean_a)).abs() < 1e-12);
        assert_eq!(SuiteComparison::new(&a, &b, 1, 1000, 3).unwrap(), c);
        assert_eq!(
            SuiteComparison::new(&a, &b, 3, 1000, 3),
            Err(CompareError::TooFewSamples {
                problem: "x".into(),
                k: 3,
                n_a: 2,
                n_b: 2
            })
        );
        let other = SuiteReport::new([("x", &[ok()][..]), ("q", &[ok()][..]), ("z", &[ok()][..])]);
        assert_eq!(
            SuiteComparison::new(&a, &other, 1, 10, 1),
            Err(CompareError::DifferentProblems("y".into()))
        );
    }
}
