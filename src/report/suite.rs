//! Suite reports: what `suite run`, `suite show`, `suite compare` and
//! `suite export` print, built from stored rows only, so a run and a later
//! `show` print the same thing. Pure: no IO, no SQL (the rows come from
//! `views`); the figures are `suite::SuiteReport`'s and
//! `suite::SuiteComparison`'s.
//!
//! A figure that was not measured is `None`, never zero: completions read
//! from a file have no tokens, TTFT or draw rate.

use std::fmt::Write as _;

use anyhow::{Context, Result};
use serde::Serialize;

use super::export::{ExportRow, FullExportRow};
use crate::spec::Edition;
use crate::store::{SuiteCompletionRow, SuiteOrigin, SuiteProblemRow, SuiteRow};
use crate::suite::report::{CompareError, ProblemReport, REPORTED_K};
use crate::suite::{CompletionOutcome, SuiteComparison, SuiteReport};
use crate::support::account::{Phase, PhaseFigures};
use crate::support::hint::{CommandLine, Reach};
use crate::support::table::{Column, Table};
use crate::text::extract::Extraction;

/// How many resamples the comparison's bootstrap draws, and its seed (the
/// issue's number): the same two runs give the same interval everywhere.
pub const RESAMPLES: usize = 10_000;
pub const SEED: u64 = 14;

/// How many of the problems that differ most a comparison names.
pub const DIFFER_MOST: usize = 5;

/// A stored suite as `suite run` and `suite show` print it.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteSummary {
    pub suite_id: i64,
    /// `running`, `finished`, `interrupted` or `failed`.
    pub status: String,
    pub failure: Option<String>,
    pub problems_path: String,
    pub origin: SuiteOrigin,
    /// The completions' path, or the draw plan's label.
    pub source: String,
    /// `completion` or `chat`.
    pub mode: String,
    /// The Rust edition its programs were built in: `2015` (MultiPL-E's
    /// plain `rustc`), `2018`, `2021` or `2024`.
    pub edition: Edition,
    pub completions: usize,
    /// Programs built and run: one per group of equal programs in a problem.
    pub programs: usize,
    /// Completions without an outcome yet (an unfinished suite); the report
    /// counts only the others.
    pub pending: usize,
    /// Requests the server failed (an HTTP error, an error inside the
    /// stream, a broken connection): no completion of the model's, so left
    /// out of every problem's n and of pass@k.
    pub server_errors: usize,
    pub sandbox: Option<String>,
    pub sandbox_warnings: Option<String>,
    pub started_at: String,
    pub finished_at: Option<String>,
    /// `problems` (name, n, compiled, passed, statuses, ...), `pass_at_1`
    /// and `pass_at_k`.
    #[serde(flatten)]
    pub report: SuiteReport,
    /// A suite that repairs (issue 28): its rounds, pass@1 after each.
    /// Absent for one that does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rounds: Option<crate::repair::SuiteRounds>,
    pub draw: DrawFigures,
    pub phases: Vec<PhaseFigures>,
    /// The lanes that ran its parts, when it came from the store's queue
    /// (`suite run --queue`); filled by the caller from the store.
    pub lanes: Vec<String>,
    /// The flags that reach the suite's store, for the resume hint of an
    /// unfinished suite; set by the caller, which knows the store.
    #[serde(skip)]
    pub reach: Reach,
}

/// A suite's draw figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DrawFigures {
    /// Output tokens from the servers' usage; `None` when any reply lacks
    /// usage or nothing was drawn.
    pub output_tokens: Option<u64>,
    /// Mean time to first token over the replies that have one.
    pub mean_ttft_ms: Option<f64>,
    /// Completions per second of the suite's draw.
    pub completions_per_s: Option<f64>,
    /// Problems with at least one passing completion.
    pub solved_problems: usize,
    /// Output tokens per solved problem: what a solution cost.
    pub tokens_per_solved_problem: Option<f64>,
}

/// The JSON export of a suite.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteExport {
    pub summary: SuiteSummary,
    pub completions: Vec<FullExportRow>,
}

