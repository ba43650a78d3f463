//! Compare: the figures an operator weighs when choosing between pools.
//!
//! [`PoolFigures`] is computed from stored rows only (a batch, its replies,
//! candidates and phases), so a comparison of two batches made last week and
//! one made a second ago by `assay compare --spec` read the same way. Pure: no
//! IO here; callers fetch the rows and print the strings.
//!
//! Honesty rules: a figure that was not measured is `None` and prints as
//! `unknown`, never zero and never estimated. Output tokens come from the
//! servers' usage blocks; if any reply of a batch lacks usage, the batch's
//! token total (and everything derived from it) is unknown.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::Serialize;

use crate::draw::Drawn;
use crate::report::batch::{self, Best};
use crate::store::{BatchRow, CandidateRow};
use crate::support::account::{Phase, PhaseFigures};

/// One batch's speed and quality figures (a column of `assay compare`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolFigures {
    pub batch_id: i64,
    pub task: String,
    pub pool: String,
    /// The distinct models that wrote the replies, as the server named them.
    pub models: Vec<String>,
    pub status: String,
    /// Served from a recorded corpus: the draw timed the replay, not a
    /// server, so the rates over draw wall are `None` (the recorded TTFT and
    /// latency are the original server's).
    pub replayed: bool,
    /// Requests that ended with a reply (the figures below are over these).
    pub replies: usize,
    /// Requests that ended without one: HTTP errors, resets, timeouts.
    pub failed: usize,
    /// The failures by kind, with the engine's own sentence.
    pub errors: Vec<ErrorKind>,
    /// Replies / draw wall.
    pub completions_per_s: Option<f64>,
    /// Sum of the usage blocks' completion tokens; `None` if any reply has none.
    pub output_tokens: Option<u64>,
    pub replies_with_usage: usize,
    /// Sum of the replies' prompt tokens; `None` if any reply lacks one.
    pub prompt_tokens: Option<u64>,
    /// Of those, the tokens the server took from its prompt cache
    /// (`cached_tokens`, llama.cpp's `cache_n`); `None` if any reply lacks
    /// the figure. Caching is what spreads TTFT between equal prompts.
    pub cached_prompt_tokens: Option<u64>,
    /// Output tokens / draw wall.
    pub output_tok_per_s: Option<f64>,
    /// Output tokens / streamed chunks (vLLM packs several tokens a chunk);
    /// `None` where tokens or chunks are unknown (replay, no usage).
    pub tokens_per_chunk: Option<f64>,
    /// Time to first token, queue wait included.
    pub ttft_ms: Option<Stats>,
    /// Whole request.
    pub latency_ms: Option<Stats>,
    /// Replies that stopped at the token cap.
    pub hit_cap: usize,
    /// Replies whose content is null or only whitespace.
    pub empty_or_null: usize,
    pub extracted: usize,
    pub unique: usize,
    /// Members of the largest group of identical candidates (1 when no two
    /// are alike, 0 when nothing was extracted).
    pub largest_duplicate_group: usize,
    pub compiled: usize,
    pub admitted: usize,
    pub best: Option<Best>,
    /// Start of the batch to its end, from the stored timestamps.
    pub batch_wall_s: Option<f64>,
    pub draw_wall_s: Option<f64>,
    pub probe_cpu_s: Option<f64>,
    /// Score build and score run together.
    pub score_cpu_s: Option<f64>,
    /// Admitted candidates per 1,000 output tokens.
    pub admitted_per_1k_output_tokens: Option<f64>,
    /// Admitted candidates per minute of draw wall.
    pub admitted_per_draw_minute: Option<f64>,
}

/// Failed requests of one kind and one sentence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorKind {
    /// The outcome's stable string: `http_error(500)`, `timeout`, ...
    pub outcome: String,
    /// The engine's sentence (or the transport's words); `None` if none.
    pub message: Option<String>,
    pub count: usize,
}

/// Mean, median and maximum of the replies where the figure is known.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stats {
    /// How many replies the figure is known for.
    pub n: usize,
    pub mean: f64,
    /// Nearest-rank median: the value at rank ceil(n / 2).
    pub p50: f64,
    pub max: f64,
}

