//! End-to-end: the operator views of stored batches (`compare`, `export`,
//! `show`) through the real binary, on batches of the tiny fixture. Every
//! run shares the warm work directory (tests/common).

use crate::common;

use common::{tiny, Scratch};

/// Two batches of the tiny fixture: all six replies, then the first three.
fn two_batches() -> Scratch {
    let scratch = Scratch::new();
    scratch.assay_ok(&["run", &tiny(), "--json"]);
    scratch.assay_ok(&["run", &tiny(), "-n", "3", "--json"]);
    scratch
}

#[test]
fn compare_two_stored_batches() {
    let scratch = two_batches();
    let report = scratch.json(&["compare", "1", "2", "--json", "--svg", "cmp.svg"]);
    let pools = report["pools"].as_array().unwrap();
    assert_eq!(pools.len(), 2);
    for (pool, shown) in pools.iter().zip(["1", "2"]) {
        // The counts agree with the batch's own summary.
        let summary = scratch.json(&["show", shown, "--json"]);
        for key in [
            "replies",
            "extracted",
            "unique",
            "compiled",
            "admitted",
            "best",
        ] {
            assert_eq!(pool[key], summary[key], "batch {shown}: {key}");
        }
        assert_eq!(pool["models"], serde_json::json!(["tiny-model"]));
        // A replay draw times the replay, not a server: no rates.
        assert_eq!(pool["replayed"], true);
        assert!(pool["completions_per_s"].is_null());
        assert!(pool["output_tok_per_s"].is_null());
        // The corpus records 15 completion tokens a reply.
        let replies = pool["replies"].as_u64().unwrap();
        assert_eq!(pool["output_tokens"], replies * 15);
        let admitted = pool["admitted"].as_f64().unwrap();
        let per_1k = pool["admitted_per_1k_output_tokens"].as_f64().unwrap();
        assert!((per_1k - admitted * 1000.0 / (replies * 15) as f64).abs() < 1e-9);
        assert!(pool["probe_cpu_s"].as_f64().unwrap() > 0.0);
        assert!(pool["batch_wall_s"].as_f64().unwrap() >= pool["draw_wall_s"].as_f64().unwrap());
        assert!(
            pool["ttft_ms"].is_null(),
            "the tiny corpus records no timings"
        );
    }
    assert_eq!(pools[0]["replies"], 6);
    assert_eq!(pools[1]["replies"], 3);
    assert_eq!(pools[0]["largest_duplicate_group"], 2);

    let svg = std::fs::read_to_string(scratch.join("cmp.svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
    assert!(svg.contains("batch 1 (replay)") && svg.contains("batch 2 (replay)"));

    let text = scratch.assay_ok(&["compare", "1", "2"]);
    let first = text.lines().next().unwrap();
    // The header names both batches, in order, over their columns (the
    // columns are as wide as their widest value).
    assert_eq!(
        first.split_whitespace().collect::<Vec<_>>(),
        ["batch", "1", "(replay)", "batch", "2", "(replay)"],
        "{text}"
    );
    assert!(
        first.starts_with(' '),
        "no label over the row names: {text}"
    );
    for row in [
        "completions/s",
        "TTFT p50 (ms)",
        "unique (largest dup)",
        "admitted/1k out tok",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(row)),
            "{row} missing:\n{text}"
        );
    }
}