/// One side of a comparison.
#[derive(Debug, Clone, Serialize)]
pub struct ComparedSuite {
    pub suite_id: i64,
    pub source: String,
    pub mode: String,
    pub edition: Edition,
    pub completions: usize,
    pub pass_at_1: Option<f64>,
    pub pass_at_k: std::collections::BTreeMap<usize, f64>,
    pub draw: DrawFigures,
}

/// Two suites over the same problems, side by side.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteCompare {
    pub a: ComparedSuite,
    pub b: ComparedSuite,
    /// Per problem pass@k, largest difference first; both means; the
    /// difference (b - a) with its paired bootstrap interval.
    pub comparison: SuiteComparison,
    /// The problems where the runs differ most (at most [`DIFFER_MOST`],
    /// only those that differ).
    pub differ_most: Vec<String>,
}

impl SuiteSummary {
    pub fn new(
        row: &SuiteRow,
        problems: &[SuiteProblemRow],
        completions: &[SuiteCompletionRow],
        phases: Vec<PhaseFigures>,
    ) -> SuiteSummary {
        let outcomes: Vec<Vec<CompletionOutcome>> = problems
            .iter()
            .map(|p| {
                completions
                    .iter()
                    // The first draw's; repairs are the rounds' figures.
                    .filter(|c| c.batch_id == p.batch_id && c.round == 0)
                    .filter(|c| !c.server_failed())
                    .filter_map(|c| c.outcome.as_ref().map(|o| o.outcome.clone()))
                    .collect()
            })
            .collect();
        let report = SuiteReport::new(
            problems
                .iter()
                .zip(&outcomes)
                .map(|(p, o)| (p.problem.name.as_str(), o.as_slice())),
        );
        let draw = DrawFigures::new(row.origin, completions, &phases);
        SuiteSummary {
            suite_id: row.id,
            status: row.status.as_str().to_owned(),
            failure: row.failure.clone(),
            problems_path: row.problems_path.clone(),
            origin: row.origin,
            source: row.source.clone(),
            mode: row.mode.as_str().to_owned(),
            edition: row.edition,
            completions: completions.len(),
            programs: completions
                .iter()
                .filter(|c| {
                    c.dup_of.is_none() && matches!(c.extraction, Some(Extraction::Source(_)))
                })
                .count(),
            pending: completions
                .iter()
                .filter(|c| c.outcome.is_none() && !c.server_failed())
                .count(),
            server_errors: completions.iter().filter(|c| c.server_failed()).count(),
            sandbox: row.sandbox.clone(),
            sandbox_warnings: row.sandbox_warnings.clone(),
            started_at: row.started_at.clone(),
            finished_at: row.finished_at.clone(),
            report,
            rounds: None,
            draw,
            phases,
            lanes: Vec::new(),
            reach: Reach::default(),
        }
    }

