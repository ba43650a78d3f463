//! Bad input: one test per case of issue 7's table. Each must exit with
//! code 2, say one line naming the file (and the line and field where it
//! can), and write nothing: no database created, an existing database
//! unchanged, no output folder.
//!
//! Not here, because this branch has no such input yet: `--levels` with a
//! zero (the ladder).

mod common;
#[path = "common/net.rs"]
mod net;

use std::path::Path;

use common::{assert_refused, edit, tiny, Scratch};

/// Every row of every table, as text: what the database holds, whatever
/// its pages look like (a checkpoint moves bytes between the WAL and the
/// main file without changing a row).
fn db_rows(scratch: &Scratch) -> Vec<String> {
    scratch.sql(async |db| {
        let tables: Vec<String> =
            sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
                .fetch_all(db)
                .await
                .unwrap();
        let mut out = Vec::new();
        for table in tables {
            let columns: Vec<String> =
                sqlx::query_scalar(&format!("SELECT name FROM pragma_table_info('{table}')"))
                    .fetch_all(db)
                    .await
                    .unwrap();
            let quoted: Vec<String> = columns.iter().map(|c| format!("quote({c})")).collect();
            let rows: Vec<String> = sqlx::query_scalar(&format!(
                "SELECT {} FROM {table}",
                quoted.join(" || ',' || ")
            ))
            .fetch_all(db)
            .await
            .unwrap();
            out.extend(rows.into_iter().map(|r| format!("{table}: {r}")));
        }
        out
    })
}

/// Runs `assay args` and checks the refusal: exit 2, one line holding
/// every fragment of `want`.
fn refused(scratch: &Scratch, args: &[&str], want: &[&str]) -> String {
    assert_refused(&scratch.assay(args), args, want)
}

/// Nothing was created: no database, no output folder.
fn nothing_written(scratch: &Scratch) {
    assert!(!scratch.db().exists(), "a database was created");
    assert!(
        !scratch.path().join("assay-out").exists(),
        "an output folder was created"
    );
}

fn run_task(_scratch: &Scratch, task: &Path) -> Vec<String> {
    vec!["run".into(), task.display().to_string()]
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn a_spec_with_a_syntax_error() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    edit(
        &task.join("spec.toml"),
        "entry = \"double\"",
        "entry = \"double",
    );
    let a = run_task(&scratch, &task);
    refused(&scratch, &args(&a), &["task/spec.toml:4:"]);
    nothing_written(&scratch);
}

#[test]
fn a_spec_with_an_unknown_key() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    edit(
        &task.join("spec.toml"),
        "[limits]\n",
        "[limits]\nwall_secs = 3\n",
    );
    let a = run_task(&scratch, &task);
    refused(
        &scratch,
        &args(&a),
        &["task/spec.toml:16:", "unknown field `wall_secs`"],
    );
    nothing_written(&scratch);
}

#[test]
fn a_spec_whose_harness_is_missing() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    std::fs::remove_dir_all(task.join("harness")).unwrap();
    let a = run_task(&scratch, &task);
    refused(
        &scratch,
        &args(&a),
        &["task/spec.toml: `harness` names", "has no Cargo.toml"],
    );
    nothing_written(&scratch);
}

#[test]
fn cases_that_do_not_parse() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    edit(
        &task.join("cases.jsonl"),
        "{\"input\": 2, \"expected\": 4}",
        "{\"input\": 2, \"expected\": 4",
    );
    let a = run_task(&scratch, &task);
    refused(
        &scratch,
        &args(&a),
        &["task/cases.jsonl:3:", "EOF while parsing"],
    );
    nothing_written(&scratch);
}

#[test]
fn cases_whose_types_do_not_match_the_harness() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    // Valid JSON objects, but `input` is a u64 in the harness.
    edit(
        &task.join("cases.jsonl"),
        "{\"input\": 2, \"expected\": 4}",
        "{\"input\": \"two\", \"expected\": 4}",
    );
    let a = run_task(&scratch, &task);
    refused(
        &scratch,
        &args(&a),
        &[
            "task/cases.jsonl:3: the harness `tiny_harness` rejects the case",
            "invalid type: string \"two\", expected u64",
        ],
    );
    nothing_written(&scratch);

    // A field the harness does not know is caught the same way.
    edit(
        &task.join("cases.jsonl"),
        "{\"input\": \"two\", \"expected\": 4}",
        "{\"input\": 2, \"expect\": 4}",
    );
    refused(
        &scratch,
        &args(&a),
        &["task/cases.jsonl:3:", "missing field `expected`"],
    );
    nothing_written(&scratch);
}

