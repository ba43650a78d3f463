//! End-to-end: dedup by the alpha-renamed fingerprint, per-case isolation,
//! admission and promotion, through the real binary. Tasks are variants of
//! the tiny fixture and the bundled `absolute` task written into temporary
//! directories; all runs share the warm work directory (tests/common).

use crate::common;

use std::path::{Path, PathBuf};

use serde_json::Value;

use common::{repo, Scratch};

/// Writes a spec into the scratch directory's `name/` whose files are those
/// of `source` (by absolute path), with `edit` applied to the source spec's
/// text.
fn task_variant(
    scratch: &Scratch,
    source: &Path,
    name: &str,
    edit: impl Fn(String) -> String,
) -> PathBuf {
    let text = std::fs::read_to_string(source.join("spec.toml")).unwrap();
    let abs = |key: &str, text: String| -> String {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{key} = ")))
            .unwrap()
            .to_owned();
        let rel = line.split('"').nth(1).unwrap();
        text.replace(
            &line,
            &format!("{key} = \"{}\"", source.join(rel).display()),
        )
    };
    let mut text = text;
    for key in ["prompt", "harness", "cases", "committed", "replay"] {
        text = abs(key, text);
    }
    let dir = scratch.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("spec.toml"), edit(text)).unwrap();
    dir
}

fn candidate(shown: &Value, idx: usize) -> &Value {
    &shown["candidates"][idx]
}