    /// The human report: the suite's line, its means, one line per problem,
    /// where MultiPL-E's reading differs, the draw and the phases.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "suite {}: {}; {} problems, {} completions ({} programs after dedup); {} mode, \
             edition {}",
            self.suite_id,
            self.status,
            self.report.problems.len(),
            self.completions,
            self.programs,
            self.mode,
            self.edition
        );
        if let Some(f) = &self.failure {
            let _ = writeln!(out, "failure: {f}");
        }
        if self.pending > 0 {
            let resume =
                CommandLine::assay(["suite", "run", "--resume", &self.suite_id.to_string()])
                    .reaching(&self.reach);
            let _ = writeln!(
                out,
                "pending: {} completions have no outcome yet (`{resume}`)",
                self.pending
            );
        }
        if self.server_errors > 0 {
            let _ = writeln!(
                out,
                "server errors: {} requests got no reply from the server; left out of n and pass@k",
                self.server_errors
            );
        }
        let _ = writeln!(out, "problems:    {}", self.problems_path);
        let _ = writeln!(
            out,
            "{:<12} {}",
            match self.origin {
                SuiteOrigin::Completions => "completions:",
                SuiteOrigin::Pool => "pool:",
            },
            self.source
        );
        if !self.lanes.is_empty() {
            let _ = writeln!(
                out,
                "lanes:       {} (from the store's queue)",
                self.lanes.join(", ")
            );
        }
        if let Some(s) = &self.sandbox {
            let _ = writeln!(out, "sandbox:     {s}");
        }
        if let Some(w) = &self.sandbox_warnings {
            for line in w.lines() {
                let _ = writeln!(out, "  warning: {line}");
            }
        }
        let _ = writeln!(out, "{}", pass_at_line(&self.report));
        let mut problems = Table::new(vec![
            Column::left("problem"),
            Column::right("n").min_width(4).gap(" "),
            Column::right("compiled").gap(" "),
            Column::right("passed").gap(" "),
            Column::right("pass@1").gap(" "),
            Column::left(STATUSES_HEADER),
        ]);
        for p in &self.report.problems {
            problems.row([
                p.name.clone(),
                p.n.to_string(),
                p.compiled.to_string(),
                p.passed.to_string(),
                fmt_rate(p.pass_at(1)),
                completion_cells(p),
            ]);
        }
        let _ = write!(out, "\n{}", problems.render());
        let differs: Vec<String> = self
            .report
            .problems
            .iter()
            .flat_map(|p| {
                p.statuses
                    .iter()
                    .zip(&p.multiple_statuses)
                    .enumerate()
                    .filter(|(_, (a, m))| a != m)
                    .map(move |(i, (a, m))| format!("{} #{i} ({a}, MultiPL-E {m})", p.name))
            })
            .collect();
        if !differs.is_empty() {
            let _ = writeln!(
                out,
                "\nstricter than MultiPL-E on {} completion(s): {}",
                differs.len(),
                differs.join(", ")
            );
        }
        let d = &self.draw;
        if self.origin == SuiteOrigin::Pool {
            let _ = writeln!(
                out,
                "\ndraw: {} output tokens, mean TTFT {}, {} completions/s, {} tokens per solved problem",
                d.output_tokens.map_or("unknown".into(), |t| t.to_string()),
                d.mean_ttft_ms.map_or("-".into(), |t| format!("{t:.0} ms")),
                d.completions_per_s.map_or("-".into(), |r| format!("{r:.2}")),
                d.tokens_per_solved_problem
                    .map_or("-".into(), |t| format!("{t:.0}")),
            );
        }
        if let Some(rounds) = &self.rounds {
            rounds.render(&mut out);
        }
        if !self.phases.is_empty() {
            let mut phases = Table::new(vec![
                Column::left("phase").min_width(12),
                Column::right("wall (s)").gap(" "),
                Column::right("CPU-s").min_width(7).gap(" "),
                Column::right("avg busy").min_width(9).gap(" "),
                Column::right("peak busy").min_width(10).gap(" "),
            ]);
            for f in &self.phases {
                phases.row([
                    f.phase.as_str().to_owned(),
                    format!("{:.2}", f.wall_s),
                    format!("{:.2}", f.cpu_s),
                    format!("{:.2}", f.avg_busy),
                    format!("{:.2}", f.peak_busy),
                ]);
            }
            let _ = write!(out, "\n{}", phases.render());
        }
        out
    }
}

impl crate::repair::SuiteRounds {
    /// pass@1 after each round, then one line per round.
    fn render(&self, out: &mut String) {
        let after: Vec<String> = self.pass_at_1.iter().map(|r| fmt_rate(*r)).collect();
        let _ = writeln!(
            out,
            "\nrepair: {} rounds asked, feedback {}{}; rounds stopped: {}",
            self.asked,
            self.feedback,
            self.max_tokens
                .map_or(String::new(), |t| format!(", budget {t} output tokens")),
            self.stopped.as_deref().unwrap_or("-"),
        );
        let _ = writeln!(out, "pass@1 after each round: {}", after.join(" -> "));
        let mut table = Table::new(
            [
                "round",
                "completions",
                "compiled",
                "passing",
                "pass@1",
                "tokens in",
                "tokens out",
                "wall (s)",
            ]
            .map(Column::right)
            .into(),
        );
        let tokens = |t: Option<u64>| t.map_or("-".to_owned(), |t| t.to_string());
        for r in &self.rounds {
            table.row([
                r.round.to_string(),
                r.completions.to_string(),
                r.compiled.to_string(),
                r.passing.to_string(),
                fmt_rate(r.pass_at_1),
                tokens(r.input_tokens),
                tokens(r.output_tokens),
                r.wall_s.map_or("-".to_owned(), |w| format!("{w:.2}")),
            ]);
        }
        out.push_str(&table.render());
    }
}

