//! Export: a stored batch as data for other tools (`assay export`).
//!
//! One row per reply: what the server sent and what every stage made of it.
//! JSON carries everything, texts included; CSV carries the figures and
//! verdicts only (one line a reply, ready for a spreadsheet), and an empty
//! cell means unknown or not applicable, never zero. Pure: returns strings.

use anyhow::{Context, Result};
use clap::ValueEnum;
use serde::Serialize;
use strum::{Display, EnumString};

use crate::draw::Drawn;
use crate::report::batch::Summary;
use crate::report::compare::PoolFigures;
use crate::store::{CandidateRow, Lineage};
use crate::text::extract::Extraction;

/// The export formats (`export --format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Display, EnumString, ValueEnum)]
#[strum(
    serialize_all = "lowercase",
    parse_err_ty = String,
    parse_err_fn = not_a_format
)]
pub enum Format {
    /// One JSON document holding everything, the texts included.
    Json,
    /// One row per reply (per completion for a suite): the figures and
    /// verdicts, no texts.
    Csv,
}

fn not_a_format(s: &str) -> String {
    format!("unknown format `{s}` (json or csv)")
}

/// One reply with its candidate's verdicts; the CSV columns, in order.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub candidate_id: usize,
    pub pool: String,
    pub model: Option<String>,
    /// `ok`, `http_error(500)`, `timeout`, ...
    pub outcome: String,
    /// The engine's sentence when the request failed.
    pub error_message: Option<String>,
    pub finish_reason: Option<String>,
    pub hit_cap: bool,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub chunks: Option<u64>,
    pub ttft_ms: Option<f64>,
    pub latency_ms: Option<f64>,
    pub extract: Option<String>,
    pub extract_detail: Option<String>,
    pub fingerprint: Option<String>,
    /// The representative under the batch's dedup fingerprint.
    pub dup_of: Option<usize>,
    pub alpha_fingerprint: Option<String>,
    /// The first earlier candidate with the same exact / alpha fingerprint,
    /// whichever fingerprint the batch deduplicated by.
    pub exact_dup_of: Option<usize>,
    pub alpha_dup_of: Option<usize>,
    pub probe: Option<String>,
    pub error_file: Option<String>,
    pub score: Option<String>,
    pub passed: Option<usize>,
    pub total: Option<usize>,
    pub score_wall_ms: Option<f64>,
    pub admitted: bool,
    /// Admission's decision (`admitted(rank 1)`, `below_min_score`, ...).
    pub admission: Option<String>,
    /// Rank among the admitted, 1 the best.
    pub rank: Option<usize>,
    /// The repair round the reply was drawn in (0: the first draw); empty
    /// for a batch without repair rounds. Last, so that the columns before
    /// keep their places.
    pub round: Option<u32>,
    /// The candidate it repairs; empty in round 0.
    pub parent: Option<usize>,
}

/// A row with the texts, for JSON.
#[derive(Debug, Clone, Serialize)]
pub struct FullRow {
    #[serde(flatten)]
    pub row: Row,
    pub content: Option<String>,
    pub reasoning: Option<String>,
    /// The extracted candidate source.
    pub source: Option<String>,
}

/// The whole JSON export of a batch.
#[derive(Debug, Clone, Serialize)]
pub struct Export {
    pub summary: Summary,
    pub figures: PoolFigures,
    pub rows: Vec<FullRow>,
}

/// Joins replies, candidates and, for a batch with repair rounds, each
/// reply's round and parent (`lineage`) by index. A reply without a
/// candidate row (a batch stopped after the draw) keeps empty verdicts.
pub fn rows(
    replies: &[Drawn],
    candidates: &[CandidateRow],
    lineage: Option<&[Lineage]>,
) -> Vec<FullRow> {
    replies
        .iter()
        .map(|d| {
            let r = &d.reply;
            let c = candidates.iter().find(|c| c.idx == d.idx);
            let line = lineage.and_then(|l| l.iter().find(|l| l.idx == d.idx));
            let score = c.and_then(|c| c.score.as_ref());
            FullRow {
                row: Row {
                    candidate_id: d.idx,
                    pool: d.pool.clone(),
                    model: r.model.clone(),
                    outcome: r.outcome.to_string(),
                    error_message: r.error.as_ref().map(|e| e.message.clone()),
                    finish_reason: r.finish_reason.clone(),
                    hit_cap: r.hit_cap,
                    prompt_tokens: r.prompt_tokens,
                    completion_tokens: r.completion_tokens,
                    chunks: r.chunks,
                    ttft_ms: r.ttft_ms,
                    latency_ms: r.latency_ms,
                    extract: c.map(|c| c.extraction.kind().to_owned()),
                    extract_detail: c.and_then(|c| match &c.extraction {
                        Extraction::Failed(why) => why.detail().map(str::to_owned),
                        Extraction::Source(_) => None,
                    }),
                    fingerprint: c.and_then(|c| c.fingerprint.clone()),
                    dup_of: c.and_then(|c| c.dup_of),
                    alpha_fingerprint: c.and_then(|c| c.alpha_fingerprint.clone()),
                    exact_dup_of: c.and_then(|c| c.exact_dup_of),
                    alpha_dup_of: c.and_then(|c| c.alpha_dup_of),
                    probe: c.and_then(|c| c.probe.as_ref().map(ToString::to_string)),
                    error_file: c.and_then(|c| c.error_file.clone()),
                    score: score.map(|s| s.verdict.to_string()),
                    passed: score.map(|s| s.passed),
                    total: score.map(|s| s.total),
                    score_wall_ms: score.map(|s| s.wall.as_secs_f64() * 1e3),
                    admitted: c.is_some_and(|c| c.admitted),
                    admission: c.and_then(|c| c.admission.clone()),
                    rank: c.and_then(|c| c.rank),
                    round: line.map(|l| l.round),
                    parent: line.and_then(|l| l.parent),
                },
                content: r.content.clone(),
                reasoning: r.reasoning.clone(),
                source: c.and_then(|c| match &c.extraction {
                    Extraction::Source(s) => Some(s.clone()),
                    Extraction::Failed(_) => None,
                }),
            }
        })
        .collect()
}

