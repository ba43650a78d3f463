//! Report: what a batch came to, as text for people and JSON for scripts.
//!
//! Built only from stored rows, so `run` and `show` print the same thing for
//! the same batch. No IO here: callers print the strings.

use std::fmt::Write as _;

use serde::Serialize;

use crate::build::probe::Toolchain;
use crate::score::ScoreVerdict;
use crate::spec::DedupBy;
use crate::store::{BatchRow, CandidateRow, ProbeRunRow, ResumeRow};
use crate::support::account::PhaseFigures;
use crate::support::table::{Column, Table};

/// The summary of one batch (`assay run --json`, `assay show --json`).
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub batch_id: i64,
    pub task: String,
    pub pool: String,
    pub status: String,
    pub replies: usize,
    pub extracted: usize,
    pub unique: usize,
    /// Unique candidates that compiled (out of `unique`).
    pub compiled: usize,
    pub admitted: usize,
    /// The admitted candidate ranked first (by score, then as
    /// `admit::admit` breaks ties): the one `--promote` would write if it
    /// beats the committed one.
    pub top_admitted: Option<usize>,
    /// The most cases passed, by any candidate, admitted or not (a tie goes
    /// to the earliest).
    pub best: Option<Best>,
    pub committed: Option<Committed>,
    pub phases: Vec<PhaseFigures>,
    pub errors_dir: Option<String>,
    /// Whether any candidate left an error file: the summary names the
    /// folder only then (a batch that compiled everything left none).
    #[serde(skip)]
    pub any_errors: bool,
    pub failure: Option<String>,
    /// Each `--resume` of the batch: what it kept, and where its rows start
    /// in `phases` (`first_phase`). Empty for a batch that ran in one go.
    pub resumes: Vec<ResumeRow>,
    /// Which fingerprint grouped the batch (`exact` or `alpha`).
    pub dedup_by: String,
    /// Groups of more than one candidate under the batch's fingerprint,
    /// largest first: a pool that writes one program ten times shows here.
    pub groups: Vec<Group>,
    /// The same under the other fingerprint, for comparison.
    pub other_groups: Vec<Group>,
    /// What the scoring sandbox enforced, and its warnings.
    pub sandbox: Option<String>,
    pub sandbox_warnings: Vec<String>,
    /// Promotions made from this batch (filled by the caller from the store).
    pub promotions: Vec<Promotion>,
    /// Each round's figures, for a batch that ran repair rounds or a token
    /// budget (filled by the caller from the store); empty otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<crate::repair::RoundFigures>,
    /// The batch's own probe run (not a replay's): mode, waves, builds,
    /// retries, toolchain. Filled by the caller from the store; `None`
    /// before the batch probed.
    pub probe_run: Option<ProbeRunRow>,
    /// In a batch with repair rounds: the rounds whose figures
    /// `probe_run` sums (each round adds its waves, builds, retries, wall
    /// and CPU to the batch's run): round 0 and every round that probed a
    /// candidate of its own. Empty otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub probe_rounds: Vec<u32>,
    /// The lane that ran the batch, when one did (`assay lane`).
    pub lane: Option<String>,
    /// Running, but its lane's lease on the queue item ran out: the next
    /// lane to claim the item takes the batch over.
    pub lease_lapsed: bool,
}

/// A group of candidates with one fingerprint.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    /// The representative: the first of the group, the one probed and scored.
    pub candidate_id: usize,
    pub size: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Promotion {
    pub candidate_id: usize,
    pub path: String,
    pub passed: usize,
    pub total: usize,
    pub reference_passed: usize,
    pub promoted_at: String,
}

