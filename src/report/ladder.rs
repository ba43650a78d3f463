//! Ladder: how one pool's throughput and latency change with concurrency.
//!
//! At each level L the draw sends L requests at once (in-flight L) and the
//! figures of that round are computed here. Pure: the caller draws and
//! prints.
//!
//! The ranking figure is the aggregate output tok/s of a round (its output
//! tokens over its draw wall). It is never multiplied by the level again: an
//! aggregate times n ranks how many slots a setup accepts, not how fast it
//! serves them. When no round has usage-counted tokens the ranking falls back
//! to completions/s, and the report says so.

use std::fmt::Write as _;

use serde::Serialize;

use crate::report::compare::num;
use crate::support::table::labelled;

/// What one reply of a round contributes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RoundReply {
    /// The request ended with a reply (not an HTTP error, reset, timeout).
    pub ok: bool,
    /// From the usage block; `None` is unknown.
    pub completion_tokens: Option<u64>,
    pub ttft_ms: Option<f64>,
    pub latency_ms: Option<f64>,
    pub hit_cap: bool,
}

/// The figures of one concurrency level.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelFigures {
    /// Requests in flight at once; also the number of requests sent.
    pub level: usize,
    /// The stored batch of this level.
    pub batch_id: Option<i64>,
    pub replies: usize,
    /// Requests that ended without a reply.
    pub failed: usize,
    pub draw_wall_s: f64,
    /// Replies / draw wall.
    pub completions_per_s: f64,
    /// Sum of the usage blocks; `None` if any reply lacks one.
    pub output_tokens: Option<u64>,
    /// Output tokens / draw wall: the ranking figure.
    pub aggregate_output_tok_per_s: Option<f64>,
    /// Mean over replies of completion tokens / latency: what one stream
    /// sees.
    pub per_stream_tok_per_s: Option<f64>,
    pub ttft_mean_ms: Option<f64>,
    pub latency_mean_ms: Option<f64>,
    pub latency_max_ms: Option<f64>,
    pub hit_cap: usize,
}

/// Which figure ranks the levels: snake_case in JSON, the figure's own
/// name in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
pub enum Ranking {
    #[strum(serialize = "aggregate output tok/s")]
    AggregateOutputTokPerS,
    /// Only when no level has usage-counted tokens.
    #[strum(serialize = "completions/s")]
    CompletionsPerS,
}

/// A whole ladder (`assay ladder --json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ladder {
    pub task: String,
    pub pool: String,
    pub levels: Vec<LevelFigures>,
    pub ranking: Ranking,
    /// The level whose ranking figure is highest (the lowest level on a tie).
    pub peak_level: Option<usize>,
}

impl LevelFigures {
    pub fn new(level: usize, draw_wall_s: f64, replies: &[RoundReply]) -> LevelFigures {
        let ok: Vec<&RoundReply> = replies.iter().filter(|r| r.ok).collect();
        let per_s = |x: f64| {
            if draw_wall_s > 0.0 {
                x / draw_wall_s
            } else {
                0.0
            }
        };
        let output_tokens = (!ok.is_empty() && ok.iter().all(|r| r.completion_tokens.is_some()))
            .then(|| ok.iter().filter_map(|r| r.completion_tokens).sum::<u64>());
        let mean =
            |xs: Vec<f64>| (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64);
        let per_stream: Vec<f64> = ok
            .iter()
            .filter_map(|r| {
                let latency_s = r.latency_ms? / 1e3;
                (latency_s > 0.0).then(|| r.completion_tokens.map(|t| t as f64 / latency_s))?
            })
            .collect();
        LevelFigures {
            level,
            batch_id: None,
            replies: ok.len(),
            failed: replies.len() - ok.len(),
            draw_wall_s,
            completions_per_s: per_s(ok.len() as f64),
            output_tokens,
            aggregate_output_tok_per_s: output_tokens.map(|t| per_s(t as f64)),
            per_stream_tok_per_s: output_tokens.and(mean(per_stream)),
            ttft_mean_ms: mean(ok.iter().filter_map(|r| r.ttft_ms).collect()),
            latency_mean_ms: mean(ok.iter().filter_map(|r| r.latency_ms).collect()),
            latency_max_ms: ok
                .iter()
                .filter_map(|r| r.latency_ms)
                .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x)))),
            hit_cap: ok.iter().filter(|r| r.hit_cap).count(),
        }
    }

    /// This level's value of the ranking figure.
    pub fn ranked_by(&self, ranking: Ranking) -> Option<f64> {
        match ranking {
            Ranking::AggregateOutputTokPerS => self.aggregate_output_tok_per_s,
            Ranking::CompletionsPerS => Some(self.completions_per_s),
        }
    }
}

impl Ranking {
    pub fn as_str(&self) -> &'static str {
        (*self).into()
    }
}

