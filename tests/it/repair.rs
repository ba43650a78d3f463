//! Repair rounds (issue 28) end to end: the real binary against the test
//! gateway's scripted model, which answers a repair prompt carrying a given
//! compiler error or failed case with fixed code and anything else with
//! broken code, and records every request body.

use crate::common;

use std::path::{Path, PathBuf};

use assay_gateway::{Dialect, Model};
use serde_json::Value;

use common::scripted::{asked, pools_file, reply, serve, FIXER};
use common::{repo, Scratch};

/// The tiny task's first draw: one reply that does not compile, one that
/// compiles and fails cases (`x + 1` passes only `1 -> 2`).
const BROKEN_COMPILE: &str = "```rust\npub fn double(x: u64) -> u64 { x + \"a\" }\n```";
const BROKEN_CASES: &str = "```rust\npub fn double(x: u64) -> u64 { x + 1 }\n```";
/// Their repairs, each only when the prompt carries its parent's failure.
const FIXED_COMPILE: &str = "```rust\npub fn double(x: u64) -> u64 { x * 2 }\n```";
const FIXED_CASES: &str = "```rust\npub fn double(x: u64) -> u64 { x << 1 }\n```";
/// What rustc says of `x + "a"`, and what the prompt shows of the failed
/// visible case `0 -> 0`.
const COMPILE_ERROR: &str = "cannot add `&str` to `u64`";
const FAILED_CASE: &str = "expected: 0";

/// The scripted model: broken code in turn, fixed code for a prompt that
/// carries the failure.
fn scripted() -> Model {
    Model::new(
        Dialect::LlamaCpp,
        vec![reply(BROKEN_COMPILE), reply(BROKEN_CASES)],
    )
    .answer_when(COMPILE_ERROR, reply(FIXED_COMPILE))
    .answer_when(FAILED_CASE, reply(FIXED_CASES))
}

/// The tiny task with its first three cases visible.
fn tiny_with_visible(s: &Scratch) -> PathBuf {
    let task = s.tiny_copy();
    let spec = task.join("spec.toml");
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(&spec, format!("{text}\n[repair]\nvisible = 3\n")).unwrap();
    task
}

/// `assay run TASK --json` drawing from the pool [`FIXER`] of `pools`,
/// with `extra`; it must succeed. Returns its summary.
fn run_fixer(s: &Scratch, task: &Path, pools: &Path, extra: &[&str]) -> Value {
    let (task, pools) = (task.display().to_string(), pools.display().to_string());
    let mut args = vec!["run", &task, "--json", "--pools", &pools, "--pool", FIXER];
    args.extend_from_slice(extra);
    s.json(&args)
}

/// Each stored reply: index, round, parent, content, cases passed (`None`:
/// not scored), in index order.
type ReplyRow = (i64, i64, Option<i64>, Option<String>, Option<i64>);

fn replies(s: &Scratch, batch: i64) -> Vec<ReplyRow> {
    s.sql(async |pool| {
        sqlx::query_as(
            "SELECT r.idx, r.round, r.parent, r.content, sc.passed FROM replies r
             LEFT JOIN scores sc ON sc.batch_id = r.batch_id AND sc.idx = r.idx
             WHERE r.batch_id = ? ORDER BY r.idx",
        )
        .bind(batch)
        .fetch_all(pool)
        .await
        .unwrap()
    })
}

/// Each round: number, replies, why the rounds stopped there.
fn rounds(s: &Scratch, batch: i64) -> Vec<(i64, i64, Option<String>)> {
    s.sql(async |pool| {
        sqlx::query_as(
            "SELECT round, n, stopped FROM repair_rounds WHERE batch_id = ? ORDER BY round",
        )
        .bind(batch)
        .fetch_all(pool)
        .await
        .unwrap()
    })
}

/// The wrong answers the scorer kept: candidate, case position, answer.
fn kept_answers(s: &Scratch, batch: i64) -> Vec<(i64, i64, String)> {
    s.sql(async |pool| {
        sqlx::query_as(
            "SELECT idx, case_pos, output FROM case_outputs WHERE batch_id = ? ORDER BY idx, case_pos",
        )
        .bind(batch)
        .fetch_all(pool)
        .await
        .unwrap()
    })
}