impl DrawFigures {
    fn new(
        origin: SuiteOrigin,
        completions: &[SuiteCompletionRow],
        phases: &[PhaseFigures],
    ) -> DrawFigures {
        // Over every round: a problem a repair solved is solved.
        let solved = completions
            .iter()
            .filter(|c| {
                c.outcome
                    .as_ref()
                    .is_some_and(|o| o.outcome.status() == crate::suite::Status::Ok)
            })
            .map(|c| c.batch_id)
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        if origin == SuiteOrigin::Completions {
            return DrawFigures {
                output_tokens: None,
                mean_ttft_ms: None,
                completions_per_s: None,
                solved_problems: solved,
                tokens_per_solved_problem: None,
            };
        }
        let replies = || completions.iter().map(|c| &c.drawn.reply);
        let output_tokens = replies()
            .map(|r| r.completion_tokens)
            .sum::<Option<u64>>()
            .filter(|_| !completions.is_empty());
        let ttfts: Vec<f64> = replies().filter_map(|r| r.ttft_ms).collect();
        let draw_wall: f64 = phases
            .iter()
            .filter(|f| f.phase == Phase::Draw)
            .map(|f| f.wall_s)
            .sum();
        DrawFigures {
            output_tokens,
            mean_ttft_ms: (!ttfts.is_empty())
                .then(|| ttfts.iter().sum::<f64>() / ttfts.len() as f64),
            completions_per_s: (draw_wall > 0.0).then(|| completions.len() as f64 / draw_wall),
            solved_problems: solved,
            tokens_per_solved_problem: output_tokens
                .filter(|_| solved > 0)
                .map(|t| t as f64 / solved as f64),
        }
    }
}

impl SuiteCompare {
    /// Compares `a` and `b` at pass@`k`; the runs must be over the same
    /// problems, in the same order, each with at least k completions.
    pub fn new(a: &SuiteSummary, b: &SuiteSummary, k: usize) -> Result<SuiteCompare, CompareError> {
        let comparison = SuiteComparison::new(&a.report, &b.report, k, RESAMPLES, SEED)?;
        let differ_most = comparison
            .problems
            .iter()
            .filter(|(_, x, y)| x != y)
            .take(DIFFER_MOST)
            .map(|(name, _, _)| name.clone())
            .collect();
        let side = |s: &SuiteSummary| ComparedSuite {
            suite_id: s.suite_id,
            source: s.source.clone(),
            mode: s.mode.clone(),
            edition: s.edition,
            completions: s.completions,
            pass_at_1: s.report.pass_at_1,
            pass_at_k: s.report.pass_at_k.clone(),
            draw: s.draw.clone(),
        };
        Ok(SuiteCompare {
            a: side(a),
            b: side(b),
            comparison,
            differ_most,
        })
    }