/// The stored rows of one batch, as [`PoolFigures::new`] reads them.
#[derive(Debug, Clone, Copy)]
pub struct BatchRows<'a> {
    pub batch: &'a BatchRow,
    pub replies: &'a [Drawn],
    pub candidates: &'a [CandidateRow],
    pub phases: &'a [PhaseFigures],
    pub batch_wall_s: Option<f64>,
}

impl Stats {
    /// `None` for no values.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Stats> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        Some(Stats {
            n,
            mean: v.iter().sum::<f64>() / n as f64,
            p50: v[n.div_ceil(2) - 1],
            max: v[n - 1],
        })
    }
}

impl PoolFigures {
    pub fn new(rows: BatchRows<'_>) -> PoolFigures {
        let BatchRows {
            batch,
            replies,
            candidates,
            phases,
            batch_wall_s,
        } = rows;
        let phase_sum = |want: &[Phase], field: fn(&PhaseFigures) -> f64| {
            let mut found = phases.iter().filter(|p| want.contains(&p.phase)).peekable();
            found.peek()?;
            Some(found.map(field).sum::<f64>())
        };
        let draw_wall_s = phase_sum(&[Phase::Draw], |p| p.wall_s);
        let replayed = is_replay(&batch.pool);
        let rate_wall_s = draw_wall_s.filter(|w| *w > 0.0 && !replayed);
        let per_draw_s = |x: f64| rate_wall_s.map(|w| x / w);

        let (ok, failed): (Vec<&Drawn>, Vec<&Drawn>) =
            replies.iter().partition(|d| d.reply.outcome.is_ok());
        let mut errors: BTreeMap<(String, Option<String>), usize> = BTreeMap::new();
        for d in &failed {
            let message = d.reply.error.as_ref().map(|e| e.message.clone());
            *errors
                .entry((d.reply.outcome.to_string(), message))
                .or_default() += 1;
        }
        let replies_with_usage = ok
            .iter()
            .filter(|d| d.reply.completion_tokens.is_some())
            .count();
        let output_tokens: Option<u64> = (replies_with_usage == ok.len() && !ok.is_empty())
            .then(|| ok.iter().filter_map(|d| d.reply.completion_tokens).sum());
        let sum_all = |f: fn(&Drawn) -> Option<u64>| -> Option<u64> {
            (!ok.is_empty())
                .then(|| ok.iter().map(|d| f(d)).sum::<Option<u64>>())
                .flatten()
        };
        let prompt_tokens = sum_all(|d| d.reply.prompt_tokens);
        let cached_prompt_tokens = sum_all(|d| d.reply.cached_prompt_tokens);
        let chunked: Vec<(u64, u64)> = ok
            .iter()
            .filter_map(|d| Some((d.reply.completion_tokens?, d.reply.chunks?)))
            .collect();
        let chunks: u64 = chunked.iter().map(|c| c.1).sum();
        let tokens_per_chunk = (chunked.len() == ok.len() && chunks > 0)
            .then(|| chunked.iter().map(|c| c.0).sum::<u64>() as f64 / chunks as f64);

        let extracted: Vec<&CandidateRow> = candidates
            .iter()
            .filter(|c| c.extraction.kind() == "extracted")
            .collect();
        let mut groups: BTreeMap<usize, usize> = BTreeMap::new();
        for c in &extracted {
            *groups.entry(c.dup_of.unwrap_or(c.idx)).or_default() += 1;
        }
        let admitted = candidates.iter().filter(|c| c.admitted).count();

        PoolFigures {
            batch_id: batch.id,
            task: batch.task.clone(),
            pool: batch.pool.clone(),
            models: ok
                .iter()
                .filter_map(|d| d.reply.model.clone())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect(),
            status: batch.status.to_string(),
            replayed,
            replies: ok.len(),
            failed: failed.len(),
            errors: errors
                .into_iter()
                .map(|((outcome, message), count)| ErrorKind {
                    outcome,
                    message,
                    count,
                })
                .collect(),
            completions_per_s: per_draw_s(ok.len() as f64),
            output_tokens,
            replies_with_usage,
            prompt_tokens,
            cached_prompt_tokens,
            output_tok_per_s: output_tokens.and_then(|t| per_draw_s(t as f64)),
            tokens_per_chunk,
            ttft_ms: Stats::of(ok.iter().filter_map(|d| d.reply.ttft_ms)),
            latency_ms: Stats::of(ok.iter().filter_map(|d| d.reply.latency_ms)),
            hit_cap: ok
                .iter()
                .filter(|d| d.reply.hit_cap || d.reply.finish_reason.as_deref() == Some("length"))
                .count(),
            empty_or_null: ok
                .iter()
                .filter(|d| {
                    d.reply
                        .content
                        .as_deref()
                        .is_none_or(|c| c.trim().is_empty())
                })
                .count(),
            extracted: extracted.len(),
            unique: groups.len(),
            largest_duplicate_group: groups.values().copied().max().unwrap_or(0),
            compiled: candidates
                .iter()
                .filter(|c| c.probe.as_ref().is_some_and(|p| p.compiled()))
                .count(),
            admitted,
            best: batch::best(candidates),
            batch_wall_s,
            draw_wall_s,
            probe_cpu_s: phase_sum(&[Phase::Probe], |p| p.cpu_s),
            score_cpu_s: phase_sum(&[Phase::ScoreBuild, Phase::ScoreRun], |p| p.cpu_s),
            admitted_per_1k_output_tokens: output_tokens
                .filter(|t| *t > 0)
                .map(|t| admitted as f64 * 1000.0 / t as f64),
            admitted_per_draw_minute: rate_wall_s.map(|w| admitted as f64 * 60.0 / w),
        }
    }