impl Promotion {
    pub fn new(p: &crate::store::PromotionRow) -> Promotion {
        Promotion {
            candidate_id: p.idx,
            path: p.path.clone(),
            passed: p.passed,
            total: p.total,
            reference_passed: p.reference_passed,
            promoted_at: p.promoted_at.clone(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Best {
    pub candidate_id: usize,
    pub passed: usize,
    pub total: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Committed {
    pub verdict: String,
    pub passed: usize,
    pub total: usize,
}

/// One candidate as `show` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct CandidateLine {
    pub candidate_id: usize,
    pub pool: String,
    pub model: Option<String>,
    pub extract: String,
    pub dup_of: Option<usize>,
    pub probe: Option<String>,
    pub score: Option<String>,
    pub admitted: bool,
    pub error_file: Option<String>,
    /// The first earlier candidate with the same alpha-renamed fingerprint,
    /// shown only where the exact fingerprint does not group it already:
    /// the duplicates that renaming locals reveals.
    pub alpha_dup_of: Option<usize>,
    /// CPU time of the scoring run, in milliseconds.
    #[serde(serialize_with = "super::to_the_microsecond")]
    pub cpu_ms: Option<f64>,
    /// One letter per case: `p` passed, `f` failed, `x` panicked, `t` timed
    /// out, `c` crashed, `-` not run.
    pub cases: Option<String>,
    pub restarts: Option<usize>,
    pub peak_processes: Option<u64>,
    pub rank: Option<usize>,
    pub admission: Option<String>,
}

impl Summary {
    pub fn new(
        batch: &BatchRow,
        candidates: &[CandidateRow],
        phases: Vec<PhaseFigures>,
    ) -> Summary {
        let extracted = candidates
            .iter()
            .filter(|c| c.extraction.kind() == "extracted")
            .count();
        let unique = candidates
            .iter()
            .filter(|c| c.extraction.kind() == "extracted" && c.dup_of.is_none())
            .count();
        let compiled = candidates
            .iter()
            .filter(|c| c.probe.as_ref().is_some_and(|p| p.compiled()))
            .count();
        Summary {
            batch_id: batch.id,
            task: batch.task.clone(),
            pool: batch.pool.clone(),
            status: batch.status.to_string(),
            replies: candidates.len(),
            extracted,
            unique,
            compiled,
            admitted: candidates.iter().filter(|c| c.admitted).count(),
            top_admitted: candidates
                .iter()
                .find(|c| c.admitted && c.rank == Some(1))
                .map(|c| c.idx),
            best: best(candidates),
            committed: batch.committed.as_ref().map(|c| Committed {
                verdict: c.verdict.to_string(),
                passed: c.passed,
                total: c.total,
            }),
            phases,
            errors_dir: batch.errors_dir.clone(),
            any_errors: candidates.iter().any(|c| c.error_file.is_some()),
            failure: batch.failure.clone(),
            resumes: Vec::new(),
            dedup_by: batch.dedup_by.to_string(),
            groups: groups(candidates, batch.dedup_by),
            other_groups: groups(
                candidates,
                match batch.dedup_by {
                    DedupBy::Exact => DedupBy::Alpha,
                    DedupBy::Alpha => DedupBy::Exact,
                },
            ),
            sandbox: batch.sandbox.clone(),
            sandbox_warnings: batch
                .sandbox_warnings
                .as_deref()
                .map(|w| w.lines().map(str::to_owned).collect())
                .unwrap_or_default(),
            promotions: Vec::new(),
            rounds: Vec::new(),
            probe_run: None,
            probe_rounds: Vec::new(),
            lane: batch.lane.clone(),
            lease_lapsed: batch.lease_lapsed,
        }
    }

    /// The human summary: two lines of counts, the phase table, where the
    /// compiler errors are.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "batch {}  task {}  pool {}  {} replies{}",
            self.batch_id,
            self.task,
            self.pool,
            self.replies,
            if self.status == "finished" {
                String::new()
            } else {
                format!("  ({})", self.status)
            }
        );
        let best = match &self.best {
            Some(b) => format!(
                "most passed {}/{} (candidate {})",
                b.passed, b.total, b.candidate_id
            ),
            None => "most passed none".to_owned(),
        };
        let committed = match &self.committed {
            Some(c) if c.verdict.starts_with("scored") => {
                format!("committed {}/{}", c.passed, c.total)
            }
            Some(c) => format!("committed {}", c.verdict),
            None => "committed not scored".to_owned(),
        };
        let admitted = match self.top_admitted {
            Some(top) => format!("admitted {} (ranked first: candidate {top})", self.admitted),
            None => format!("admitted {}", self.admitted),
        };
        let _ = writeln!(
            out,
            "extracted {}/{}  unique {}  compiled {}/{}  {admitted}  {best}  {committed}",
            self.extracted, self.replies, self.unique, self.compiled, self.unique
        );
        if self.resumes.is_empty() {
            out.push_str(&phase_table(&self.phases));
        } else {
            out.push_str(&resumed_phase_table(
                &self.phases,
                &self.resumes,
                self.replies,
            ));
        }
        out.push_str(SUMMARY_KEY);
        if let Some(run) = &self.probe_run {
            out.push_str(&probe_run_lines(run, &self.probe_rounds));
        }
        let other = match self.dedup_by.as_str() {
            "alpha" => "exact",
            _ => "alpha",
        };
        let _ = writeln!(
            out,
            "duplicate groups ({}): {}   ({other}: {})",
            self.dedup_by,
            group_list(&self.groups),
            group_list(&self.other_groups)
        );
        if let Some(sandbox) = &self.sandbox {
            let _ = writeln!(out, "sandbox: {sandbox}");
        }
        if let Some(lane) = &self.lane {
            let _ = writeln!(out, "lane: {lane} (from the store's queue)");
        }
        if self.lease_lapsed {
            let _ = writeln!(
                out,
                "lease lapsed: its lane stopped renewing; the next lane to claim the item resumes it"
            );
        }
        for w in &self.sandbox_warnings {
            let _ = writeln!(out, "sandbox warning: {w}");
        }
        if !self.rounds.is_empty() {
            let _ = write!(out, "{}", crate::repair::RoundsTable(&self.rounds));
        }
        for p in &self.promotions {
            let _ = writeln!(
                out,
                "promoted candidate {} ({}/{} against {}/{}) over {}",
                p.candidate_id, p.passed, p.total, p.reference_passed, p.total, p.path
            );
        }
        if let Some(dir) = self.errors_dir.as_ref().filter(|_| self.any_errors) {
            // The folder is on the machine that ran the batch; the store
            // holds the same text for any other.
            let _ = writeln!(
                out,
                "compiler errors: {dir}/ (from any machine: assay show {} --errors)",
                self.batch_id
            );
        }
        if let Some(failure) = &self.failure {
            let word = match self.status.as_str() {
                "interrupted" => "interrupted",
                "running" => "running",
                _ => "failed",
            };
            let _ = writeln!(out, "{word}: {failure}");
        }
        out
    }
}

/// The rounds whose figures a batch's probe run sums ([`Summary::probe_rounds`]):
/// none for a batch without rounds; else round 0 (whose run is stored
/// even when it probed nothing) and each later round with a probe verdict
/// on a candidate of its own, by `lineage`.
pub fn probe_rounds(
    rounds: &[crate::repair::RoundFigures],
    lineage: &[crate::store::Lineage],
    candidates: &[CandidateRow],
) -> Vec<u32> {
    if rounds.is_empty() {
        return Vec::new();
    }
    let probed: std::collections::BTreeSet<u32> = lineage
        .iter()
        .filter(|l| {
            candidates
                .iter()
                .any(|c| c.idx == l.idx && c.probe.is_some())
        })
        .map(|l| l.round)
        .chain([0])
        .collect();
    probed.into_iter().collect()
}

/// Two lines on a batch's probe run: what it did, and which toolchain did
/// it; `rounds` names the repair rounds it sums, when there are any.
/// Figures an older assay did not record are left out, or `unknown`.
pub fn probe_run_lines(run: &ProbeRunRow, rounds: &[u32]) -> String {
    let mut what = vec![run.mode.clone()];
    let count =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    if let Some(waves) = run.waves {
        what.push(count(waves, "wave", "waves"));
    }
    if let Some(builds) = run.builds {
        what.push(count(builds, "build", "builds"));
    }
    match run.retries.as_deref() {
        Some([]) => what.push("no retries".to_owned()),
        Some(retries) => {
            let list: Vec<String> = retries
                .iter()
                .map(|r| format!("c{} after {}", r.idx, r.after.as_str()))
                .collect();
            what.push(format!(
                "{} ({})",
                count(retries.len(), "retry", "retries"),
                list.join(", ")
            ));
        }
        None => {}
    }
    let toolchain = match (&run.rustc_version, &run.cargo_version) {
        (Some(rustc), Some(cargo)) => Toolchain {
            rustc: rustc.clone(),
            cargo: cargo.clone(),
        }
        .summary(),
        _ => "unknown".to_owned(),
    };
    let over = match rounds {
        [] => String::new(),
        [one] => format!(" (round {one})"),
        many => {
            let list: Vec<String> = many.iter().map(ToString::to_string).collect();
            format!(" (rounds {} summed)", list.join(", "))
        }
    };
    format!("probe{over}: {}\ntoolchain: {toolchain}\n", what.join(", "))
}

/// `c0 x3, c2 x2`, or `none`.
fn group_list(groups: &[Group]) -> String {
    if groups.is_empty() {
        return "none".to_owned();
    }
    groups
        .iter()
        .map(|g| format!("c{} x{}", g.candidate_id, g.size))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Groups of more than one candidate under `by`, largest first.
fn groups(candidates: &[CandidateRow], by: DedupBy) -> Vec<Group> {
    // Rows stored before both fingerprints were kept have only `dup_of`.
    let rep = |c: &CandidateRow| match by {
        DedupBy::Exact if c.alpha_fingerprint.is_none() => c.dup_of,
        DedupBy::Exact => c.exact_dup_of,
        DedupBy::Alpha => c.alpha_dup_of,
    };
    let has: Vec<bool> = candidates.iter().map(|c| c.fingerprint.is_some()).collect();
    // Positions, not indices: candidates are numbered by reply, in order.
    let pos_of = |idx: usize| candidates.iter().position(|c| c.idx == idx);
    let dup_of: Vec<Option<usize>> = candidates.iter().map(|c| rep(c).and_then(pos_of)).collect();
    let mut groups: Vec<Group> = crate::text::dedup::group_sizes(&dup_of, &has)
        .into_iter()
        .filter(|(_, size)| *size > 1)
        .map(|(pos, size)| Group {
            candidate_id: candidates[pos].idx,
            size,
        })
        .collect();
    groups.sort_by(|a, b| {
        b.size
            .cmp(&a.size)
            .then(a.candidate_id.cmp(&b.candidate_id))
    });
    groups
}

/// The per-phase table.
pub fn phase_table(phases: &[PhaseFigures]) -> String {
    let mut table = phase_columns();
    for p in phases {
        table.row(phase_cells(p));
    }
    table.render()
}

/// The phase table of a resumed batch: each attempt's rows under a line
/// that says what that attempt kept from the ones before.
pub fn resumed_phase_table(
    phases: &[PhaseFigures],
    resumes: &[ResumeRow],
    replies: usize,
) -> String {
    let mut table = phase_columns();
    table.text("first attempt");
    for (seq, p) in phases.iter().enumerate() {
        for r in resumes.iter().filter(|r| r.first_phase == seq) {
            table.text(resume_line(r, replies));
        }
        table.row(phase_cells(p));
    }
    for r in resumes.iter().filter(|r| r.first_phase >= phases.len()) {
        table.text(resume_line(r, replies));
    }
    table.render()
}

/// The phase table's columns, no gap between them: each number's width
/// holds the space before it.
fn phase_columns() -> Table {
    let number = |heading: &str, width: usize| Column::right(heading).min_width(width).gap("");
    Table::new(vec![
        Column::left("phase").min_width(14),
        number("wall (s)", 9),
        number("CPU-s", 8),
        number("avg busy", 10),
        number("peak busy", 11),
    ])
}

fn phase_cells(p: &PhaseFigures) -> [String; 5] {
    [
        p.phase.as_str().to_owned(),
        format!("{:.2}", p.wall_s),
        format!("{:.2}", p.cpu_s),
        format!("{:.1}", p.avg_busy),
        format!("{:.1}", p.peak_busy),
    ]
}

fn resume_line(r: &ResumeRow, replies: usize) -> String {
    let count =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    format!(
        "resume {} at {}: kept {}/{replies} replies, {}, {}, {}{}",
        r.attempt,
        r.started_at,
        r.replies_kept,
        count(r.extracted_kept, "extraction", "extractions"),
        count(r.probed_kept, "probe verdict", "probe verdicts"),
        count(r.scored_kept, "score", "scores"),
        if r.committed_kept {
            ", the committed score"
        } else {
            ""
        }
    )
}

/// The best scored candidate: most cases passed, then earliest. (Scoring
/// wall time is too noisy to break ties; a tie on score goes to the first.)
pub fn best(candidates: &[CandidateRow]) -> Option<Best> {
    candidates
        .iter()
        .filter_map(|c| {
            let s = c.score.as_ref()?;
            matches!(s.verdict, ScoreVerdict::Scored { .. }).then_some((c.idx, s))
        })
        .min_by(|(ia, a), (ib, b)| b.passed.cmp(&a.passed).then(ia.cmp(ib)))
        .map(|(idx, s)| Best {
            candidate_id: idx,
            passed: s.passed,
            total: s.total,
        })
}

impl CandidateLine {
    pub fn new(c: &CandidateRow) -> CandidateLine {
        CandidateLine {
            candidate_id: c.idx,
            pool: c.pool.clone(),
            model: c.model.clone(),
            extract: c.extraction.kind().to_owned(),
            dup_of: c.dup_of,
            probe: c.probe.as_ref().map(ToString::to_string),
            score: c.score.as_ref().map(|s| s.verdict.to_string()),
            admitted: c.admitted,
            error_file: c.error_file.clone(),
            alpha_dup_of: match c.exact_dup_of {
                Some(_) => None,
                None => c.alpha_dup_of,
            },
            cpu_ms: c.score.as_ref().map(|s| s.cpu.as_secs_f64() * 1e3),
            cases: c
                .score
                .as_ref()
                .filter(|s| !s.cases.is_empty())
                .map(|s| crate::score::case_letters(&s.cases)),
            restarts: c.score.as_ref().map(|s| s.restarts),
            peak_processes: c.score.as_ref().and_then(|s| s.peak_processes),
            rank: c.rank,
            admission: c.admission.clone(),
        }
    }
}

/// The per-candidate table of `show`: each candidate's verdicts, the CPU
/// time of its scoring run, and admission's decision with the rank (the
/// order `--promote` goes by; docs/reports.md says how ties are broken).
pub fn candidate_table(lines: &[CandidateLine]) -> String {
    let score = |l: &CandidateLine| {
        let mut s = l.score.clone().unwrap_or_else(|| "-".into());
        if let Some(failures) = l.cases.as_deref().and_then(case_failures) {
            s = format!("{s} {failures}");
        }
        s
    };
    let mut table = Table::new(vec![
        Column::right("cand"),
        Column::left("extract"),
        Column::left("dup of"),
        Column::left("probe"),
        Column::left("score"),
        Column::right("CPU ms"),
        Column::left("admit"),
        Column::right("rank"),
        Column::left("errors"),
    ]);
    for l in lines {
        table.row([
            l.candidate_id.to_string(),
            l.extract.clone(),
            l.dup_of.map_or_else(|| "-".into(), |d| d.to_string()),
            l.probe.clone().unwrap_or_else(|| "-".into()),
            score(l),
            l.cpu_ms.map_or_else(|| "-".into(), |ms| format!("{ms:.1}")),
            admit_cell(l),
            l.rank.map_or_else(|| "-".into(), |r| r.to_string()),
            l.error_file.clone().unwrap_or_default(),
        ]);
    }
    table.render()
}

/// `yes` for an admitted candidate (its rank has a column of its own), why
/// not for a refused one (`below_min_score`, `regressed(3)`), `no` for one
/// admission never saw.
fn admit_cell(l: &CandidateLine) -> String {
    match (&l.admission, l.admitted) {
        (_, true) => "yes".into(),
        (Some(why), false) => why.clone(),
        (None, false) => "no".into(),
    }
}

/// How a candidate's failed cases failed, where that is more than a wrong
/// answer: `(3 panicked, 1 timed out)`; `None` when every failure (if any)
/// was a wrong answer.
pub fn case_failures(cases: &str) -> Option<String> {
    let count = |c: char| cases.chars().filter(|&x| x == c).count();
    let parts: Vec<String> = [('x', "panicked"), ('t', "timed out"), ('c', "crashed")]
        .into_iter()
        .filter(|(c, _)| count(*c) > 0)
        .map(|(c, what)| format!("{} {what}", count(c)))
        .collect();
    (!parts.is_empty()).then(|| format!("({})", parts.join(", ")))
}

/// The table of `batches`.
pub fn batch_table(batches: &[BatchRow]) -> String {
    let mut table = Table::new(vec![
        Column::right("batch"),
        Column::left("task"),
        Column::left("pool"),
        Column::left("status"),
        Column::right("n"),
        Column::left("started"),
    ]);
    for b in batches {
        table.row([
            b.id.to_string(),
            b.task.clone(),
            b.pool.clone(),
            match (b.status, b.lease_lapsed) {
                (crate::store::BatchStatus::Running, true) => "running (lease lapsed)".into(),
                (status, _) => status.as_str().to_owned(),
            },
            b.n.to_string(),
            b.started_at.clone(),
        ]);
    }
    table.render()
}

/// What the summary's words mean, printed under its phase table.
const SUMMARY_KEY: &str = "key: ranked first = the admitted candidate --promote would write \
    (most cases passed; on a tie, CPU time where it differs beyond noise, then shorter source, \
    then lower index); most passed = the most cases any candidate passed, admitted \
    or not; busy = CPUs in use, on average (CPU-s / wall) and in the busiest 200 ms\n";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::account::Phase;

    #[test]
    fn a_resumed_table_marks_where_each_attempt_begins() {
        let f = |phase| PhaseFigures {
            phase,
            wall_s: 1.0,
            cpu_s: 1.0,
            avg_busy: 1.0,
            peak_busy: 1.0,
        };
        let resume = ResumeRow {
            attempt: 1,
            started_at: "T".into(),
            first_phase: 1,
            replies_kept: 6,
            extracted_kept: 1,
            probed_kept: 0,
            scored_kept: 2,
            committed_kept: true,
        };
        let table = resumed_phase_table(&[f(Phase::Draw), f(Phase::Draw)], &[resume], 6);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("phase"));
        assert_eq!(lines[1], "first attempt");
        assert!(lines[2].starts_with("draw"));
        assert_eq!(
            lines[3],
            "resume 1 at T: kept 6/6 replies, 1 extraction, 0 probe verdicts, 2 scores, the committed score"
        );
        assert!(lines[4].starts_with("draw"));
        assert_eq!(lines.len(), 5);
    }

    fn run_row() -> ProbeRunRow {
        ProbeRunRow {
            id: 1,
            mode: "shared".into(),
            origin: "batch".into(),
            work_dir: None,
            started_at: "T".into(),
            wall_s: Some(1.0),
            cpu_s: Some(1.0),
            avg_busy: Some(1.0),
            peak_busy: Some(1.0),
            builds: Some(3),
            passes: Some(0),
            fallbacks: Some(0),
            waves: Some(1),
            deps_fresh: Some(4),
            deps_rebuilt: Some(vec![]),
            rustc_version: Some(
                "rustc 1.95.0 (59807616e 2026-04-14)\nhost: x86_64-unknown-linux-gnu".into(),
            ),
            cargo_version: Some("cargo 1.95.0 (f2d3ce0bd 2026-03-21)".into()),
            retries: Some(vec![
                crate::build::probe::ProbeRetry {
                    idx: 0,
                    after: crate::build::probe::ProbeFailure::Killed,
                    attempt: 1,
                },
                crate::build::probe::ProbeRetry {
                    idx: 2,
                    after: crate::build::probe::ProbeFailure::CargoFailed,
                    attempt: 1,
                },
            ]),
            compiled: 2,
            probed: 3,
        }
    }

    #[test]
    fn a_probe_run_shows_its_retries_and_toolchain() {
        assert_eq!(
            probe_run_lines(&run_row(), &[]),
            "probe: shared, 1 wave, 3 builds, 2 retries (c0 after killed, c2 after cargo_failed)\n\
             toolchain: rustc 1.95.0 (59807616e 2026-04-14) x86_64-unknown-linux-gnu, \
             cargo 1.95.0 (f2d3ce0bd 2026-03-21)\n"
        );
        let quiet = ProbeRunRow {
            retries: Some(vec![]),
            ..run_row()
        };
        assert!(probe_run_lines(&quiet, &[])
            .starts_with("probe: shared, 1 wave, 3 builds, no retries\n"));
        // Recorded before migration 0006 (retries, toolchain) and 0003 (the
        // rest), by a mode since removed.
        let old = ProbeRunRow {
            mode: "wide".into(),
            waves: None,
            builds: None,
            retries: None,
            rustc_version: None,
            cargo_version: None,
            ..run_row()
        };
        assert_eq!(
            probe_run_lines(&old, &[]),
            "probe: wide\ntoolchain: unknown\n"
        );
        // A batch with repair rounds: the run sums the rounds it names.
        assert!(
            probe_run_lines(&quiet, &[0, 2])
                .starts_with("probe (rounds 0, 2 summed): shared, 1 wave,"),
            "{}",
            probe_run_lines(&quiet, &[0, 2])
        );
        assert!(probe_run_lines(&quiet, &[0]).starts_with("probe (round 0): shared,"));
    }

    /// Round 0 always, and each later round that probed a candidate of its
    /// own: round 1 here drew only duplicates, round 2 a new candidate.
    #[test]
    fn the_probe_run_sums_the_rounds_that_probed() {
        use crate::store::Lineage;
        let lineage = |idx, round| Lineage {
            idx,
            round,
            parent: (round > 0).then_some(0),
        };
        let lineage = [lineage(0, 0), lineage(1, 1), lineage(2, 2)];
        let candidate = |idx, probed: bool| CandidateRow {
            idx,
            pool: "p".into(),
            model: None,
            completion_tokens: None,
            extraction: crate::text::extract::Extraction::Source("fn f() {}".into()),
            fingerprint: None,
            dup_of: (!probed).then_some(0),
            probe: probed.then_some(crate::build::probe::ProbeVerdict::Compiled),
            error_file: None,
            score: None,
            admitted: false,
            alpha_fingerprint: None,
            exact_dup_of: None,
            alpha_dup_of: None,
            rank: None,
            admission: None,
        };
        let candidates = [candidate(0, true), candidate(1, false), candidate(2, true)];
        let round = |round| crate::repair::RoundFigures {
            round,
            parents: 0,
            replies: 1,
            unique: 1,
            compiled: 1,
            passing: 0,
            best: None,
            prompt_tokens: None,
            output_tokens: None,
            wall_s: None,
            stopped: None,
        };
        let rounds = [round(0), round(1), round(2)];
        assert_eq!(probe_rounds(&rounds, &lineage, &candidates), [0, 2]);
        // A batch without rounds names none.
        assert!(probe_rounds(&[], &lineage, &candidates).is_empty());
    }

    #[test]
    fn phase_table_lines_up() {
        let table = phase_table(&[PhaseFigures {
            phase: Phase::ExtractDedup,
            wall_s: 0.02,
            cpu_s: 0.02,
            avg_busy: 1.0,
            peak_busy: 1.0,
        }]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0],
            "phase          wall (s)   CPU-s  avg busy  peak busy"
        );
        assert_eq!(
            lines[1],
            "extract+dedup      0.02    0.02       1.0        1.0"
        );
    }

