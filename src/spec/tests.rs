//! The loader's tests: a good spec and its optional keys, and each bad
//! spec's one-line error naming file, line and key.

use super::*;

/// A task folder with every file a spec names; `spec.toml` is the test's.
pub(crate) fn task_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::create_dir_all(p.join("harness/src")).unwrap();
    std::fs::write(
        p.join("harness/Cargo.toml"),
        "[package]\nname = \"demo-harness\"\nversion = \"0.1.0\"\n",
    )
    .unwrap();
    std::fs::write(p.join("prompt.md"), "write f").unwrap();
    std::fs::write(
        p.join("cases.jsonl"),
        "{\"name\":\"one\",\"a\":1}\n\n{\"name\":\"two\",\"a\":2}\n",
    )
    .unwrap();
    std::fs::write(p.join("committed.rs"), "pub fn f() {}").unwrap();
    std::fs::write(p.join("replies.jsonl"), "").unwrap();
    dir
}

pub(crate) const GOOD: &str = r#"name = "demo"
prompt = "prompt.md"
harness = "harness"
entry = "f"
cases = "cases.jsonl"
committed = "committed.rs"

[draw]
n = 3
replay = "replies.jsonl"

[admit]
min_score = 0.5

[limits]
wall_ms = 100
"#;

fn load(text: &str) -> Result<Spec, SpecError> {
    let dir = task_dir();
    std::fs::write(dir.path().join("spec.toml"), text).unwrap();
    Spec::load(dir.path())
}

#[test]
fn good_spec_loads() {
    let spec = load(GOOD).unwrap();
    assert_eq!(spec.name, "demo");
    assert_eq!(spec.cases.count, 2);
    assert_eq!(spec.harness.crate_name, "demo_harness");
    assert_eq!(spec.limits.wall, Duration::from_millis(100));
    assert!(spec.draw.pools.is_empty() && spec.draw.split.is_none());
    assert_eq!(spec.dedup_by, DedupBy::Exact);
    assert_eq!(spec.limits.isolation, Isolation::None);
    assert_eq!(spec.limits.processes, DEFAULT_PROCESSES);
    assert!(spec.admit.guard.is_empty());
}

#[test]
fn the_spec_may_choose_pools_and_split() {
    let spec = load(&GOOD.replace(
        "n = 3",
        "n = 3\npools = [\"fast=2\", \"flash=1\"]\nsplit = \"fixed\"\nsingle_fence = true",
    ))
    .unwrap();
    assert_eq!(spec.draw.pools.len(), 2);
    assert_eq!(spec.draw.pools[0].share, Some(2));
    assert_eq!(spec.draw.split, Some(SplitMode::Fixed));
    assert!(spec.draw.single_fence);
}

#[test]
fn optional_keys_load() {
    let text = GOOD
        .replace("min_score = 0.5", "min_score = 0.5\nguard = [\"two\"]")
        .replace(
            "wall_ms = 100",
            "wall_ms = 100\nisolation = \"per_case\"\ncase_wall_ms = 7\nprocesses = 4\nmemory_mb = 64",
        )
        + "\n[dedup]\nby = \"alpha\"\n";
    let spec = load(&text).unwrap();
    assert_eq!(spec.admit.guard, vec![1]);
    assert_eq!(spec.dedup_by, DedupBy::Alpha);
    assert_eq!(spec.limits.isolation, Isolation::PerCase);
    assert_eq!(spec.limits.case_wall, Duration::from_millis(7));
    assert_eq!(spec.limits.processes, 4);
    assert_eq!(spec.limits.memory_bytes, 64 << 20);
    assert_eq!(spec.probe, ProbeSpec::default());
}

#[test]
fn the_probe_table_loads() {
    let spec = load(&format!(
        "{GOOD}
[probe]
build_timeout_s = 900
wave_size = 8
wave_wait_ms = 500
"
    ))
    .unwrap();
    assert_eq!(
        spec.probe,
        ProbeSpec {
            compile_limits: Default::default(),
            build_timeout: Some(Duration::from_secs(900)),
            wave_size: Some(8),
            wave_wait: Some(Duration::from_millis(500)),
        }
    );
}