#[test]
fn a_database_in_a_missing_directory() {
    let scratch = Scratch::new();
    refused(
        &scratch,
        &["run", &tiny(), "--db", "no/such/dir/assay.db"],
        &["no/such/dir/assay.db", "no/such/dir does not exist"],
    );
    nothing_written(&scratch);
    assert!(!scratch.path().join("no").exists());
}

#[test]
fn a_database_in_a_read_only_directory() {
    let scratch = Scratch::new();
    // sysfs refuses new files to every user, root included.
    refused(
        &scratch,
        &["run", &tiny(), "--db", "/sys/assay.db"],
        &[
            "/sys/assay.db",
            "cannot create the database: directory /sys is not writable",
        ],
    );
    nothing_written(&scratch);
}

#[test]
fn a_read_only_database() {
    let scratch = Scratch::new();
    scratch.create_empty_db();
    let db = scratch.db();
    let mut perms = std::fs::metadata(&db).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o444);
    std::fs::set_permissions(&db, perms).unwrap();
    // SAFETY: access only reads the path.
    let writable = unsafe {
        let c = std::ffi::CString::new(db.as_os_str().as_encoded_bytes()).unwrap();
        libc::access(c.as_ptr(), libc::W_OK) == 0
    };
    let before = db_rows(&scratch);
    let args = ["run", &tiny()];
    let want = "assay.db: the database is read-only";
    if writable {
        // Root writes through file modes, so root runs assay as an
        // unprivileged user, for whom the file is read-only.
        let out = as_nobody(&scratch, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
        assert!(err.contains(want), "{err:?} lacks {want:?}");
    } else {
        refused(&scratch, &args, &[want]);
    }
    assert_eq!(db_rows(&scratch), before);
}

/// Runs assay as uid and gid 65534 (nobody), with the scratch directory
/// opened to it; for the cases where root would write through file modes.
fn as_nobody(scratch: &Scratch, args: &[&str]) -> std::process::Output {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // The shared work directory is root's; this user gets one of its own.
    let work = scratch.path().join("nobody-work");
    std::fs::create_dir(&work).unwrap();
    std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o777)).unwrap();
    scratch
        .command(args)
        .env("ASSAY_WORK_DIR", &work)
        .uid(65534)
        .gid(65534)
        .output()
        .expect("assay starts as nobody")
}

#[test]
fn a_database_from_a_newer_schema() {
    let scratch = Scratch::new();
    scratch.create_empty_db();
    scratch.sql(async |db| {
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
             VALUES (9999, 'from the future', 1, x'00', 0)",
        )
        .execute(db)
        .await
        .unwrap();
    });
    let before = db_rows(&scratch);
    for command in [&["run", &tiny()][..], &["batches"], &["show", "1"]] {
        refused(
            &scratch,
            command,
            &[
                "assay.db: the database has schema version 9999, newer than this assay knows (",
                "use a newer assay",
            ],
        );
    }
    assert_eq!(db_rows(&scratch), before, "the newer database was written");
}

#[test]
fn an_unknown_batch_id() {
    let scratch = Scratch::new();
    // Without a database, resuming creates none and names the database.
    refused(
        &scratch,
        &["run", "--resume", "9"],
        &["assay.db: no such database"],
    );
    nothing_written(&scratch);

    scratch.create_empty_db();
    let before = db_rows(&scratch);
    refused(&scratch, &["show", "9"], &["assay.db: no batch 9"]);
    refused(
        &scratch,
        &["run", "--resume", "9"],
        &["assay.db: no batch 9"],
    );
    assert_eq!(db_rows(&scratch), before);
}