    pub fn render(&self) -> String {
        let c = &self.comparison;
        let mut out = String::new();
        let (a, b) = (self.a.suite_id, self.b.suite_id);
        let _ = writeln!(
            out,
            "suite {a}: {} ({} completions)",
            self.a.source, self.a.completions
        );
        let _ = writeln!(
            out,
            "suite {b}: {} ({} completions)",
            self.b.source, self.b.completions
        );
        if self.a.edition != self.b.edition {
            let _ = writeln!(
                out,
                "editions differ: suite {a} was built as edition {}, suite {b} as {}; \
                 a status can depend on it",
                self.a.edition, self.b.edition
            );
        }
        let _ = writeln!(
            out,
            "\npass@{}: suite {a} {:.3}, suite {b} {:.3}; difference ({b} - {a}) {:+.3}, \
             95% interval [{:+.3}, {:+.3}] (paired bootstrap over problems, {} resamples, seed {})",
            c.k,
            c.mean_a,
            c.mean_b,
            c.difference.diff,
            c.difference.low,
            c.difference.high,
            c.difference.resamples,
            c.difference.seed
        );
        if self.differ_most.is_empty() {
            let _ = writeln!(out, "no problem differs");
        } else {
            let _ = writeln!(out, "differ most: {}", self.differ_most.join(", "));
        }
        let mut problems = Table::new(vec![
            Column::left("problem"),
            Column::right(format!("suite {a}")).min_width(9).gap(" "),
            Column::right(format!("suite {b}")).min_width(9).gap(" "),
            Column::right("diff").min_width(7).gap(" "),
        ]);
        for (name, x, y) in &c.problems {
            problems.row([
                name.clone(),
                format!("{x:.3}"),
                format!("{y:.3}"),
                format!("{:+.3}", y - x),
            ]);
        }
        let _ = write!(out, "\n{}", problems.render());
        let mut draw = Table::new(vec![
            Column::left("draw").min_width(28),
            Column::right(format!("suite {a}")).min_width(12).gap(" "),
            Column::right(format!("suite {b}")).min_width(12).gap(" "),
        ]);
        let mut row = |name: &str, f: &dyn Fn(&DrawFigures) -> String| {
            draw.row([name.to_owned(), f(&self.a.draw), f(&self.b.draw)]);
        };
        row("output tokens", &|d| {
            d.output_tokens.map_or("-".into(), |t| t.to_string())
        });
        row("mean TTFT (ms)", &|d| {
            d.mean_ttft_ms.map_or("-".into(), |t| format!("{t:.0}"))
        });
        row("completions/s", &|d| {
            d.completions_per_s
                .map_or("-".into(), |r| format!("{r:.2}"))
        });
        row("solved problems", &|d| d.solved_problems.to_string());
        row("tokens per solved problem", &|d| {
            d.tokens_per_solved_problem
                .map_or("-".into(), |t| format!("{t:.0}"))
        });
        let _ = write!(out, "\n{}", draw.render());
        out
    }
}

/// One row per completion, in the problems' order; `repaired`: the suite
/// has repair rounds, so each row says its round.
pub fn export_rows(
    problems: &[SuiteProblemRow],
    completions: &[SuiteCompletionRow],
    repaired: bool,
) -> Vec<FullExportRow> {
    let name_of = |batch| {
        problems
            .iter()
            .find(|p| p.batch_id == batch)
            .map_or(String::new(), |p| p.problem.name.clone())
    };
    completions
        .iter()
        .map(|c| {
            let o = c.outcome.as_ref();
            let ran = o.and_then(|o| match &o.outcome {
                CompletionOutcome::Ran { whole, cases } => Some((whole, cases)),
                _ => None,
            });
            let passed = o.map(|o| o.outcome.cases_passed());
            FullExportRow {
                row: ExportRow {
                    problem: name_of(c.batch_id),
                    completion: c.idx,
                    pool: c.drawn.pool.clone(),
                    model: c.drawn.reply.model.clone(),
                    completion_tokens: c.drawn.reply.completion_tokens,
                    ttft_ms: c.drawn.reply.ttft_ms,
                    dup_of: c.dup_of,
                    probe: o.and_then(|o| o.probe.as_ref().map(ToString::to_string)),
                    status: o.map(|o| o.outcome.status().to_string()),
                    multiple_status: o.map(|o| o.outcome.multiple_status().to_string()),
                    whole: ran.map(|(w, _)| w.to_string()),
                    cases: ran.map(|(_, cs)| {
                        cs.iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(";")
                    }),
                    cases_passed: passed.map(|p| p.0),
                    cases_total: passed.map(|p| p.1),
                    run_wall_ms: o.map(|o| o.run_wall.as_secs_f64() * 1e3),
                    run_cpu_ms: o.map(|o| o.run_cpu.as_secs_f64() * 1e3),
                    error_file: o.and_then(|o| o.error_file.clone()),
                    round: repaired.then_some(c.round),
                    parent: c.parent,
                },
                completion_text: c.drawn.reply.content.clone(),
                program: match &c.extraction {
                    Some(Extraction::Source(p)) => Some(p.clone()),
                    _ => None,
                },
            }
        })
        .collect()
}