/// The CSV text: a header line, then one line per row.
pub fn csv(rows: &[FullRow]) -> Result<String> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    for r in rows {
        writer.serialize(&r.row).context("cannot write a CSV row")?;
    }
    let bytes = writer.into_inner().context("cannot finish the CSV")?;
    String::from_utf8(bytes).context("the CSV is not UTF-8")
}

/// One completion as `suite export` writes it (the CSV columns, in order).
#[derive(Debug, Clone, Serialize)]
pub struct ExportRow {
    pub problem: String,
    pub completion: usize,
    pub pool: String,
    pub model: Option<String>,
    pub completion_tokens: Option<u64>,
    #[serde(serialize_with = "super::to_the_microsecond")]
    pub ttft_ms: Option<f64>,
    /// The completion whose program this one shares.
    pub dup_of: Option<usize>,
    pub probe: Option<String>,
    /// assay's status and MultiPL-E's.
    pub status: Option<String>,
    pub multiple_status: Option<String>,
    /// How the whole `main` and each case ended (`passed;failed(101)`).
    pub whole: Option<String>,
    pub cases: Option<String>,
    pub cases_passed: Option<usize>,
    pub cases_total: Option<usize>,
    #[serde(serialize_with = "super::to_the_microsecond")]
    pub run_wall_ms: Option<f64>,
    #[serde(serialize_with = "super::to_the_microsecond")]
    pub run_cpu_ms: Option<f64>,
    pub error_file: Option<String>,
    /// The repair round the completion was drawn in (0: the first draw);
    /// empty for a suite without repair rounds. Last, so that the columns
    /// before it keep their places.
    pub round: Option<u32>,
    /// The completion (same problem) it repairs; empty in round 0.
    pub parent: Option<usize>,
}

/// An export row with the texts, for JSON.
#[derive(Debug, Clone, Serialize)]
pub struct FullExportRow {
    #[serde(flatten)]
    pub row: ExportRow,
    pub completion_text: Option<String>,
    pub program: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::draw::Reply;
    use crate::text::extract::NoCode;

    fn reply(idx: usize, tokens: Option<u64>) -> Drawn {
        Drawn {
            idx,
            pool: "p".into(),
            reply: Reply {
                model: Some("m, with a comma".into()),
                content: Some("text\n\"quoted\"".into()),
                finish_reason: Some("stop".into()),
                completion_tokens: tokens,
                ttft_ms: Some(12.5),
                ..Reply::default()
            },
        }
    }

    #[test]
    fn csv_has_a_header_and_empty_cells_for_unknowns() {
        let candidates = vec![CandidateRow {
            idx: 0,
            pool: "p".into(),
            model: None,
            completion_tokens: None,
            extraction: Extraction::Failed(NoCode::Unparsable {
                detail: "line 1: x".into(),
            }),
            fingerprint: None,
            dup_of: None,
            probe: None,
            error_file: None,
            score: None,
            admitted: false,
            alpha_fingerprint: None,
            exact_dup_of: None,
            alpha_dup_of: None,
            rank: None,
            admission: None,
        }];
        let rows = rows(&[reply(0, Some(7)), reply(1, None)], &candidates, None);
        let text = csv(&rows).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "candidate_id,pool,model,outcome,error_message,finish_reason,hit_cap,prompt_tokens,\
             completion_tokens,chunks,ttft_ms,latency_ms,extract,extract_detail,fingerprint,dup_of,\
             alpha_fingerprint,exact_dup_of,alpha_dup_of,probe,error_file,score,\
             passed,total,score_wall_ms,admitted,admission,rank,round,parent"
        );
        assert_eq!(
            lines[1],
            "0,p,\"m, with a comma\",ok,,stop,false,,7,,12.5,,unparsable,line 1: x,,,,,,,,,,,,false,,,,"
        );
        // A reply that never got a candidate row keeps every verdict empty.
        assert_eq!(
            lines[2],
            "1,p,\"m, with a comma\",ok,,stop,false,,,,12.5,,,,,,,,,,,,,,,false,,,,"
        );
        assert_eq!(lines.len(), 3);
        assert_eq!(rows[0].content.as_deref(), Some("text\n\"quoted\""));
    }

    #[test]
    fn a_repaired_batch_s_rows_end_with_round_and_parent() {
        let lineage = [
            Lineage {
                idx: 0,
                round: 0,
                parent: None,
            },
            Lineage {
                idx: 1,
                round: 1,
                parent: Some(0),
            },
        ];
        let rows = rows(&[reply(0, None), reply(1, None)], &[], Some(&lineage));
        let text = csv(&rows).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].ends_with(",rank,round,parent"), "{}", lines[0]);
        assert!(lines[1].ends_with(",false,,,0,"), "{}", lines[1]);
        assert!(lines[2].ends_with(",false,,,1,0"), "{}", lines[2]);
        let json = serde_json::to_value(&rows[1]).unwrap();
        assert_eq!((&json["round"], &json["parent"]), (&1.into(), &0.into()));
    }

    #[test]
    fn formats_parse() {
        assert_eq!("csv".parse(), Ok(Format::Csv));
        assert_eq!("json".parse(), Ok(Format::Json));
        assert!("xml".parse::<Format>().unwrap_err().contains("json or csv"));
    }
}