#[test]
fn n_zero() {
    let scratch = Scratch::new();
    refused(
        &scratch,
        &["run", &tiny(), "-n", "0"],
        &["-n: must be between 1 and 1000000"],
    );
    nothing_written(&scratch);
}

#[test]
fn resuming_against_a_changed_spec() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    let a = run_task(&scratch, &task);
    scratch.start_at("pause@draw.done", &args(&a)).kill9();
    // A reading command marks the killed batch interrupted first.
    scratch.assay_ok(&["batches"]);
    edit(
        &task.join("cases.jsonl"),
        "{\"input\": 2, \"expected\": 4}",
        "{\"input\": 2, \"expected\": 5}",
    );
    let before = db_rows(&scratch);
    refused(
        &scratch,
        &["run", "--resume", "1"],
        &["batch 1 was run with another version of", "task/spec.toml"],
    );
    assert_eq!(db_rows(&scratch), before);
    assert_eq!(
        scratch.json(&["batches", "--json"])[0]["status"],
        "interrupted"
    );
}

#[test]
fn resuming_with_another_task_spec() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    let a = run_task(&scratch, &task);
    scratch.start_at("pause@draw.done", &args(&a)).kill9();
    // A reading command marks the killed batch interrupted first.
    scratch.assay_ok(&["batches"]);
    edit(
        &task.join("spec.toml"),
        "name = \"tiny\"",
        "name = \"other\"",
    );
    refused(
        &scratch,
        &["run", &task.display().to_string(), "--resume", "1"],
        &["batch 1 is task `tiny`, the spec is task `other`"],
    );
}

/// A pools file in the scratch directory, with a sampling preset so that
/// the refusal is the only line.
fn pools_file(scratch: &Scratch, body: &str) -> String {
    let path = scratch.path().join("pools.toml");
    std::fs::write(&path, body).unwrap();
    path.display().to_string()
}

/// Refused with no database, and again with an (empty) database that stays
/// as it was.
fn refused_twice(scratch: &Scratch, args: &[&str], want: &[&str]) {
    refused(scratch, args, want);
    nothing_written(scratch);
    scratch.create_empty_db();
    let before = db_rows(scratch);
    refused(scratch, args, want);
    assert_eq!(db_rows(scratch), before);
    assert!(
        !scratch.path().join("assay-out").exists(),
        "an output folder was created"
    );
}

#[test]
fn a_pools_file_without_a_base_url() {
    let scratch = Scratch::new();
    let pools = pools_file(
        &scratch,
        "[pools.a]\nmodel = \"m\"\n\n[pools.a.sampling]\ntemperature = 0.7\n",
    );
    let task = tiny();
    refused_twice(
        &scratch,
        &["run", &task, "--pools", &pools, "--pool", "a"],
        &["pools.toml:1:", "`base_url`"],
    );
}

#[test]
fn a_pool_key_variable_that_is_unset() {
    let scratch = Scratch::new();
    let pools = pools_file(
        &scratch,
        "[pools.a]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n\
         api_key_env = \"ASSAY_TEST_KEY_NEVER_SET\"\n\n[pools.a.sampling]\ntemperature = 0.7\n",
    );
    let task = tiny();
    refused_twice(
        &scratch,
        &["run", &task, "--pools", &pools, "--pool", "a"],
        &["pools.toml: pool `a`: `api_key_env` names ASSAY_TEST_KEY_NEVER_SET, which is not set"],
    );
}

#[test]
fn an_unreachable_gateway() {
    // A port we hold bound but never listen on: connections to it are
    // refused for as long as the test runs, and no other process can take
    // it in between.
    let (_held, port) = net::bound_not_listening();
    let scratch = Scratch::new();
    let pools = pools_file(
        &scratch,
        &format!(
            "[pools.a]\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"m\"\n\n\
             [pools.a.sampling]\ntemperature = 0.7\n"
        ),
    );
    let task = tiny();
    refused_twice(
        &scratch,
        &["run", &task, "--pools", &pools, "--pool", "a"],
        &[
            "pools.toml: pool `a`: `base_url`",
            &format!("http://127.0.0.1:{port}/v1 is unreachable"),
        ],
    );
}