#[test]
fn compare_needs_two_known_batches() {
    let scratch = two_batches();
    let cases: &[(&[&str], &str)] = &[
        (&["compare", "1"], "compare: name at least two batches"),
        (&["compare", "1", "9"], "no batch 9"),
    ];
    for (args, want) in cases {
        let out = scratch.assay(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
}

#[test]
fn export_csv_and_json_agree_with_show() {
    let scratch = two_batches();
    let shown = scratch.json(&["show", "1", "--json"]);
    let candidates = shown["candidates"].as_array().unwrap();

    let text = scratch.assay_ok(&["export", "1", "--format", "csv"]);
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header = reader.headers().unwrap().clone();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(records.len(), candidates.len());
    for (record, cand) in records.iter().zip(candidates) {
        assert_eq!(
            record[col("candidate_id")],
            cand["candidate_id"].to_string()
        );
        assert_eq!(&record[col("extract")], cand["extract"].as_str().unwrap());
        assert_eq!(&record[col("probe")], cand["probe"].as_str().unwrap_or(""));
        assert_eq!(&record[col("score")], cand["score"].as_str().unwrap_or(""));
        assert_eq!(&record[col("completion_tokens")], "15");
        // Unknown timings are empty cells, never zero.
        assert_eq!(&record[col("latency_ms")], "");
    }

    let export = scratch.json(&["export", "1", "--format", "json"]);
    assert_eq!(export["summary"]["batch_id"], 1);
    // The summary is show's, whole: one builder serves every command
    // (export once lacked the probe run, resumes and promotions).
    let mut summary = shown.clone();
    let fields = summary.as_object_mut().unwrap();
    fields.remove("figures");
    fields.remove("candidates");
    assert_eq!(export["summary"], summary);
    assert!(shown["probe_run"].is_object(), "{shown:#}");
    assert_eq!(export["figures"]["replies"], 6);
    let rows = export["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 6);
    assert!(rows[0]["content"].as_str().unwrap().contains("fn double"));
    assert!(rows[0]["source"].as_str().unwrap().contains("fn double"));

    let out = scratch.assay(&["export", "1", "--format", "xml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("json or csv"));
}

#[test]
fn show_adds_the_draw_figures() {
    let scratch = two_batches();
    let shown = scratch.json(&["show", "2", "--json"]);
    assert_eq!(shown["figures"]["batch_id"], 2);
    assert_eq!(shown["figures"]["output_tokens"], 45);
    let text = scratch.assay_ok(&["show", "2"]);
    assert!(
        text.lines().any(|l| {
            l.starts_with(
            "draw: n/a (replay) completions/s  n/a (replay) output tok/s  TTFT mean/p50/max unknown"
        )
        }),
        "{text}"
    );
}

/// Issue 36: the compiler errors come back from the store, not from the
/// disk of the machine that built the batch: `show --errors` prints each
/// error file's text, and still does once the files are gone.
#[test]
fn show_errors_prints_the_error_files_from_the_store() {
    let scratch = Scratch::new();
    let run = scratch.json(&["run", &tiny(), "--json"]);
    let files: Vec<(u64, String)> = run["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| {
            let file = c["error_file"].as_str()?;
            Some((
                c["candidate_id"].as_u64()?,
                std::fs::read_to_string(file).unwrap(),
            ))
        })
        .collect();
    assert!(
        !files.is_empty(),
        "the tiny corpus has a candidate that does not build"
    );
    let joined = |files: &[(u64, String)]| {
        files
            .iter()
            .map(|(_, text)| format!("{}\n", text.trim_end_matches('\n')))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let dir = run["errors_dir"].as_str().unwrap();
    std::fs::remove_dir_all(dir).unwrap();

    assert_eq!(scratch.assay_ok(&["show", "1", "--errors"]), joined(&files));
    let (first, text) = &files[0];
    let one = first.to_string();
    assert_eq!(
        scratch.assay_ok(&["show", "1", "--errors", &one]),
        joined(&files[..1])
    );
    let units = scratch.json(&["show", "1", "--errors", &one, "--json"]);
    assert_eq!(
        format!(
            "{}: {}\n\n{}",
            units[0]["unit"].as_str().unwrap(),
            units[0]["verdict"].as_str().unwrap(),
            units[0]["diagnostics"].as_str().unwrap()
        ),
        *text
    );
    // A candidate that built has none (said on stderr); one the batch does
    // not hold is refused.
    let built = run["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["probe"] == "compiled")
        .unwrap()["candidate_id"]
        .to_string();
    let out = scratch.assay(&["show", "1", "--errors", &built]);
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no compiler errors"));
    let out = scratch.assay(&["show", "1", "--errors", "99"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("batch 1 has no candidate 99"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
