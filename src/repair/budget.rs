//! Output tokens: what a run has spent against its budget (`--max-tokens`),
//! and runs weighed against each other at equal tokens.
//!
//! Tokens are the servers' own counts. A reply whose server sent no usage
//! counts as the request's token cap where one was set (the most it can
//! have cost), else as nothing, and is counted apart (`unknown`) so a
//! report can say that the spent figure is then a lower bound.

use std::fmt;

use serde::Serialize;

use crate::support::table::{Column, Table};

/// An output-token budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Stop drawing once this many output tokens are spent.
    pub max: u64,
    /// What a reply without usage counts: the request's cap, if any.
    pub unknown_as: Option<u64>,
}

/// Output tokens spent so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Spent {
    pub tokens: u64,
    /// Replies whose server sent no usage (counted as the cap, or 0).
    pub unknown: usize,
}

impl Spent {
    /// Adds one reply's output tokens (`None`: the server did not say).
    pub fn add(&mut self, completion_tokens: Option<u64>, unknown_as: Option<u64>) {
        match completion_tokens {
            Some(t) => self.tokens += t,
            None => {
                self.unknown += 1;
                self.tokens += unknown_as.unwrap_or(0);
            }
        }
    }
}

impl Budget {
    /// Whether `spent` has used the budget up: no request is sent after.
    pub fn exhausted(&self, spent: &Spent) -> bool {
        spent.tokens >= self.max
    }
}

/// A point of a run's curve: after `tokens` output tokens, the best score
/// (cases passed / total, 0..=1) or pass rate reached so far.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CurvePoint {
    pub tokens: u64,
    pub best: Option<f64>,
}

/// A run's best figure against the output tokens it had spent: one point
/// per reply (a batch) or per round (a suite), in the order they were
/// drawn.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Curve {
    pub points: Vec<CurvePoint>,
    /// Replies whose server sent no usage.
    pub unknown: usize,
}

impl Curve {
    /// The curve of replies in draw order, each `(output tokens, figure)`:
    /// the figure of its candidate (`None`: none, such as a reply with no
    /// code), the best so far carried along.
    pub fn of_replies(
        replies: impl IntoIterator<Item = (Option<u64>, Option<f64>)>,
        unknown_as: Option<u64>,
    ) -> Curve {
        let mut spent = Spent::default();
        let mut best: Option<f64> = None;
        let mut points = Vec::new();
        for (tokens, figure) in replies {
            spent.add(tokens, unknown_as);
            best = match (best, figure) {
                (Some(b), Some(f)) => Some(b.max(f)),
                (b, f) => b.or(f),
            };
            points.push(CurvePoint {
                tokens: spent.tokens,
                best,
            });
        }
        Curve {
            points,
            unknown: spent.unknown,
        }
    }

    /// A curve of stages (rounds), each `(output tokens spent in it, the
    /// figure after it)`: for a figure that is not a maximum, such as a
    /// suite's pass@1 after each round.
    pub fn of_stages(
        stages: impl IntoIterator<Item = (u64, Option<f64>)>,
        unknown: usize,
    ) -> Curve {
        let mut tokens = 0;
        let points = stages
            .into_iter()
            .map(|(spent, best)| {
                tokens += spent;
                CurvePoint { tokens, best }
            })
            .collect();
        Curve { points, unknown }
    }

    pub fn tokens(&self) -> u64 {
        self.points.last().map_or(0, |p| p.tokens)
    }

    /// The figure at the end of the run.
    pub fn best(&self) -> Option<f64> {
        self.points.last().and_then(|p| p.best)
    }
}

/// The figure `curve` had reached by the time it had spent `tokens`:
/// the last point within the budget. `None` when nothing was reached.
pub fn best_within(curve: &Curve, tokens: u64) -> Option<f64> {
    curve
        .points
        .iter()
        .take_while(|p| p.tokens <= tokens)
        .last()
        .and_then(|p| p.best)
}

/// One run of an equal-budget comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunCurve {
    /// How the report names the run (`batch 3`).
    pub label: String,
    /// What the run was (`3 repair rounds`, `resampling`).
    pub kind: String,
    pub curve: Curve,
}

/// Runs side by side at equal output tokens: each run's end, and what each
/// had reached at the budget they all spent (the smallest run's tokens).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetTable {
    /// What the figure is (`best score`, `pass@1`).
    pub figure: String,
    /// The tokens every run spent at least.
    pub common_tokens: u64,
    pub runs: Vec<BudgetRow>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetRow {
    pub label: String,
    pub kind: String,
    pub replies: usize,
    pub tokens: u64,
    pub unknown: usize,
    pub best: Option<f64>,
    pub at_common: Option<f64>,
}

impl BudgetTable {
    /// Whether any run repaired: only then is the table worth printing
    /// unasked beside a comparison of plain batches.
    pub fn any_repaired(&self) -> bool {
        self.runs.iter().any(|r| r.kind != "resample")
    }

    pub fn new(figure: &str, runs: &[RunCurve]) -> BudgetTable {
        let common_tokens = runs.iter().map(|r| r.curve.tokens()).min().unwrap_or(0);
        BudgetTable {
            figure: figure.to_owned(),
            common_tokens,
            runs: runs
                .iter()
                .map(|r| BudgetRow {
                    label: r.label.clone(),
                    kind: r.kind.clone(),
                    replies: r.curve.points.len(),
                    tokens: r.curve.tokens(),
                    unknown: r.curve.unknown,
                    best: r.curve.best(),
                    at_common: best_within(&r.curve, common_tokens),
                })
                .collect(),
        }
    }
}