impl Ladder {
    pub fn new(task: &str, pool: &str, levels: Vec<LevelFigures>) -> Ladder {
        let ranking = if levels
            .iter()
            .any(|l| l.aggregate_output_tok_per_s.is_some())
        {
            Ranking::AggregateOutputTokPerS
        } else {
            Ranking::CompletionsPerS
        };
        let mut peak: Option<(&LevelFigures, f64)> = None;
        for level in &levels {
            if let Some(value) = level.ranked_by(ranking) {
                let better = match peak {
                    None => true,
                    Some((best, best_value)) => {
                        value > best_value || (value == best_value && level.level < best.level)
                    }
                };
                if better {
                    peak = Some((level, value));
                }
            }
        }
        Ladder {
            task: task.to_owned(),
            pool: pool.to_owned(),
            peak_level: peak.map(|(l, _)| l.level),
            levels,
            ranking,
        }
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "ladder  task {}  pool {}  ranked by {}",
            self.task,
            self.pool,
            self.ranking.as_str()
        );
        let headings: Vec<String> = self
            .levels
            .iter()
            .map(|l| {
                if Some(l.level) == self.peak_level {
                    format!("{} (peak)", l.level)
                } else {
                    l.level.to_string()
                }
            })
            .collect();
        let col = |f: &dyn Fn(&LevelFigures) -> String| -> Vec<String> {
            self.levels.iter().map(f).collect()
        };
        let rows: Vec<(&str, Vec<String>)> = vec![
            ("replies", col(&|l| l.replies.to_string())),
            ("failed", col(&|l| l.failed.to_string())),
            ("draw wall (s)", col(&|l| format!("{:.2}", l.draw_wall_s))),
            (
                "completions/s",
                col(&|l| format!("{:.2}", l.completions_per_s)),
            ),
            (
                "aggregate out tok/s",
                col(&|l| num(l.aggregate_output_tok_per_s, 1)),
            ),
            ("per-stream tok/s", col(&|l| num(l.per_stream_tok_per_s, 1))),
            ("TTFT mean (ms)", col(&|l| num(l.ttft_mean_ms, 0))),
            ("latency mean (ms)", col(&|l| num(l.latency_mean_ms, 0))),
            ("latency max (ms)", col(&|l| num(l.latency_max_ms, 0))),
            ("hit the cap", col(&|l| l.hit_cap.to_string())),
        ];
        out.push_str(&labelled("concurrency", &headings, &rows));
        out
    }

    /// The chart's points.
    pub fn points(&self) -> Vec<crate::report::plot::LadderPoint> {
        self.levels
            .iter()
            .map(|l| crate::report::plot::LadderPoint {
                level: l.level,
                ranking: l.ranked_by(self.ranking),
                mean_latency_ms: l.latency_mean_ms,
                max_latency_ms: l.latency_max_ms,
            })
            .collect()
    }
}

/// Parses `--levels`: a comma-separated list of concurrency levels, each at
/// least 1.
pub fn parse_levels(text: &str) -> Result<Vec<usize>, String> {
    let levels = text
        .split(',')
        .map(|part| {
            let part = part.trim();
            match part.parse::<usize>() {
                Ok(0) => Err("0 is not a concurrency level (at least 1)".to_owned()),
                Ok(n) => Ok(n),
                Err(_) => Err(format!("`{part}` is not a number")),
            }
        })
        .collect::<Result<Vec<usize>, String>>()?;
    Ok(levels)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(tokens: Option<u64>, latency_ms: f64) -> RoundReply {
        RoundReply {
            ok: true,
            completion_tokens: tokens,
            ttft_ms: Some(latency_ms / 10.0),
            latency_ms: Some(latency_ms),
            hit_cap: false,
        }
    }

    #[test]
    fn a_level_counts_only_replies_and_never_multiplies_by_the_level() {
        let replies = [
            reply(Some(100), 1000.0),
            reply(Some(300), 2000.0),
            RoundReply {
                ok: false,
                ..reply(None, 5.0)
            },
        ];
        let l = LevelFigures::new(3, 2.0, &replies);
        assert_eq!((l.replies, l.failed), (2, 1));
        assert_eq!(l.completions_per_s, 1.0);
        assert_eq!(l.output_tokens, Some(400));
        // 400 tokens over 2 s, whatever the level.
        assert_eq!(l.aggregate_output_tok_per_s, Some(200.0));
        // (100/1 + 300/2) / 2
        assert_eq!(l.per_stream_tok_per_s, Some(125.0));
        assert_eq!(l.latency_mean_ms, Some(1500.0));
        assert_eq!(l.latency_max_ms, Some(2000.0));
        assert_eq!(l.ttft_mean_ms, Some(150.0));
    }

    #[test]
    fn the_peak_is_the_highest_aggregate_and_the_lowest_level_on_a_tie() {
        let level = |level, tok_per_s: f64| {
            LevelFigures::new(level, 1.0, &[reply(Some(tok_per_s as u64), 1000.0)])
        };
        let ladder = Ladder::new(
            "t",
            "p",
            vec![
                level(1, 100.0),
                level(2, 300.0),
                level(4, 300.0),
                level(8, 250.0),
            ],
        );
        assert_eq!(ladder.ranking, Ranking::AggregateOutputTokPerS);
        assert_eq!(ladder.peak_level, Some(2));
        let text = ladder.render();
        assert!(text.lines().nth(1).unwrap().contains("2 (peak)"), "{text}");
    }

    #[test]
    fn without_usage_the_ladder_ranks_by_completions() {
        let level = |level: usize, wall: f64| {
            LevelFigures::new(level, wall, &vec![reply(None, 1000.0); level])
        };
        let ladder = Ladder::new("t", "p", vec![level(1, 1.0), level(4, 1.0), level(8, 4.0)]);
        assert_eq!(ladder.ranking, Ranking::CompletionsPerS);
        assert_eq!(ladder.peak_level, Some(4));
        assert!(ladder
            .levels
            .iter()
            .all(|l| l.aggregate_output_tok_per_s.is_none()));
        assert!(ladder.render().contains("ranked by completions/s"));
    }

    #[test]
    fn levels_parse_and_refuse_zero() {
        assert_eq!(parse_levels("1,2,4,8,16,32"), Ok(vec![1, 2, 4, 8, 16, 32]));
        assert_eq!(parse_levels(" 3 , 5"), Ok(vec![3, 5]));
        assert!(parse_levels("1,0")
            .unwrap_err()
            .contains("0 is not a concurrency level"));
        assert!(parse_levels("1,x")
            .unwrap_err()
            .contains("`x` is not a number"));
    }
}