/// The CSV text: a header, then one line per completion.
pub fn export_csv(rows: &[FullExportRow]) -> Result<String> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    for r in rows {
        writer.serialize(&r.row).context("cannot write a CSV row")?;
    }
    let bytes = writer.into_inner().context("cannot finish the CSV")?;
    String::from_utf8(bytes).context("the CSV is not UTF-8")
}

/// The one-line list `suite list` prints.
pub fn suite_table(rows: &[SuiteRow]) -> String {
    let mut table = Table::new(vec![
        Column::left("suite").min_width(6),
        Column::left("status").min_width(12).gap(" "),
        Column::right("problems").gap(" "),
        Column::left("mode").min_width(11),
        Column::left("started").min_width(25).gap(" "),
        Column::left("source").gap(" "),
    ]);
    for r in rows {
        table.row([
            r.id.to_string(),
            r.status.as_str().to_owned(),
            r.problems.to_string(),
            r.mode.as_str().to_owned(),
            r.started_at.clone(),
            r.source.clone(),
        ]);
    }
    table.render()
}

/// The suite's means on one line: `pass@1: 0.525`, each larger k that every
/// problem has the completions for beside it, and when there is none, how
/// many completions a problem would need for one.
fn pass_at_line(report: &SuiteReport) -> String {
    let mut line = format!("pass@1: {}", fmt_rate(report.pass_at_1));
    for (k, v) in report.pass_at_k.iter().filter(|(k, _)| **k > 1) {
        let _ = write!(line, "   pass@{k}: {v:.3}");
    }
    let only_one = report.pass_at_k.keys().all(|&k| k == 1);
    let fewest = report.problems.iter().map(|p| p.n).min();
    let next = REPORTED_K.iter().find(|&&k| fewest.is_some_and(|n| k > n));
    if let (true, Some(k), Some(n), Some(_)) = (only_one, next, fewest, report.pass_at_1) {
        let _ = write!(
            line,
            "   (pass@{k} needs {k} completions of every problem; the fewest here: {n})"
        );
    }
    line
}

/// The last column's header: what each cell of it says.
const STATUSES_HEADER: &str = "each completion: status, cases passed/cases";