impl fmt::Display for BudgetTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pct = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{:.1}%", v * 100.0));
        let mut table = Table::new(vec![
            Column::left("run").min_width(12),
            Column::left("kind").min_width(18).gap(" "),
            Column::right("points").min_width(8).gap(" "),
            Column::right("output tok").min_width(12).gap(" "),
            Column::right(self.figure.as_str()).min_width(12).gap(" "),
            Column::right(format!("at {} tok", self.common_tokens))
                .min_width(14)
                .gap(" "),
        ]);
        for r in &self.runs {
            let tokens = if r.unknown > 0 {
                format!("{}*", r.tokens)
            } else {
                r.tokens.to_string()
            };
            table.row([
                r.label.clone(),
                r.kind.clone(),
                r.replies.to_string(),
                tokens,
                pct(r.best),
                pct(r.at_common),
            ]);
        }
        if self.runs.iter().any(|r| r.unknown > 0) {
            table.text(
                "* some replies came without usage: each counted as 0 tokens, so the figure is a lower bound",
            );
        }
        f.write_str(&table.render())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spent_counts_unknown_usage_as_the_cap_or_nothing() {
        let mut spent = Spent::default();
        spent.add(Some(10), Some(100));
        spent.add(None, Some(100));
        spent.add(None, None);
        assert_eq!(
            spent,
            Spent {
                tokens: 110,
                unknown: 2
            }
        );
        let budget = Budget {
            max: 110,
            unknown_as: Some(100),
        };
        assert!(budget.exhausted(&spent));
        assert!(!budget.exhausted(&Spent {
            tokens: 109,
            unknown: 0
        }));
    }

    #[test]
    fn a_curve_carries_the_best_so_far() {
        let curve = Curve::of_replies(
            [
                (Some(10), None),
                (Some(5), Some(0.5)),
                (Some(5), Some(0.25)),
                (None, Some(1.0)),
            ],
            None,
        );
        let points: Vec<(u64, Option<f64>)> =
            curve.points.iter().map(|p| (p.tokens, p.best)).collect();
        assert_eq!(
            points,
            [
                (10, None),
                (15, Some(0.5)),
                (20, Some(0.5)),
                (20, Some(1.0))
            ]
        );
        assert_eq!(curve.unknown, 1);
        assert_eq!(best_within(&curve, 9), None);
        assert_eq!(best_within(&curve, 14), None);
        assert_eq!(best_within(&curve, 19), Some(0.5));
        assert_eq!(best_within(&curve, 20), Some(1.0));
    }

    #[test]
    fn runs_are_weighed_at_the_smallest_run_s_tokens() {
        let repair = RunCurve {
            label: "batch 1".into(),
            kind: "2 repair rounds".into(),
            curve: Curve::of_replies([(Some(100), Some(0.2)), (Some(100), Some(0.9))], None),
        };
        let resample = RunCurve {
            label: "batch 2".into(),
            kind: "resampling".into(),
            curve: Curve::of_replies(
                [
                    (Some(100), Some(0.5)),
                    (Some(100), Some(0.5)),
                    (Some(100), Some(1.0)),
                ],
                None,
            ),
        };
        let table = BudgetTable::new("best score", &[repair, resample]);
        assert_eq!(table.common_tokens, 200);
        assert_eq!(table.runs[0].at_common, Some(0.9));
        assert_eq!(table.runs[1].at_common, Some(0.5));
        assert_eq!(table.runs[1].best, Some(1.0));
        let text = table.to_string();
        assert!(text.contains("at 200 tok"), "{text}");
        assert!(text.lines().nth(2).unwrap().contains("100.0%"), "{text}");
    }

    /// The table as docs/repair.md shows it, and the note a reply without
    /// usage adds under it.
    #[test]
    fn the_table_reads_as_the_docs_show_it() {
        let run = |label: &str, kind: &str, scores: [f64; 4], tokens: [Option<u64>; 4]| RunCurve {
            label: label.into(),
            kind: kind.into(),
            curve: Curve::of_replies(tokens.into_iter().zip(scores.map(Some)), Some(29)),
        };
        let known = [Some(29); 4];
        let table = BudgetTable::new(
            "best score",
            &[
                run("batch 1", "repair, 1 round", [0.0, 0.1, 1.0, 1.0], known),
                run("batch 2", "resample", [0.1, 0.0, 0.0, 0.0], known),
            ],
        );
        assert_eq!(
            table.to_string(),
            "run          kind                 points   output tok   best score     at 116 tok\n\
             batch 1      repair, 1 round           4          116       100.0%         100.0%\n\
             batch 2      resample                  4          116        10.0%          10.0%\n"
        );
        let table = BudgetTable::new(
            "best score",
            &[run(
                "batch 3",
                "resample",
                [0.1; 4],
                [Some(29), None, Some(29), Some(29)],
            )],
        );
        assert_eq!(
            table.to_string(),
            "run          kind                 points   output tok   best score     at 116 tok\n\
             batch 3      resample                  4         116*        10.0%          10.0%\n\
             * some replies came without usage: each counted as 0 tokens, so the figure is a lower bound\n"
        );
    }

    #[test]
    fn stages_accumulate_tokens() {
        let curve = Curve::of_stages([(50, Some(0.1)), (30, Some(0.4))], 0);
        assert_eq!(curve.tokens(), 80);
        assert_eq!(best_within(&curve, 79), Some(0.1));
    }
}