#[test]
fn alpha_dedup_groups_renamed_candidates_and_reports_group_sizes() {
    let scratch = Scratch::new();
    let task = task_variant(&scratch, &repo().join("specs/absolute"), "absolute", |t| {
        format!("{t}\n[dedup]\nby = \"alpha\"\n")
    });
    let summary = scratch.json(&["run", &task.display().to_string(), "--json"]);
    assert_eq!(summary["dedup_by"], "alpha");
    // The groups the corpus was built with (tests/expected/absolute.jsonl):
    // exact duplicates 6, 38 of 0; 14, 42 of 2; 23 of 10; alpha-renamed 19
    // of 0 and 33 of 5.
    let groups = |key: &str| -> Vec<(u64, u64)> {
        summary[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                (
                    g["candidate_id"].as_u64().unwrap(),
                    g["size"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(groups("groups"), [(0, 4), (2, 3), (5, 2), (10, 2)]);
    assert_eq!(groups("other_groups"), [(0, 3), (2, 3), (10, 2)]);
    let shown = scratch.json(&["show", "1", "--json"]);
    for (idx, rep) in [(19, 0), (33, 5), (6, 0)] {
        let c = candidate(&shown, idx);
        assert_eq!(c["dup_of"], rep, "candidate {idx}: {c}");
        assert!(c["probe"].is_null(), "a duplicate is never probed: {c}");
        assert!(c["score"].is_null(), "a duplicate is never scored: {c}");
    }
    // 7 unique by the exact fingerprint, two fewer by the alpha one.
    let expected_unique = 37 - 5 - 2;
    assert_eq!(summary["unique"], expected_unique);
    let text = String::from_utf8(scratch.assay(&["show", "1"]).stdout).unwrap();
    assert!(
        text.contains(
            "duplicate groups (alpha): c0 x4, c2 x3, c5 x2, c10 x2   (exact: c0 x3, c2 x3, c10 x2)"
        ),
        "{text}"
    );
}

#[test]
fn per_case_isolation_fails_a_looping_case_alone() {
    let scratch = Scratch::new();
    let task = task_variant(&scratch, &repo().join("tests/fixtures/tiny"), "tiny", |t| {
        t.replace(
            "wall_ms = 2000",
            "wall_ms = 2000\nisolation = \"per_case\"\ncase_wall_ms = 1000",
        )
    });
    scratch.json(&["run", &task.display().to_string(), "--json"]);
    let shown = scratch.json(&["show", "1", "--json"]);
    // Candidate 3 loops on input 3: without isolation `timeout(after 3/10)`
    // (tests/fixtures/tiny/expected.jsonl); with it, only case 3 fails.
    let looping = candidate(&shown, 3);
    assert_eq!(looping["score"], "scored(9/10)", "{looping}");
    assert_eq!(looping["cases"], "ppptpppppp");
    assert_eq!(looping["restarts"], 1);
    // A panic never needed a restart.
    let panicking = candidate(&shown, 4);
    assert_eq!(panicking["score"], "scored(5/10)");
    assert_eq!(panicking["cases"], "pxpxpxpxpx");
    assert_eq!(panicking["restarts"], 0);
    // CPU time is measured for every run, and the admitted are ranked.
    for idx in [0, 3, 4] {
        assert!(candidate(&shown, idx)["cpu_ms"].as_f64().unwrap() > 0.0);
    }
    assert_eq!(candidate(&shown, 0)["rank"], 1);
    assert_eq!(candidate(&shown, 3)["rank"], 2);
    assert_eq!(candidate(&shown, 4)["admission"], "below_min_score");
}

#[test]
fn guard_cases_refuse_a_regression_the_score_would_admit() {
    let scratch = Scratch::new();
    let dir = scratch.path().join("guarded");
    std::fs::create_dir_all(&dir).unwrap();
    // The committed candidate passes every case; candidate 3 of the tiny
    // corpus loops on input 3, so with isolation it scores 9/10, above
    // min_score 0.8, but case "three" guards.
    let tiny = repo().join("tests/fixtures/tiny");
    let cases: String = std::fs::read_to_string(tiny.join("cases.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            let name = format!("in{}", v["input"]);
            v["name"] = Value::String(name);
            format!("{v}\n")
        })
        .collect();
    std::fs::write(dir.join("cases.jsonl"), cases).unwrap();
    std::fs::write(
        dir.join("committed.rs"),
        "pub fn double(x: u64) -> u64 {\n    x * 2\n}\n",
    )
    .unwrap();
    let task = task_variant(&scratch, &tiny, "guarded-src", |t| {
        t.replace("min_score = 0.9", "min_score = 0.8\nguard = [\"in3\"]")
            .replace(
                "wall_ms = 2000",
                "wall_ms = 2000\nisolation = \"per_case\"\ncase_wall_ms = 1000",
            )
            .replace(
                &format!("cases = \"{}\"", tiny.join("cases.jsonl").display()),
                &format!("cases = \"{}\"", dir.join("cases.jsonl").display()),
            )
            .replace(
                &format!("committed = \"{}\"", tiny.join("committed.rs").display()),
                &format!("committed = \"{}\"", dir.join("committed.rs").display()),
            )
    });
    scratch.json(&["run", &task.display().to_string(), "--json"]);
    let shown = scratch.json(&["show", "1", "--json"]);
    assert_eq!(candidate(&shown, 3)["score"], "scored(9/10)");
    assert_eq!(candidate(&shown, 3)["admission"], "regressed(3)");
    assert_eq!(candidate(&shown, 0)["admission"], "admitted(rank 1)");
}

#[test]
fn promotion_replaces_the_committed_file_only_when_beaten_in_the_same_run() {
    let scratch = Scratch::new();
    let task = scratch.path().join("tiny");
    let tiny = repo().join("tests/fixtures/tiny");
    std::fs::create_dir_all(&task).unwrap();
    for file in [
        "spec.toml",
        "prompt.md",
        "cases.jsonl",
        "committed.rs",
        "replies.jsonl",
    ] {
        std::fs::copy(tiny.join(file), task.join(file)).unwrap();
    }
    // The harness stays where it is (by absolute path): only the committed
    // file is the promotion's to write.
    let spec = std::fs::read_to_string(task.join("spec.toml"))
        .unwrap()
        .replace(
            "harness = \"harness\"",
            &format!("harness = \"{}\"", tiny.join("harness").display()),
        );
    std::fs::write(task.join("spec.toml"), spec).unwrap();
    let task_arg = task.display().to_string();
    let committed_before = std::fs::read_to_string(task.join("committed.rs")).unwrap();

    // Batch 1: candidate 0 (10/10) beats the committed 8/10 and is promoted.
    let summary = scratch.json(&["run", &task_arg, "--promote", "--json"]);
    let promotions = summary["promotions"].as_array().unwrap();
    assert_eq!(promotions.len(), 1, "{summary}");
    assert_eq!(promotions[0]["candidate_id"], 0);
    assert_eq!(promotions[0]["reference_passed"], 8);
    let promoted = std::fs::read_to_string(task.join("committed.rs")).unwrap();
    assert!(
        promoted.starts_with("// Promoted by assay on "),
        "{promoted}"
    );
    for part in [
        "batch 1, candidate 0, pool replay, model tiny-model",
        "Score 10/10",
        "scored 8/10",
    ] {
        assert!(promoted.contains(part), "{promoted} lacks {part}");
    }
    assert!(promoted.contains("pub fn double(x: u64) -> u64 { x * 2 }"));
    assert_ne!(promoted, committed_before);

    // Batch 1 again: its reference is no longer the committed file.
    let out = scratch.assay(&["promote", "1", "0", "--yes"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("changed since batch 1"), "{err}");

    // Batch 2: the reference now passes 10/10; nothing beats it, nothing moves.
    let summary = scratch.json(&["run", &task_arg, "--promote", "--json"]);
    assert!(summary["promotions"].as_array().unwrap().is_empty());
    assert_eq!(
        std::fs::read_to_string(task.join("committed.rs")).unwrap(),
        promoted
    );
    for (args, want) in [
        (
            ["promote", "2", "0"],
            "does not beat the committed candidate's 10/10",
        ),
        (["promote", "2", "4"], "was not admitted (below_min_score)"),
        (["promote", "2", "1"], "a duplicate"),
        (["promote", "2", "99"], "no candidate 99"),
    ] {
        let out = scratch.assay(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    assert_eq!(
        std::fs::read_to_string(task.join("committed.rs")).unwrap(),
        promoted
    );
    // The promotion is recorded with batch 1.
    let shown = scratch.json(&["show", "1", "--json"]);
    assert_eq!(shown["promotions"][0]["candidate_id"], 0);
}

/// Seven right answers to the tiny task, in reply order: the first spins
/// some 60 ms of CPU (far beyond a run's noise, docs/reports.md), the other
/// six cost the same to the noise and differ in their source's length.
const TIED: [&str; 7] = [
    "pub fn double(x: u64) -> u64 {\n    let mut spin = 0u64;\n    for i in 0..20_000_000u64 {\n        spin = std::hint::black_box(spin.wrapping_add(i));\n    }\n    std::hint::black_box(spin);\n    x * 2\n}\n",
    "pub fn double(x: u64) -> u64 { x.wrapping_mul(2) }\n",
    "pub fn double(x: u64) -> u64 { x + x }\n",
    "pub fn double(x: u64) -> u64 { 2 * x }\n",
    "pub fn double(x: u64) -> u64 { x << 1 }\n",
    "pub fn double(x: u64) -> u64 {\n    let doubled = x * 2;\n    doubled\n}\n",
    "pub fn double(x: u64) -> u64 { x * 2 }\n",
];

/// Issue 30: candidates that tie on score were ranked by the CPU time of
/// their scoring runs, a few milliseconds apart, so three runs of one batch
/// ranked three candidates first, and `--promote` wrote whichever. Now the
/// same batch scored twice ranks every candidate the same: the equally
/// cheap by source length, then index; the one far costlier last, although
/// it comes first. `show`'s table has the rank.
#[test]
fn issue_30_the_same_batch_scored_twice_ranks_the_same_candidate_first() {
    let scratch = Scratch::new();
    let tiny = repo().join("tests/fixtures/tiny");
    let replies: String = TIED
        .iter()
        .map(|source| {
            let reply = serde_json::json!({
                "content": format!("```rust\n{source}```"),
                "finish_reason": "stop",
                "usage": {"prompt_tokens": 20, "completion_tokens": 15},
                "model": "tiny-model",
            });
            format!("{reply}\n")
        })
        .collect();
    let replies = scratch.write("tied.jsonl", &replies);
    let task = task_variant(&scratch, &tiny, "tied", |t| {
        t.replace("n = 6", &format!("n = {}", TIED.len())).replace(
            &format!("replay = \"{}\"", tiny.join("replies.jsonl").display()),
            &format!("replay = \"{}\"", replies.display()),
        )
    });
    let task = task.display().to_string();
    // Candidate i's rank: 2, 3 and 6 (the shortest, as long as each other:
    // by index), 4, 1, 5, then 0.
    let want = [7, 5, 1, 2, 4, 6, 3];
    for batch in [1, 2] {
        let summary = scratch.json(&["run", &task, "--json"]);
        assert_eq!(summary["batch_id"], batch);
        assert_eq!(summary["top_admitted"], 2, "batch {batch}");
        let shown = scratch.json(&["show", &batch.to_string(), "--json"]);
        let ranks: Vec<Value> = shown["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["rank"].clone())
            .collect();
        let cpu: Vec<&Value> = (0..TIED.len())
            .map(|i| &candidate(&shown, i)["cpu_ms"])
            .collect();
        assert_eq!(ranks, want, "batch {batch}, CPU ms {cpu:?}");
        assert_eq!(candidate(&shown, 2)["admission"], "admitted(rank 1)");
    }
    let table = scratch.assay_ok(&["show", "2"]);
    let mut lines = table.lines().skip_while(|l| !l.starts_with("cand"));
    let header = lines.next().expect("the candidate table");
    let end = header.find("rank").unwrap() + "rank".len();
    let shown_ranks: Vec<&str> = lines
        .map(|l| l[..end].split_whitespace().last().unwrap())
        .collect();
    let want: Vec<String> = want.iter().map(ToString::to_string).collect();
    assert_eq!(shown_ranks, want, "{table}");
}

/// The duplicate groups the bundled corpora were built with, as their
/// expected files name them (`dup_of` exact, `alpha_dup_of` alpha-only),
/// against the group sizes a default (exact) batch reports for both.
#[test]
fn bundled_corpora_report_the_groups_they_were_built_with() {
    for task in ["absolute", "shellwords"] {
        let expected: Vec<Value> =
            std::fs::read_to_string(repo().join(format!("tests/expected/{task}.jsonl")))
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
        let idx = |v: &Value| v.as_u64().map(|n| n as usize);
        let extracted: Vec<&Value> = expected
            .iter()
            .filter(|e| e["extract"] == "extracted")
            .collect();
        let sizes = |root: &dyn Fn(&Value) -> usize| -> Vec<(u64, u64)> {
            let mut count = std::collections::BTreeMap::<usize, u64>::new();
            for e in &extracted {
                *count.entry(root(e)).or_default() += 1;
            }
            let mut groups: Vec<(u64, u64)> = count
                .into_iter()
                .filter(|(_, n)| *n > 1)
                .map(|(r, n)| (r as u64, n))
                .collect();
            groups.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            groups
        };
        let exact_root = |e: &Value| idx(&e["dup_of"]).unwrap_or(idx(&e["idx"]).unwrap());
        let alpha_root = |e: &Value| {
            let r = exact_root(e);
            idx(&expected[r]["alpha_dup_of"]).unwrap_or(r)
        };
        let want_exact = sizes(&exact_root);
        let want_alpha = sizes(&alpha_root);
        assert_ne!(
            want_exact, want_alpha,
            "{task}: the corpus has alpha-only groups"
        );

        let scratch = Scratch::new();
        let spec = repo().join("specs").join(task).display().to_string();
        let summary = scratch.json(&["run", &spec, "--json"]);
        let got = |key: &str| -> Vec<(u64, u64)> {
            summary[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| {
                    (
                        g["candidate_id"].as_u64().unwrap(),
                        g["size"].as_u64().unwrap(),
                    )
                })
                .collect()
        };
        assert_eq!(summary["dedup_by"], "exact");
        assert_eq!(got("groups"), want_exact, "{task}: exact groups");
        assert_eq!(got("other_groups"), want_alpha, "{task}: alpha groups");
    }
}