    /// One line of draw figures, for `show`.
    pub fn draw_line(&self) -> String {
        let triple = |s: Option<Stats>| match s {
            Some(s) => format!("{:.0}/{:.0}/{:.0} ms", s.mean, s.p50, s.max),
            None => "unknown".into(),
        };
        format!(
            "draw: {} completions/s  {} output tok/s  TTFT mean/p50/max {}  \
             latency mean/p50/max {}  hit cap {}  empty or null {}  prompt tokens {}\n",
            rate(self, self.completions_per_s, 2),
            rate(self, self.output_tok_per_s, 1),
            triple(self.ttft_ms),
            triple(self.latency_ms),
            self.hit_cap,
            self.empty_or_null,
            prompt_tokens(self),
        )
    }

    /// The column heading: batch and pool.
    pub fn label(&self) -> String {
        format!("batch {} ({})", self.batch_id, self.pool)
    }
}

/// The replay pool's name (see `draw::Plan::replay`).
pub fn is_replay(pool: &str) -> bool {
    pool == "replay"
}

/// `assay compare`: one column per batch, one row per figure.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub pools: Vec<PoolFigures>,
}

impl Comparison {
    /// A warning when the batches are of different tasks: their scores
    /// count different cases, so they do not compare.
    pub fn mixed_tasks(&self) -> Option<String> {
        let mut tasks: Vec<&str> = self.pools.iter().map(|p| p.task.as_str()).collect();
        tasks.dedup();
        if tasks.len() < 2 {
            return None;
        }
        tasks.sort_unstable();
        tasks.dedup();
        Some(format!(
            "these batches are of different tasks ({}): their scores count different cases and do not compare",
            tasks.join(", ")
        ))
    }