/// Issue 30: `replay = "/dev/null"` was said not to exist.
#[test]
fn a_replay_corpus_that_is_a_device() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    edit(
        &task.join("spec.toml"),
        "replay = \"replies.jsonl\"",
        "replay = \"/dev/null\"",
    );
    let a = run_task(&scratch, &task);
    refused(
        &scratch,
        &args(&a),
        &["task/spec.toml: `draw.replay` names /dev/null, which is not a regular file"],
    );
    nothing_written(&scratch);
}

/// Issue 30: `run specs/absolute/cases.jsonl` said
/// `cases.jsonl/spec.toml: cannot read: Not a directory`.
#[test]
fn a_task_given_as_one_of_its_files() {
    let scratch = Scratch::new();
    let cases = common::repo().join("tests/fixtures/tiny/cases.jsonl");
    let cases = cases.display().to_string();
    for args in [&["run", &cases][..], &["task", "check", &cases]] {
        let line = refused(
            &scratch,
            args,
            &[&format!(
                "{cases}: not a task: a task is a folder holding spec.toml, or that spec.toml"
            )],
        );
        assert!(!line.contains("Not a directory"), "{line}");
    }
    nothing_written(&scratch);
}

/// Issue 30: two cases of one name were accepted, even when a guard named
/// one of them. Refused at load, naming both lines.
#[test]
fn cases_with_the_same_name() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    edit(
        &task.join("cases.jsonl"),
        "{\"input\": 1, \"expected\": 2}",
        "{\"input\": 1, \"expected\": 2, \"name\": \"one\"}",
    );
    edit(
        &task.join("cases.jsonl"),
        "{\"input\": 2, \"expected\": 4}",
        "{\"input\": 2, \"expected\": 4, \"name\": \"one\"}",
    );
    edit(
        &task.join("spec.toml"),
        "[admit]\n",
        "[admit]\nguard = [\"one\"]\n",
    );
    let a = run_task(&scratch, &task);
    refused(
        &scratch,
        &args(&a),
        &["task/cases.jsonl:3: a second case named `one` (the first is on line 2)"],
    );
    nothing_written(&scratch);
}

/// Issue 30: a cases file inside `harness/` that is not JSON reported the
/// JSON error, not the rule that it may not be there.
#[test]
fn cases_inside_the_harness_that_do_not_parse() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    std::fs::write(task.join("harness/cases.jsonl"), "{not json\n").unwrap();
    edit(
        &task.join("spec.toml"),
        "cases = \"cases.jsonl\"",
        "cases = \"harness/cases.jsonl\"",
    );
    let a = run_task(&scratch, &task);
    let line = refused(
        &scratch,
        &args(&a),
        &[
            "task/spec.toml:5: `cases`",
            "lies inside the harness directory",
        ],
    );
    assert!(!line.contains("key must be a string"), "{line}");
    nothing_written(&scratch);
}

/// A problem set of one problem (the fixture's first) with two
/// completions, one right, one wrong: a suite that runs in seconds.
fn small_suite(scratch: &Scratch) -> (String, String) {
    let fixture = common::repo().join("tests/fixtures/suite");
    let first = |file: &str, lines: usize| -> String {
        std::fs::read_to_string(fixture.join(file))
            .unwrap()
            .lines()
            .take(lines)
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let problems = scratch.write("problems.jsonl", &first("problems.jsonl", 1));
    let completions = scratch.write("completions.jsonl", &first("completions.jsonl", 2));
    (
        problems.display().to_string(),
        completions.display().to_string(),
    )
}

/// Issue 30: `suite compare 1 2 -k 5` said "fewer than k completions"
/// without k or n.
#[test]
fn suite_compare_with_k_above_the_completions_says_k_and_n() {
    let scratch = Scratch::new();
    let (problems, completions) = small_suite(&scratch);
    scratch.assay_ok(&["suite", "run", &problems, "--completions", &completions]);
    refused(
        &scratch,
        &["suite", "compare", "1", "1", "-k", "5"],
        &[
            "suite compare 1 1 -k 5: problem `fx_add_two` has 2 completions in the first run \
           and 2 in the second; pass@5 needs at least 5 in each",
        ],
    );
}