#[test]
fn the_policy_table_relaxes_rules_and_names_a_bad_key() {
    let spec = load(&format!(
        "{GOOD}\n[policy]\ninclude = \"allow\"\nasm = \"forbid\"\n"
    ))
    .unwrap();
    assert!(spec.policy.allows(Rule::Include));
    assert!(!spec.policy.allows(Rule::Asm) && !spec.policy.allows(Rule::UnsafeCode));
    assert_eq!(load(GOOD).unwrap().policy, Policy::default());
    let err = load(&format!("{GOOD}\n[policy]\nunsafe_code = \"maybe\"\n"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("spec.toml:19: `policy.unsafe_code`: `maybe`"),
        "{err}"
    );
    let err = load(&format!("{GOOD}\n[policy]\ngoto = \"allow\"\n"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("spec.toml:19") && err.contains("unknown field `goto`"),
        "{err}"
    );
}

/// Every rule is a `[policy]` key under its stable string, relaxes that
/// rule alone, and names its line when its value is bad.
#[test]
fn every_rule_is_a_policy_key() {
    for rule in Rule::ALL {
        let spec = load(&format!("{GOOD}\n[policy]\n{rule} = \"allow\"\n")).unwrap();
        assert_eq!(spec.policy, Policy::allowing([rule]), "{rule}");
        let err = load(&format!("{GOOD}\n[policy]\n{rule} = \"yes\"\n"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("spec.toml:19: `policy.{rule}`: `yes`")),
            "{err}"
        );
    }
}

/// Programs share an image only under a policy that relaxes nothing a
/// shared image relies on; the default does not relax anything.
#[test]
fn a_relaxed_rule_gives_each_program_its_own_image() {
    assert!(Policy::default().shares_an_image());
    assert!(Policy::allowing([]).shares_an_image());
    for rule in Rule::ALL {
        assert!(rule.guards_a_shared_image(), "{rule}");
        assert!(!Policy::allowing([rule]).shares_an_image(), "{rule}");
    }
    assert!(!Policy::allowing(Rule::ALL).shares_an_image());
}

/// Each bad spec and a fragment its one-line error must contain.
#[test]
fn bad_specs_name_file_and_key() {
    let cases: &[(&str, &str)] = &[
        (
            &GOOD.replace("[limits]", "colour = 3\n[limits]"),
            "spec.toml:15: unknown field `colour`",
        ),
        (&GOOD.replace("entry = \"f\"", "entry = \"2f\""), "`entry`"),
        (
            &GOOD.replace("n = 3", "n = 0"),
            "`draw.n`: must be between 1 and 1000000",
        ),
        (
            &GOOD.replace("wall_ms = 100", "wall_ms = 100\nmemory_mb = 17592186044416"),
            "`limits.memory_mb`: must be between 16 and 16777216",
        ),
        (
            &GOOD.replace("wall_ms = 100", "wall_ms = 100\nprocesses = 4194305"),
            "`limits.processes`: must be between 1 and 4194304",
        ),
        (
            &GOOD.replace("wall_ms = 100", "wall_ms = 86400001"),
            "`limits.wall_ms`: must be between 1 and 86400000",
        ),
        (
            &GOOD.replace("wall_ms = 100", "wall_ms = 100\ncase_wall_ms = 0"),
            "`limits.case_wall_ms`: must be between 1",
        ),
        (
            &GOOD.replace("min_score = 0.5", "min_score = 5"),
            "`admit.min_score`",
        ),
        (
            &GOOD.replace("\"prompt.md\"", "\"nope.md\""),
            "`prompt` names",
        ),
        (
            &GOOD.replace("harness = \"harness\"", "harness = \"none\""),
            "`harness`",
        ),
        (
            &GOOD.replace("name = \"demo\"\n", "name = \"demo\n"),
            "spec.toml:1",
        ),
        (
            &GOOD.replace("wall_ms = 100", ""),
            "missing field `wall_ms`",
        ),
        (
            &GOOD.replace("n = 3", "n = 3\npools = [\"a=x\"]"),
            "`draw.pools`: `a=x`: the share must be a whole number",
        ),
        (
            &GOOD.replace("n = 3", "n = 3\nsplit = \"fast\""),
            "`draw.split`",
        ),
        (
            &format!("{GOOD}\n[dedup]\nby = \"fuzzy\"\n"),
            "`dedup.by`: unknown dedup mode `fuzzy`",
        ),
        (
            &GOOD.replace("min_score = 0.5", "min_score = 0.5\nguard = [\"three\"]"),
            "`admit.guard`: no case named `three`",
        ),
        (
            &GOOD.replace("wall_ms = 100", "wall_ms = 100\nisolation = \"fork\""),
            "`limits.isolation`: unknown isolation `fork`",
        ),
        (
            &format!("{GOOD}\n[probe]\nbuild_timeout_s = 0\n"),
            "spec.toml:19: `probe.build_timeout_s`: must be between 1 and 86400 seconds",
        ),
        (
            &format!("{GOOD}\n[probe]\nwave_size = 0\n"),
            "spec.toml:19: `probe.wave_size`: must be between 1 and 100000",
        ),
        (
            &format!("{GOOD}\n[probe]\nwave_size = 4\nwave_wait_ms = 0\n"),
            "spec.toml:20: `probe.wave_wait_ms`: must be between 1 and 3600000",
        ),
        (
            &format!("{GOOD}\n[probe]\nwaves = 4\n"),
            "spec.toml:19: unknown field `waves`",
        ),
    ];
    for (text, want) in cases {
        let err = load(text).unwrap_err().to_string();
        assert!(err.contains(want), "{err:?} lacks {want:?}");
        assert!(err.contains("spec.toml"), "{err:?} names no file");
        assert!(!err.contains('\n'), "{err:?} is not one line");
    }
}

#[test]
fn cases_inside_the_harness_directory_are_refused_on_their_line() {
    let dir = task_dir();
    std::fs::copy(
        dir.path().join("cases.jsonl"),
        dir.path().join("harness/cases.jsonl"),
    )
    .unwrap();
    for cases in ["harness/cases.jsonl", "./harness/../harness/cases.jsonl"] {
        let text = GOOD.replace("\"cases.jsonl\"", &format!("{cases:?}"));
        std::fs::write(dir.path().join("spec.toml"), text).unwrap();
        let err = Spec::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("spec.toml:5: `cases`"), "{err}");
        assert!(err.contains("inside the harness directory"), "{err}");
        assert!(!err.contains('\n'), "{err:?} is not one line");
    }
    // Beside it is fine, as in every bundled task.
    std::fs::write(dir.path().join("spec.toml"), GOOD).unwrap();
    Spec::load(dir.path()).unwrap();
}

#[test]
fn a_bad_case_line_is_named() {
    let dir = task_dir();
    std::fs::write(dir.path().join("spec.toml"), GOOD).unwrap();
    std::fs::write(dir.path().join("cases.jsonl"), "{\"a\":1}\n[1]\n").unwrap();
    let err = Spec::load(dir.path()).unwrap_err().to_string();
    assert!(err.contains("cases.jsonl:2"), "{err}");
}

#[test]
fn the_repair_table_defaults_to_no_rounds_and_no_visible_case() {
    let spec = load(GOOD).unwrap();
    assert_eq!(spec.repair, Repair::default());
    assert_eq!(spec.repair.rounds, 0);
    assert!(spec.repair.visible.is_empty());
    assert_eq!(spec.repair.template.path, None);
}

#[test]
fn the_repair_table_loads() {
    let dir = task_dir();
    std::fs::write(
        dir.path().join("fix.md"),
        "Task: {{prompt}}\n```rust\n{{code}}\n```\n{{errors}}{{cases}} {{ not a slot }}",
    )
    .unwrap();
    let text = format!(
        "{GOOD}
[repair]
rounds = 3
candidates = 8
best_failing = 2
compile_failures = 0
feedback = \"errors_only\"
stop = \"beats_committed\"
template = \"fix.md\"
visible = [\"two\"]
max_errors = 5
max_error_chars = 900
max_cases = 1
max_case_chars = 50
"
    );
    std::fs::write(dir.path().join("spec.toml"), text).unwrap();
    let repair = Spec::load(dir.path()).unwrap().repair;
    assert_eq!(repair.rounds, 3);
    assert_eq!(repair.candidates, Some(8));
    assert_eq!(
        repair.parents,
        ParentChoice {
            best_failing: 2,
            compile_failures: 0
        }
    );
    assert_eq!(repair.feedback, Feedback::ErrorsOnly);
    assert_eq!(repair.stop, StopWhen::BeatsCommitted);
    assert_eq!(repair.visible.positions(), &[1]);
    assert_eq!(
        repair.limits,
        FeedbackLimits {
            errors: 5,
            error_chars: 900,
            cases: 1,
            case_chars: 50
        }
    );
    assert_eq!(repair.template.path, Some(dir.path().join("fix.md")));
    let slots: Vec<Slot> = repair
        .template
        .pieces()
        .iter()
        .filter_map(|p| match p {
            Piece::Slot(s) => Some(*s),
            Piece::Text(_) => None,
        })
        .collect();
    assert_eq!(
        slots,
        [Slot::Prompt, Slot::Code, Slot::Errors, Slot::Cases],
        "`{{{{ not a slot }}}}` is text"
    );
    // A count is the first cases in file order.
    let spec = load(&format!("{GOOD}\n[repair]\nvisible = 1\n")).unwrap();
    assert_eq!(spec.repair.visible.positions(), &[0]);
}

/// Each bad `[repair]` and a fragment its one-line error must contain.
#[test]
fn bad_repair_tables_name_file_line_and_key() {
    let cases: &[(&str, &str)] = &[
        (
            "[repair]\nrounds = 51\n",
            "spec.toml:19: `repair.rounds`: must be between 0 and 50",
        ),
        (
            "[repair]\ncandidates = 0\n",
            "spec.toml:19: `repair.candidates`: must be between 1 and 1000000",
        ),
        (
            "[repair]\nbest_failing = 0\ncompile_failures = 0\n",
            "spec.toml:19: `repair.best_failing`: `best_failing` and `compile_failures` are both 0",
        ),
        (
            "[repair]\nmax_errors = 0\n",
            "spec.toml:19: `repair.max_errors`: must be between 1 and 100",
        ),
        (
            "[repair]\nmax_error_chars = 99\n",
            "spec.toml:19: `repair.max_error_chars`: must be between 100 and 100000",
        ),
        (
            "[repair]\nmax_case_chars = 100001\n",
            "spec.toml:19: `repair.max_case_chars`",
        ),
        (
            "[repair]\nstop = \"soon\"\n",
            "spec.toml:19: `repair.stop`: `soon`: expected `all_pass`, `beats_committed` or `never`",
        ),
        (
            "[repair]\nfeedback = \"tests\"\n",
            "spec.toml:19: `repair.feedback`: `tests`",
        ),
        (
            "[repair]\nvisible = 2\n",
            "spec.toml:19: `repair.visible`: would show all 2 cases",
        ),
        (
            "[repair]\nvisible = [\"three\"]\n",
            "spec.toml:19: `repair.visible`: no case named `three`",
        ),
        (
            "[repair]\nvisible = [\"one\", \"one\"]\n",
            "`repair.visible`: case `one` is named twice",
        ),
        (
            "[repair]\nvisible = \"one\"\n",
            "spec.toml:19",
        ),
        (
            "[repair]\ntemplate = \"none.md\"\n",
            "`repair.template` names",
        ),
        ("[repair]\nround = 1\n", "spec.toml:19: unknown field `round`"),
    ];
    for (table, want) in cases {
        let err = load(&format!("{GOOD}\n{table}")).unwrap_err().to_string();
        assert!(err.contains(want), "{err:?} lacks {want:?}");
        assert!(!err.contains('\n'), "{err:?} is not one line");
    }
}

#[test]
fn a_guard_case_cannot_be_visible() {
    let text = GOOD.replace("min_score = 0.5", "min_score = 0.5\nguard = [\"one\"]")
        + "\n[repair]\nvisible = [\"one\"]\n";
    let err = load(&text).unwrap_err().to_string();
    assert!(
        err.contains("spec.toml:20: `repair.visible`: case `one` is an `admit.guard` case"),
        "{err}"
    );
    let text = GOOD.replace("min_score = 0.5", "min_score = 0.5\nguard = [\"two\"]")
        + "\n[repair]\nvisible = [\"one\"]\n";
    assert_eq!(load(&text).unwrap().repair.visible.positions(), &[0]);
}

#[test]
fn a_template_names_its_own_file_and_line() {
    let dir = task_dir();
    std::fs::write(
        dir.path().join("fix.md"),
        "{{code}}\n\n{{errors}} {{hidden}}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("spec.toml"),
        format!("{GOOD}\n[repair]\ntemplate = \"fix.md\"\n"),
    )
    .unwrap();
    let err = Spec::load(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("fix.md:3: `repair.template`: unknown placeholder `{{hidden}}`"),
        "{err}"
    );
    std::fs::write(dir.path().join("fix.md"), "{{errors}}\n").unwrap();
    let err = Spec::load(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("fix.md:1: `repair.template`: has no `{{code}}`"),
        "{err}"
    );
}

#[test]
fn the_default_template_has_every_slot() {
    let pieces = Template::default();
    for slot in Slot::ALL {
        assert!(
            pieces.pieces().contains(&Piece::Slot(slot)),
            "{}",
            slot.as_str()
        );
    }
}

#[test]
fn repair_settings_round_trip_through_their_strings() {
    for stop in [StopWhen::AllPass, StopWhen::BeatsCommitted, StopWhen::Never] {
        assert_eq!(stop.as_str().parse::<StopWhen>(), Ok(stop));
    }
    for feedback in [Feedback::Full, Feedback::ErrorsOnly] {
        assert_eq!(feedback.as_str().parse::<Feedback>(), Ok(feedback));
    }
    assert_eq!("errors-only".parse::<Feedback>(), Ok(Feedback::ErrorsOnly));
}