    pub fn render(&self) -> String {
        let cols = &self.pools;
        let rows: Vec<(&str, Vec<String>)> = vec![
            ("task", cols.iter().map(|p| p.task.clone()).collect()),
            (
                "model",
                cols.iter()
                    .map(|p| match p.models.as_slice() {
                        [] => "unknown".to_owned(),
                        [one] => one.clone(),
                        [first, rest @ ..] => format!("{first} +{} more", rest.len()),
                    })
                    .collect(),
            ),
            ("status", cols.iter().map(|p| p.status.clone()).collect()),
            (
                "replies",
                cols.iter().map(|p| p.replies.to_string()).collect(),
            ),
            ("failed requests", col(cols, |p| p.failed.to_string())),
            (
                "completions/s",
                col(cols, |p| rate(p, p.completions_per_s, 2)),
            ),
            ("output tokens", col(cols, output_tokens)),
            (
                "output tok/s",
                col(cols, |p| rate(p, p.output_tok_per_s, 1)),
            ),
            ("tokens/chunk", col(cols, |p| num(p.tokens_per_chunk, 2))),
            ("prompt tokens (cached)", col(cols, prompt_tokens)),
            ("TTFT mean (ms)", col(cols, |p| stat(p.ttft_ms, |s| s.mean))),
            ("TTFT p50 (ms)", col(cols, |p| stat(p.ttft_ms, |s| s.p50))),
            ("TTFT max (ms)", col(cols, |p| stat(p.ttft_ms, |s| s.max))),
            (
                "latency mean (ms)",
                col(cols, |p| stat(p.latency_ms, |s| s.mean)),
            ),
            (
                "latency p50 (ms)",
                col(cols, |p| stat(p.latency_ms, |s| s.p50)),
            ),
            (
                "latency max (ms)",
                col(cols, |p| stat(p.latency_ms, |s| s.max)),
            ),
            ("hit the cap", col(cols, |p| of(p.hit_cap, p.replies))),
            (
                "empty or null",
                col(cols, |p| of(p.empty_or_null, p.replies)),
            ),
            ("extracted", col(cols, |p| of(p.extracted, p.replies))),
            (
                "unique (largest dup)",
                col(cols, |p| {
                    format!("{} ({})", p.unique, p.largest_duplicate_group)
                }),
            ),
            ("compiled", col(cols, |p| of(p.compiled, p.unique))),
            ("admitted", col(cols, |p| p.admitted.to_string())),
            (
                "best score",
                col(cols, |p| match p.best {
                    Some(b) => format!("{}/{}", b.passed, b.total),
                    None => "none".into(),
                }),
            ),
            ("batch wall (s)", col(cols, |p| num(p.batch_wall_s, 2))),
            ("draw wall (s)", col(cols, |p| num(p.draw_wall_s, 2))),
            ("probe CPU-s", col(cols, |p| num(p.probe_cpu_s, 2))),
            ("score CPU-s", col(cols, |p| num(p.score_cpu_s, 2))),
            (
                "admitted/1k out tok",
                col(cols, |p| num(p.admitted_per_1k_output_tokens, 3)),
            ),
            (
                "admitted/draw min",
                col(cols, |p| rate(p, p.admitted_per_draw_minute, 1)),
            ),
        ];
        let headings: Vec<String> = cols.iter().map(PoolFigures::label).collect();
        let mut out = crate::support::table::labelled("", &headings, &rows);
        for p in cols {
            for e in &p.errors {
                let _ = writeln!(
                    out,
                    "{}: {} x {}: {}",
                    p.label(),
                    e.count,
                    e.outcome,
                    e.message.as_deref().unwrap_or("(no message)")
                );
            }
        }
        out
    }
}

/// `1200 (cached 1100)`; either part `unknown` when a reply lacks it.
fn prompt_tokens(p: &PoolFigures) -> String {
    let known = |t: Option<u64>| t.map_or("unknown".to_owned(), |t| t.to_string());
    format!(
        "{} (cached {})",
        known(p.prompt_tokens),
        known(p.cached_prompt_tokens)
    )
}

fn col(cols: &[PoolFigures], f: impl Fn(&PoolFigures) -> String) -> Vec<String> {
    cols.iter().map(f).collect()
}

/// A known number with `decimals` places, or `unknown`.
pub fn num(x: Option<f64>, decimals: usize) -> String {
    match x {
        Some(x) => format!("{x:.decimals$}"),
        None => "unknown".into(),
    }
}