/// One cell per completion, in input order: its status and, for one that
/// ran, how many of its cases (an assert run alone, or the whole `main`
/// where it cannot be split) passed: `OK 3/3, Exception 1/3, SyntaxError`.
/// A completion's own figure, as MultiPL-E reads results one completion at
/// a time; the problem's column sums would mix completions.
fn completion_cells(p: &ProblemReport) -> String {
    p.statuses
        .iter()
        .zip(&p.case_counts)
        .map(|(status, counts)| match counts {
            Some((passed, cases)) => format!("{status} {passed}/{cases}"),
            None => status.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn fmt_rate(v: Option<f64>) -> String {
    v.map_or("-".to_owned(), |v| format!("{v:.3}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::CaseEnd::{Failed, Passed};

    fn ran(cases: &[bool]) -> CompletionOutcome {
        let end = |ok: bool| if ok { Passed } else { Failed { code: 101 } };
        CompletionOutcome::Ran {
            whole: end(cases.iter().all(|c| *c)),
            cases: cases.iter().map(|c| end(*c)).collect(),
        }
    }

    /// Issue 30: `pass@1: 0.525   pass@k: @1 0.525` said the same thing
    /// twice.
    #[test]
    fn the_means_line_names_each_k_once_and_why_there_is_no_other() {
        let two = [ran(&[true, true]), CompletionOutcome::CompileError];
        let report = SuiteReport::new([("a", &two[..]), ("b", &two[..])]);
        assert_eq!(
            pass_at_line(&report),
            "pass@1: 0.500   (pass@10 needs 10 completions of every problem; the fewest here: 2)"
        );
        let many: Vec<CompletionOutcome> = (0..12).map(|i| ran(&[i % 3 == 0])).collect();
        let report = SuiteReport::new([("a", &many[..])]);
        assert_eq!(pass_at_line(&report), "pass@1: 0.333   pass@10: 1.000");
        let report = SuiteReport::new([("a", &two[..]), ("b", &[][..])]);
        assert_eq!(pass_at_line(&report), "pass@1: -");
    }

    /// Issue 30: `cases 4/6` summed two completions' cases; each completion
    /// now has its own count beside its status.
    #[test]
    fn each_completion_has_its_cases_beside_its_status() {
        let outcomes = [
            ran(&[true, true, true]),
            ran(&[false, false, true]),
            CompletionOutcome::CompileError,
        ];
        let report = SuiteReport::new([("fx_add_two", &outcomes[..])]);
        assert_eq!(
            completion_cells(&report.problems[0]),
            "OK 3/3, Exception 1/3, SyntaxError"
        );
    }

    /// The tables of `suite show` as docs/suites.md shows them: each
    /// column as wide as its widest cell or its heading, whichever is more.
    #[test]
    fn the_tables_read_as_the_docs_show_them() {
        let add_two = [ran(&[true, true, true]), ran(&[false, false, true])];
        let reverse = [CompletionOutcome::CompileError, ran(&[true, true, true])];
        let report = SuiteReport::new([
            ("fx_add_two", &add_two[..]),
            ("fx_reverse_words", &reverse[..]),
        ]);
        let round = |round, completions, compiled, passing, pass_at_1, tokens: Option<u64>| {
            crate::repair::SuiteRoundFigures {
                round,
                completions,
                compiled,
                passing,
                pass_at_1: Some(pass_at_1),
                input_tokens: tokens,
                output_tokens: tokens.map(|t| 2 * t),
                wall_s: tokens.map(|_| 1.5),
            }
        };
        let summary = SuiteSummary {
            suite_id: 1,
            status: "finished".into(),
            failure: None,
            problems_path: "/p/problems.jsonl".into(),
            origin: SuiteOrigin::Completions,
            source: "/p/completions.jsonl".into(),
            mode: "completion".into(),
            edition: Edition::E2021,
            completions: 4,
            programs: 4,
            pending: 0,
            server_errors: 0,
            sandbox: None,
            sandbox_warnings: None,
            started_at: "2026-12-04T10:00:00Z".into(),
            finished_at: None,
            report,
            rounds: Some(crate::repair::SuiteRounds {
                asked: 1,
                feedback: "full".into(),
                max_tokens: None,
                stopped: Some("all_pass".into()),
                pass_at_1: vec![Some(0.5), Some(0.75)],
                rounds: vec![
                    round(0, 4, 3, 2, 0.5, Some(100)),
                    round(1, 2, 2, 1, 0.75, None),
                ],
            }),
            draw: DrawFigures::new(SuiteOrigin::Completions, &[], &[]),
            phases: vec![PhaseFigures {
                phase: Phase::ScoreBuild,
                wall_s: 12.5,
                cpu_s: 20.25,
                avg_busy: 1.5,
                peak_busy: 2.0,
            }],
            lanes: Vec::new(),
            reach: Reach::default(),
        };
        let text = summary.render();
        let lines: Vec<&str> = text.lines().collect();
        let after = |heading: &str, n: usize| {
            let at = lines.iter().position(|l| l.starts_with(heading));
            let at = at.unwrap_or_else(|| panic!("no {heading:?} in\n{text}"));
            lines[at..at + n].to_vec()
        };
        assert_eq!(
            after("problem ", 3),
            [
                "problem             n compiled passed pass@1  each completion: status, cases passed/cases",
                "fx_add_two          2        2      1  0.500  OK 3/3, Exception 1/3",
                "fx_reverse_words    2        1      1  0.500  SyntaxError, OK 3/3",
            ],
            "{text}"
        );
        assert_eq!(
            after("round ", 3),
            [
                "round  completions  compiled  passing  pass@1  tokens in  tokens out  wall (s)",
                "    0            4         3        2   0.500        100         200      1.50",
                "    1            2         2        1   0.750          -           -         -",
            ],
            "{text}"
        );
        assert_eq!(
            after("phase ", 2),
            [
                "phase        wall (s)   CPU-s  avg busy  peak busy",
                "score build     12.50   20.25      1.50       2.00",
            ],
            "{text}"
        );
        assert!(text.ends_with("       2.00\n"), "{text}");
    }

    #[test]
    fn the_suite_list_lines_up() {
        let row = |id, status, problems, mode, started: &str, source: &str| SuiteRow {
            id,
            problems_path: "/p/problems.jsonl".into(),
            problems_digest: String::new(),
            origin: SuiteOrigin::Completions,
            source: source.into(),
            mode,
            edition: Edition::E2021,
            problems,
            status,
            failure: None,
            started_at: started.into(),
            finished_at: None,
            sandbox: None,
            sandbox_warnings: None,
        };
        use crate::store::BatchStatus;
        use crate::suite::ProgramMode;
        let rows = [
            row(
                1,
                BatchStatus::Finished,
                20,
                ProgramMode::Completion,
                "2026-12-04T10:00:00Z",
                "/p/completions.jsonl",
            ),
            row(
                12,
                BatchStatus::Interrupted,
                3,
                ProgramMode::Chat,
                "2026-12-04T11:00:00Z",
                "pool fast",
            ),
        ];
        assert_eq!(
            suite_table(&rows),
            "suite  status       problems  mode        started                   source\n\
             1      finished           20  completion  2026-12-04T10:00:00Z      /p/completions.jsonl\n\
             12     interrupted         3  chat        2026-12-04T11:00:00Z      pool fast\n"
        );
    }

    /// Issue 28: each row says its round and parent after the columns it
    /// had; both empty for a suite without repair rounds.
    #[test]
    fn exported_rows_end_with_round_and_parent() {
        let problem = crate::suite::Problem {
            name: "p".into(),
            prompt: "fn f() -> i32 {\n".into(),
            tests: "}\n".into(),
            stop_tokens: Vec::new(),
        };
        let problems = [SuiteProblemRow {
            batch_id: 4,
            pos: 0,
            problem,
            n: 1,
            status: crate::store::BatchStatus::Finished,
        }];
        let completion = |idx: usize, round: u32, parent: Option<usize>| SuiteCompletionRow {
            batch_id: 4,
            idx,
            drawn: crate::draw::Drawn {
                idx,
                pool: "fixer".into(),
                reply: crate::draw::Reply::default(),
            },
            extraction: None,
            dup_of: None,
            outcome: None,
            round,
            parent,
        };
        let completions = [completion(0, 0, None), completion(1, 1, Some(0))];
        let csv = |repaired| export_csv(&export_rows(&problems, &completions, repaired)).unwrap();
        let with = csv(true);
        let lines: Vec<&str> = with.lines().collect();
        assert!(
            lines[0].ends_with(",run_cpu_ms,error_file,round,parent"),
            "{with}"
        );
        assert!(lines[1].ends_with(",0,"), "{with}");
        assert!(lines[2].ends_with(",1,0"), "{with}");
        let without = csv(false);
        let first = without.lines().nth(1).unwrap();
        assert!(first.starts_with("p,0,fixer,"), "{without}");
        assert!(first.ends_with(",,"), "{without}");
        let json = serde_json::to_value(export_rows(&problems, &completions, true)).unwrap();
        assert_eq!(
            (&json[1]["round"], &json[1]["parent"]),
            (&1.into(), &0.into())
        );
        let json = serde_json::to_value(export_rows(&problems, &completions, false)).unwrap();
        assert!(
            json[0]["round"].is_null() && json[0]["parent"].is_null(),
            "{json}"
        );
    }

    /// Issue 30: the CSV carried float noise (`24.450785999999997`).
    #[test]
    fn exported_milliseconds_are_given_to_the_microsecond() {
        let mut writer = csv::Writer::from_writer(Vec::new());
        #[derive(Serialize)]
        struct Row {
            #[serde(serialize_with = "crate::report::to_the_microsecond")]
            a: Option<f64>,
            #[serde(serialize_with = "crate::report::to_the_microsecond")]
            b: Option<f64>,
            #[serde(serialize_with = "crate::report::to_the_microsecond")]
            c: Option<f64>,
        }
        writer
            .serialize(Row {
                a: Some(24.450785999999997),
                b: Some(8.562999999999999),
                c: None,
            })
            .unwrap();
        let text = String::from_utf8(writer.into_inner().unwrap()).unwrap();
        assert_eq!(text, "a,b,c\n24.451,8.563,\n");
    }
}