    #[test]
    fn case_failures_say_how_cases_failed_beyond_wrong_answers() {
        assert_eq!(case_failures("ppppf"), None);
        assert_eq!(case_failures("ppxxx").as_deref(), Some("(3 panicked)"));
        assert_eq!(
            case_failures("pxtc-f").as_deref(),
            Some("(1 panicked, 1 timed out, 1 crashed)")
        );
    }

    fn line(id: usize, cpu_ms: Option<f64>, rank: Option<usize>, admission: &str) -> CandidateLine {
        CandidateLine {
            candidate_id: id,
            pool: "replay".into(),
            model: None,
            extract: "extracted".into(),
            dup_of: None,
            probe: Some("compiled".into()),
            score: cpu_ms.map(|_| "scored(10/10)".into()),
            admitted: rank.is_some(),
            error_file: None,
            alpha_dup_of: None,
            cpu_ms,
            cases: None,
            restarts: None,
            peak_processes: None,
            rank,
            admission: (!admission.is_empty()).then(|| admission.into()),
        }
    }

    /// Issue 30: the rank was in the JSON and CSV only.
    #[test]
    fn the_candidate_table_shows_cpu_time_admission_and_rank() {
        let table = candidate_table(&[
            line(0, Some(2.46), Some(2), "admitted(rank 2)"),
            line(1, Some(61.0), None, "below_min_score"),
            line(2, Some(1.91), Some(1), "admitted(rank 1)"),
            line(3, None, None, ""),
        ]);
        assert_eq!(
            table,
            "cand  extract    dup of  probe     score          CPU ms  admit            rank  errors\n\
             \x20  0  extracted  -       compiled  scored(10/10)     2.5  yes                 2\n\
             \x20  1  extracted  -       compiled  scored(10/10)    61.0  below_min_score     -\n\
             \x20  2  extracted  -       compiled  scored(10/10)     1.9  yes                 1\n\
             \x20  3  extracted  -       compiled  -                   -  no                  -\n"
        );
    }
}