/// A rate over draw wall: `replay` where the draw timed a replay.
fn rate(p: &PoolFigures, x: Option<f64>, decimals: usize) -> String {
    if p.replayed {
        "n/a (replay)".into()
    } else {
        num(x, decimals)
    }
}

fn stat(s: Option<Stats>, pick: fn(&Stats) -> f64) -> String {
    num(s.as_ref().map(pick), 0)
}

fn of(part: usize, whole: usize) -> String {
    format!("{part}/{whole}")
}

fn output_tokens(p: &PoolFigures) -> String {
    match p.output_tokens {
        Some(t) => t.to_string(),
        None if p.replies_with_usage == 0 => "unknown (no usage)".into(),
        None => format!(
            "unknown ({}/{} with usage)",
            p.replies_with_usage, p.replies
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::package::ModuleKey;
    use crate::build::probe::ProbeVerdict;
    use crate::draw::{ErrorText, Outcome, Reply};
    use crate::score::{ScoreVerdict, Scored};
    use crate::store::BatchStatus;
    use crate::text::extract::{Extraction, NoCode};
    use std::time::Duration;

    fn batch() -> BatchRow {
        BatchRow {
            id: 7,
            task: "demo".into(),
            spec_path: "specs/demo/spec.toml".into(),
            pool: "fast".into(),
            n: 4,
            status: BatchStatus::Finished,
            started_at: String::new(),
            finished_at: None,
            errors_dir: None,
            committed: None,
            failure: None,
            dedup_by: crate::spec::DedupBy::Exact,
            sandbox: None,
            sandbox_warnings: None,
            committed_hash: None,
            lane: None,
            lease_lapsed: false,
        }
    }

    fn reply(idx: usize, tokens: Option<u64>, latency: Option<f64>, finish: &str) -> Drawn {
        Drawn {
            idx,
            pool: "fast".into(),
            reply: Reply {
                content: Some("```rust\nfn f() {}\n```".into()),
                finish_reason: Some(finish.into()),
                prompt_tokens: Some(10),
                completion_tokens: tokens,
                model: Some("m".into()),
                ttft_ms: latency.map(|l| l / 4.0),
                latency_ms: latency,
                // Two tokens a chunk.
                chunks: tokens.map(|t| t / 2),
                ..Reply::default()
            },
        }
    }

    fn with(mut d: Drawn, change: impl FnOnce(&mut Reply)) -> Drawn {
        change(&mut d.reply);
        d
    }

    fn failed(idx: usize, outcome: Outcome, message: &str) -> Drawn {
        with(reply(idx, None, Some(5.0), "stop"), |r| {
            r.content = None;
            r.finish_reason = None;
            r.outcome = outcome;
            r.error = Some(ErrorText {
                message: message.into(),
                body: None,
            });
        })
    }

    /// A candidate: extracted or not, its group, compiled or not, its score.
    fn cand(
        idx: usize,
        extracted: bool,
        dup_of: Option<usize>,
        compiled: bool,
        passed: Option<usize>,
        admitted: bool,
    ) -> CandidateRow {
        CandidateRow {
            idx,
            pool: "fast".into(),
            model: None,
            completion_tokens: None,
            extraction: if extracted {
                Extraction::Source("fn f() {}".into())
            } else {
                Extraction::Failed(NoCode::NoFence)
            },
            fingerprint: None,
            dup_of,
            probe: (extracted && dup_of.is_none()).then(|| {
                if compiled {
                    ProbeVerdict::Compiled
                } else {
                    ProbeVerdict::CompileError { codes: vec![] }
                }
            }),
            error_file: None,
            score: passed.map(|p| Scored {
                key: ModuleKey::Candidate(idx),
                verdict: ScoreVerdict::Scored {
                    passed: p,
                    total: 10,
                },
                passed: p,
                total: 10,
                wall: Duration::ZERO,
                cpu: Duration::ZERO,
                cases: Vec::new(),
                restarts: 0,
                peak_processes: None,
                stderr: String::new(),
            }),
            admitted,
            alpha_fingerprint: None,
            exact_dup_of: dup_of,
            alpha_dup_of: None,
            rank: None,
            admission: None,
        }
    }

    fn phase(phase: Phase, wall_s: f64, cpu_s: f64) -> PhaseFigures {
        PhaseFigures {
            phase,
            wall_s,
            cpu_s,
            avg_busy: 0.0,
            peak_busy: 0.0,
        }
    }

    #[test]
    fn stats_use_nearest_rank_median() {
        let check = |values: &[f64], want: Option<(usize, f64, f64, f64)>| {
            let got = Stats::of(values.iter().copied()).map(|s| (s.n, s.mean, s.p50, s.max));
            assert_eq!(got, want, "{values:?}");
        };
        check(&[], None);
        check(&[5.0], Some((1, 5.0, 5.0, 5.0)));
        check(&[4.0, 1.0], Some((2, 2.5, 1.0, 4.0)));
        check(&[3.0, 1.0, 2.0], Some((3, 2.0, 2.0, 3.0)));
        check(&[10.0, 1.0, 2.0, 3.0], Some((4, 4.0, 2.0, 10.0)));
    }

    #[test]
    fn figures_of_a_batch() {
        let replies = vec![
            reply(0, Some(100), Some(1000.0), "stop"),
            reply(1, Some(300), Some(3000.0), "length"),
            with(reply(2, Some(50), Some(2000.0), "stop"), |r| {
                r.content = Some("  \n".into())
            }),
            with(reply(3, Some(50), None, "stop"), |r| r.content = None),
            failed(4, Outcome::HttpError { status: 500 }, "boom"),
            failed(5, Outcome::Timeout, "the pool's timeout passed"),
            failed(6, Outcome::HttpError { status: 500 }, "boom"),
        ];
        let candidates = vec![
            cand(0, true, None, true, Some(10), true),
            cand(1, true, Some(0), false, None, false),
            cand(2, false, None, false, None, false),
            cand(3, false, None, false, None, false),
        ];
        let phases = vec![
            phase(Phase::Draw, 2.0, 0.1),
            phase(Phase::Probe, 1.0, 1.5),
            phase(Phase::ScoreBuild, 0.5, 0.75),
            phase(Phase::ScoreRun, 1.0, 1.25),
        ];
        let f = PoolFigures::new(BatchRows {
            batch: &batch(),
            replies: &replies,
            candidates: &candidates,
            phases: &phases,
            batch_wall_s: Some(5.0),
        });
        assert_eq!((f.replies, f.failed), (4, 3));
        assert_eq!(
            f.errors,
            vec![
                ErrorKind {
                    outcome: "http_error(500)".into(),
                    message: Some("boom".into()),
                    count: 2
                },
                ErrorKind {
                    outcome: "timeout".into(),
                    message: Some("the pool's timeout passed".into()),
                    count: 1
                },
            ]
        );
        assert_eq!(f.completions_per_s, Some(2.0));
        assert_eq!(f.output_tokens, Some(500));
        assert_eq!(f.output_tok_per_s, Some(250.0));
        assert_eq!(f.tokens_per_chunk, Some(2.0));
        assert_eq!(f.prompt_tokens, Some(40));
        assert_eq!(f.cached_prompt_tokens, None, "no reply said");
        let text = Comparison {
            pools: vec![f.clone()],
        }
        .render();
        assert!(
            text.contains("batch 7 (fast): 2 x http_error(500): boom"),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.starts_with("failed requests") && l.ends_with(" 3")),
            "{text}"
        );
        let latency = f.latency_ms.unwrap();
        assert_eq!(
            (latency.n, latency.mean, latency.p50, latency.max),
            (3, 2000.0, 2000.0, 3000.0)
        );
        assert_eq!(f.ttft_ms.unwrap().max, 750.0);
        assert_eq!((f.hit_cap, f.empty_or_null), (1, 2));
        assert_eq!(
            (f.extracted, f.unique, f.largest_duplicate_group),
            (2, 1, 2)
        );
        assert_eq!((f.compiled, f.admitted), (1, 1));
        assert_eq!(f.best.map(|b| (b.candidate_id, b.passed)), Some((0, 10)));
        assert_eq!(f.probe_cpu_s, Some(1.5));
        assert_eq!(f.score_cpu_s, Some(2.0));
        assert_eq!(f.admitted_per_1k_output_tokens, Some(2.0));
        assert_eq!(f.admitted_per_draw_minute, Some(30.0));
        assert_eq!(f.models, vec!["m".to_owned()]);
    }

    #[test]
    fn batches_of_different_tasks_are_named_in_a_warning() {
        let of = |task: &str| {
            let mut b = batch();
            b.task = task.into();
            PoolFigures::new(BatchRows {
                batch: &b,
                replies: &[],
                candidates: &[],
                phases: &[],
                batch_wall_s: None,
            })
        };
        let same = Comparison {
            pools: vec![of("absolute"), of("absolute")],
        };
        assert_eq!(same.mixed_tasks(), None);
        let mixed = Comparison {
            pools: vec![of("shellwords"), of("absolute"), of("shellwords")],
        };
        assert_eq!(
            mixed.mixed_tasks().as_deref(),
            Some("these batches are of different tasks (absolute, shellwords): their scores count different cases and do not compare")
        );
    }

    #[test]
    fn missing_usage_makes_tokens_unknown_not_zero() {
        let replies = vec![
            reply(0, Some(100), Some(1.0), "stop"),
            reply(1, None, Some(1.0), "stop"),
        ];
        let f = PoolFigures::new(BatchRows {
            batch: &batch(),
            replies: &replies,
            candidates: &[cand(0, true, None, true, Some(10), true)],
            phases: &[phase(Phase::Draw, 1.0, 0.0)],
            batch_wall_s: None,
        });
        assert_eq!(f.output_tokens, None);
        assert_eq!(f.output_tok_per_s, None);
        assert_eq!(f.prompt_tokens, Some(20));
        assert_eq!(f.admitted_per_1k_output_tokens, None);
        assert_eq!(f.replies_with_usage, 1);
        assert_eq!(f.completions_per_s, Some(2.0));
        let text = Comparison { pools: vec![f] }.render();
        assert!(text.contains("unknown (1/2 with usage)"), "{text}");
        assert!(
            text.lines()
                .any(|l| l.starts_with("output tok/s") && l.ends_with("unknown")),
            "{text}"
        );
    }

    #[test]
    fn a_replayed_batch_has_no_rates() {
        let replies = vec![reply(0, Some(100), Some(1000.0), "stop")];
        let f = PoolFigures::new(BatchRows {
            batch: &BatchRow {
                pool: "replay".into(),
                ..batch()
            },
            replies: &replies,
            candidates: &[cand(0, true, None, true, Some(10), true)],
            phases: &[phase(Phase::Draw, 0.01, 0.01)],
            batch_wall_s: Some(1.0),
        });
        assert!(f.replayed);
        assert_eq!(
            (
                f.completions_per_s,
                f.output_tok_per_s,
                f.admitted_per_draw_minute
            ),
            (None, None, None)
        );
        // What the corpus recorded still counts.
        assert_eq!(f.output_tokens, Some(100));
        assert_eq!(f.admitted_per_1k_output_tokens, Some(10.0));
        assert_eq!(f.latency_ms.unwrap().max, 1000.0);
        let text = Comparison { pools: vec![f] }.render();
        assert!(
            text.lines()
                .any(|l| l.starts_with("completions/s") && l.ends_with("n/a (replay)")),
            "{text}"
        );
    }

    #[test]
    fn a_batch_without_phases_has_no_rates() {
        let f = PoolFigures::new(BatchRows {
            batch: &batch(),
            replies: &[],
            candidates: &[],
            phases: &[],
            batch_wall_s: None,
        });
        assert_eq!(f.completions_per_s, None);
        assert_eq!(f.draw_wall_s, None);
        assert_eq!(f.probe_cpu_s, None);
        assert_eq!(f.output_tokens, None);
        assert_eq!(f.largest_duplicate_group, 0);
        assert_eq!(f.admitted_per_draw_minute, None);
    }
}