fn content(code: &str) -> Option<String> {
    Some(code.to_owned())
}

/// Round 0 has no passing candidate; round 1 repairs both failures from
/// their feedback (the scripted model answers the compiler error and the
/// failed visible case with fixed code), each reply names the parent it
/// repairs, and the batch stops at the first pass although two rounds were
/// asked for.
#[test]
fn a_repair_round_fixes_what_round_0_broke_and_stops_at_the_first_pass() {
    let gw = serve(scripted());
    let s = Scratch::new();
    let task = tiny_with_visible(&s);
    let pools = pools_file(&s, &gw);
    let summary = run_fixer(&s, &task, &pools, &["-n", "2", "--rounds", "2"]);
    assert_eq!(summary["status"], "finished", "{summary}");
    let batch = summary["batch_id"].as_i64().unwrap();
    assert_eq!(
        replies(&s, batch),
        [
            (0, 0, None, content(BROKEN_COMPILE), None),
            (1, 0, None, content(BROKEN_CASES), Some(1)),
            // The best failing first, then the compile failure.
            (2, 1, Some(1), content(FIXED_CASES), Some(10)),
            (3, 1, Some(0), content(FIXED_COMPILE), Some(10)),
        ]
    );
    assert_eq!(
        rounds(&s, batch),
        [(0, 2, None), (1, 2, Some("all_pass".to_owned()))]
    );
    let served: Vec<Option<String>> = gw.served().iter().map(|g| g.rule.clone()).collect();
    assert_eq!(
        served,
        [
            None,
            None,
            Some(FAILED_CASE.to_owned()),
            Some(COMPILE_ERROR.to_owned())
        ]
    );
    // Hidden cases (inputs 3 to 9) never reach the model; the visible
    // ones the parent failed do.
    let prompts = asked(&gw);
    // Each with what `x + 1` answered: the scorer keeps the wrong answers
    // of failed visible cases, and of no hidden one.
    assert!(
        prompts[2].contains("input: 0\n  expected: 0\n  got: 1\n")
            && prompts[2].contains("input: 2\n  expected: 4\n  got: 3\n"),
        "{}",
        prompts[2]
    );
    assert_eq!(
        kept_answers(&s, batch),
        [(1, 0, "1".to_owned()), (1, 2, "3".to_owned())]
    );
    for prompt in &prompts {
        for hidden in 3..10 {
            assert!(
                !prompt.contains(&format!("input: {hidden}")),
                "case {hidden} is hidden: {prompt}"
            );
        }
    }
    // `show` gives each round's figures.
    let shown = s.assay_ok(&["show", &batch.to_string()]);
    eprintln!("{}\n{shown}\n{}", prompts[3], prompts[2]);
    assert!(shown.contains("rounds stopped: all_pass"), "{shown}");
    // The batch's probe run sums both rounds' probes (each probed in a
    // wave and a build of its own at least), and says so.
    assert!(shown.contains("probe (rounds 0, 1 summed): "), "{shown}");
    let json = s.json(&["show", &batch.to_string(), "--json"]);
    assert_eq!(json["probe_rounds"], serde_json::json!([0, 1]), "{json}");
    let run = &json["probe_run"];
    assert!(run["waves"].as_u64().unwrap() >= 2, "{run}");
    assert!(run["builds"].as_u64().unwrap() >= 2, "{run}");
    assert_eq!(run["probed"], 4, "{run}");
    // The export's rows carry each reply's round and parent.
    let exported = s.json(&["export", &batch.to_string(), "--format", "json"]);
    let lineage: Vec<(Value, Value)> = exported["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["round"].clone(), r["parent"].clone()))
        .collect();
    let null = Value::Null;
    assert_eq!(
        lineage,
        [
            (0.into(), null.clone()),
            (0.into(), null),
            (1.into(), 1.into()),
            (1.into(), 0.into())
        ]
    );
    // Resampling as many replies draws broken code only: at equal output
    // tokens the repair run is ahead.
    let resample = run_fixer(&s, &task, &pools, &["-n", "4"]);
    let other = resample["batch_id"].as_i64().unwrap().to_string();
    let exported = s.json(&["export", &other, "--format", "json"]);
    assert!(
        exported["rows"][0]["round"].is_null(),
        "no rounds: {exported}"
    );
    let compared = s.json(&["compare", &batch.to_string(), &other, "--json"]);
    let runs = &compared["budget"]["runs"];
    assert_eq!(runs[0]["kind"], "repair, 1 round");
    assert_eq!(runs[1]["kind"], "resample");
    assert_eq!(
        (runs[0]["best"].as_f64(), runs[1]["best"].as_f64()),
        (Some(1.0), Some(0.1))
    );
    eprintln!("{}", s.assay_ok(&["compare", &batch.to_string(), &other]));
}

/// A batch killed in the middle of its repair round resumes in that round,
/// asks only for the replies it lacks, and ends as an uninterrupted one.
#[test]
fn a_batch_killed_mid_round_resumes_in_that_round_and_ends_the_same() {
    let reference = {
        let gw = serve(scripted());
        let s = Scratch::new();
        let task = tiny_with_visible(&s);
        let pools = pools_file(&s, &gw);
        let summary = run_fixer(&s, &task, &pools, &["-n", "2", "--rounds", "2"]);
        let batch = summary["batch_id"].as_i64().unwrap();
        (replies(&s, batch), rounds(&s, batch))
    };
    let gw = serve(scripted());
    let s = Scratch::new();
    let task = tiny_with_visible(&s);
    let pools = pools_file(&s, &gw);
    let (task, pools) = (task.display().to_string(), pools.display().to_string());
    // The third reply stored is round 1's first.
    s.start_at(
        "pause@draw.reply#3",
        &[
            "run", &task, "-n", "2", "--pools", &pools, "--pool", FIXER, "--rounds", "2",
        ],
    )
    .kill9();
    let stored = replies(&s, 1);
    assert_eq!(stored.len(), 3, "{stored:?}");
    assert_eq!(rounds(&s, 1).len(), 2);
    let summary = s.json(&[
        "run", "--resume", "1", "--json", "--pools", &pools, "--pool", FIXER,
    ]);
    assert_eq!(summary["status"], "finished", "{summary}");
    assert_eq!((replies(&s, 1), rounds(&s, 1)), reference);
    // Nothing stored was asked again: the first draw's two replies and
    // round 1's first (its parent's failed case) were asked once each.
    // Round 1's second may have been in flight at the kill, and is asked
    // again.
    let asked = asked(&gw);
    let first_draw = asked
        .iter()
        .filter(|p| !p.contains(FAILED_CASE) && !p.contains(COMPILE_ERROR))
        .count();
    let stored_repair = asked.iter().filter(|p| p.contains(FAILED_CASE)).count();
    assert_eq!((first_draw, stored_repair), (2, 1), "{asked:#?}");
}

/// The bundled tasks' hidden cases never leave: a round of repairs of a
/// broken and a failing candidate, where every request the gateway
/// received is searched for each hidden case's input and expected output.
#[test]
fn hidden_cases_of_the_bundled_tasks_never_reach_a_model() {
    for task in ["absolute", "shellwords"] {
        hidden_cases_stay_hidden(&repo().join("specs").join(task));
    }
}

fn hidden_cases_stay_hidden(task: &Path) {
    let spec = assay::spec::Spec::load(task).unwrap();
    let visible = &spec.repair.visible;
    assert!(!visible.is_empty(), "{}: no visible split", task.display());
    let committed = &spec.committed.source;
    // A copy that does not compile, and one that panics on every case.
    let broken = format!("{committed}\nfn broken() -> u32 {{ \"no\" }}\n");
    let at = committed
        .find(&format!("fn {}", spec.entry))
        .expect("the committed file has the entry");
    let body = at + committed[at..].find('{').unwrap() + 1;
    let panics = format!(
        "{}\n    panic!(\"wrong\");\n{}",
        &committed[..body],
        &committed[body..]
    );
    let fence = |code: &str| format!("```rust\n{code}\n```");
    let gw = serve(Model::new(
        Dialect::LlamaCpp,
        vec![reply(&fence(&broken)), reply(&fence(&panics))],
    ));
    let s = Scratch::new();
    let pools = pools_file(&s, &gw);
    let summary = run_fixer(&s, task, &pools, &["-n", "2", "--rounds", "1"]);
    let batch = summary["batch_id"].as_i64().unwrap();
    assert_eq!(
        rounds(&s, batch),
        [(0, 2, None), (1, 2, Some("rounds_done".to_owned()))],
        "{}",
        task.display()
    );
    let prompts = asked(&gw);
    assert_eq!(prompts.len(), 4);
    let cases: Vec<(usize, Value)> = spec
        .cases
        .text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .enumerate()
        .collect();
    let shown = |v: &Value| v.to_string();
    // Text the model may see anyway: the task's prompt and the visible
    // cases (a hidden case may share a value with one of them).
    let seen_anyway = |text: &str| {
        spec.prompt.contains(text)
            || cases.iter().any(|(pos, c)| {
                visible.contains(*pos)
                    && (shown(&c["input"]).contains(text) || shown(&c["expected"]).contains(text))
            })
    };
    let mut checked = 0;
    for (pos, case) in &cases {
        if visible.contains(*pos) {
            continue;
        }
        for field in ["input", "expected"] {
            let text = shown(&case[field]);
            if text.len() < 4 || seen_anyway(&text) {
                continue;
            }
            checked += 1;
            for prompt in &prompts {
                assert!(
                    !prompt.contains(&text),
                    "{}: hidden case {pos}'s {field} {text} was sent",
                    task.display()
                );
            }
        }
    }
    assert!(checked > 20, "{}: only {checked} checked", task.display());
    // The repair prompts do carry visible cases: the search above could
    // have found a leak.
    let first_visible = cases
        .iter()
        .find(|(pos, _)| visible.contains(*pos))
        .map(|(_, c)| shown(&c["input"]))
        .unwrap();
    assert!(
        prompts[2..].iter().any(|p| p.contains(&first_visible)),
        "{}: no repair prompt shows the first visible case {first_visible}",
        task.display()
    );
}

/// `--max-tokens` stops the draw once the stored replies have spent the
/// budget: with every reply costing `c` tokens and a budget of `2c + 1`,
/// the third reply spends it and nothing more is stored.
#[test]
fn the_token_budget_stops_the_draw_once_spent() {
    let gw = serve(Model::new(Dialect::LlamaCpp, vec![reply(BROKEN_CASES)]));
    let s = Scratch::new();
    let task = tiny_with_visible(&s);
    let pools = pools_file(&s, &gw);
    let one = run_fixer(&s, &task, &pools, &["-n", "1"]);
    let first = s.draw_replies(one["batch_id"].as_i64().unwrap());
    let c = first[0].reply.completion_tokens.unwrap();
    let budget = (2 * c + 1).to_string();
    let summary = run_fixer(&s, &task, &pools, &["-n", "6", "--max-tokens", &budget]);
    assert_eq!(summary["status"], "finished", "{summary}");
    let batch = summary["batch_id"].as_i64().unwrap();
    let stored = s.draw_replies(batch);
    assert_eq!(stored.len(), 3, "{stored:?}");
    assert_eq!(rounds(&s, batch), [(0, 6, Some("budget".to_owned()))]);
    assert_eq!(summary["rounds"][0]["output_tokens"], 3 * c);
}

/// Repair flags the run cannot honour are refused before anything is
/// written: a replay corpus cannot answer a repair prompt (refused when
/// queued, not when a lane runs the item), and the bounds are checked.
#[test]
fn repair_flags_that_cannot_be_honoured_are_refused() {
    let s = Scratch::new();
    let task = tiny_with_visible(&s);
    let task = task.display().to_string();
    for (args, want) in [
        (
            vec!["run", &task, "--rounds", "1"],
            "a replay corpus cannot answer a repair prompt",
        ),
        (
            vec!["run", &task, "--rounds", "1", "--queue"],
            "a replay corpus cannot answer a repair prompt",
        ),
        (
            vec!["run", &task, "--rounds", "1", "--queue", "--pool", "replay"],
            "a replay corpus cannot answer a repair prompt",
        ),
        (vec!["run", &task, "--rounds", "51"], "--rounds"),
        // No round to draw: refused, not dropped (queued or not).
        (
            vec!["run", &task, "--repair-pool", "fixer"],
            "--repair-pool: draws the repair rounds, and none is asked",
        ),
        (
            vec!["run", &task, "--repair-pool", "fixer", "--queue"],
            "--repair-pool: draws the repair rounds, and none is asked",
        ),
        (vec!["run", &task, "--max-tokens", "0"], "--max-tokens"),
    ] {
        let out = s.assay(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
    assert!(!s.db().exists(), "nothing is written");
}

/// Each round: number, replies, why the rounds stopped there.
type RoundRow = (i64, i64, Option<String>);

/// The stored replies and rounds of batch 1 of a store whose queue a lane
/// drained: the lane runs in the scratch folder with its own output.
fn drain_queue(s: &Scratch) -> (Vec<ReplyRow>, Vec<RoundRow>) {
    let out = s.join("lane-out");
    let out = out.display().to_string();
    let ran = s.assay(&["lane", "--lane", "a", "--until-empty", "--out", &out]);
    assert!(
        ran.status.success(),
        "lane: {}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let items = s.json(&["queue", "--json"]);
    assert_eq!(items[0]["state"], "done", "{items}");
    let shown = s.json(&["show", "1", "--json"]);
    assert_eq!(shown["status"], "finished", "{shown}");
    assert_eq!(shown["lane"], "a", "{shown}");
    (replies(s, 1), rounds(s, 1))
}

/// The queued item's JSON, as the store keeps it.
fn queued_item(s: &Scratch) -> Value {
    let text: String = s.sql(async |pool| {
        sqlx::query_scalar("SELECT item FROM work_items WHERE id = 1")
            .fetch_one(pool)
            .await
            .unwrap()
    });
    serde_json::from_str(&text).unwrap()
}

/// A queued `run --rounds` carries its repair, resolved where it was
/// queued, to the lane, which runs it as `run` would have here: the same
/// replies, rounds and parents as the direct run's. An item queued
/// without repair settings (as an older assay wrote one) still runs, under
/// the spec's own `[repair]`, as it always did.
#[test]
fn a_queued_repair_run_is_run_by_a_lane_as_it_runs_here() {
    let direct = {
        let gw = serve(scripted());
        let s = Scratch::new();
        let task = tiny_with_visible(&s);
        let summary = run_fixer(
            &s,
            &task,
            &pools_file(&s, &gw),
            &["-n", "2", "--rounds", "1"],
        );
        assert_eq!(summary["batch_id"], 1);
        (replies(&s, 1), rounds(&s, 1))
    };
    assert_eq!(direct.1.len(), 2, "{direct:?}");
    assert_eq!(direct.0[2].2, Some(1), "round 1 repairs: {direct:?}");

    let gw = serve(scripted());
    let s = Scratch::new();
    let task = tiny_with_visible(&s);
    let queued = run_fixer(
        &s,
        &task,
        &pools_file(&s, &gw),
        &["-n", "2", "--rounds", "1", "--queue"],
    );
    assert_eq!(queued["work_item"], 1);
    assert_eq!(
        queued_item(&s)["repair"],
        serde_json::json!({"rounds": 1, "pools": [], "max_tokens": null})
    );
    let listed = s.assay_ok(&["queue"]);
    assert!(listed.contains("-n 2 --rounds 1"), "{listed}");
    assert_eq!(drain_queue(&s), direct);

    // As an older assay queued it: no repair key. Its spec asks for the
    // round itself, so the lane's run repairs as the direct run did.
    let gw = serve(scripted());
    let s = Scratch::new();
    let task = tiny_with_visible(&s);
    let spec = task.join("spec.toml");
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(&spec, format!("{text}rounds = 1\n")).unwrap();
    run_fixer(&s, &task, &pools_file(&s, &gw), &["-n", "2", "--queue"]);
    // Resolved from the spec where it was queued...
    assert_eq!(queued_item(&s)["repair"]["rounds"], 1);
    // ... and taken out again, as an item queued before repair was carried.
    s.sql(async |pool| {
        sqlx::query("UPDATE work_items SET item = json_remove(item, '$.repair') WHERE id = 1")
            .execute(pool)
            .await
            .unwrap()
    });
    assert!(queued_item(&s).get("repair").is_none());
    assert_eq!(drain_queue(&s), direct);
}
