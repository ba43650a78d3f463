//! Bad input: one test per case of issue 7's table. Each must exit with
//! code 2, say one line naming the file (and the line and field where it
//! can), and write nothing: no database created, an existing database
//! unchanged, no output folder.
//!
//! Not here, because this branch has no such input yet: `--levels` with a
//! zero (the ladder).

use crate::common;
use crate::common::net;

use std::path::PathBuf;

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

/// The tiny task copied into a scratch directory (as `task/`), to be
/// broken one file at a time.
struct TinyCopy {
    scratch: Scratch,
    dir: PathBuf,
}

impl TinyCopy {
    fn new() -> TinyCopy {
        let scratch = Scratch::new();
        let dir = scratch.tiny_copy();
        TinyCopy { scratch, dir }
    }

    /// In the task's `file`, the first `from` becomes `to`.
    fn edit(&self, file: &str, from: &str, to: &str) {
        edit(&self.dir.join(file), from, to);
    }

    /// The task's folder, as a command line names it.
    fn arg(&self) -> String {
        self.dir.display().to_string()
    }

    /// `assay run` of the task is refused with one line holding every
    /// fragment of `want`, and writes nothing. Returns the line.
    fn run_refused(&self, want: &[&str]) -> String {
        let line = refused(&self.scratch, &["run", &self.arg()], want);
        nothing_written(&self.scratch);
        line
    }

    /// Batch 1 of the task, killed after its draw and marked interrupted
    /// by a reading command, as a crash leaves it.
    fn interrupted_batch(&self) {
        self.scratch
            .start_at("pause@draw.done", &["run", &self.arg()])
            .kill9();
        self.scratch.assay_ok(&["batches"]);
    }
}

#[test]
fn a_spec_with_a_syntax_error() {
    let task = TinyCopy::new();
    task.edit("spec.toml", "entry = \"double\"", "entry = \"double");
    task.run_refused(&["task/spec.toml:4:"]);
}

#[test]
fn a_spec_with_an_unknown_key() {
    let task = TinyCopy::new();
    task.edit("spec.toml", "[limits]\n", "[limits]\nwall_secs = 3\n");
    task.run_refused(&["task/spec.toml:16:", "unknown field `wall_secs`"]);
}

#[test]
fn a_spec_whose_harness_is_missing() {
    let task = TinyCopy::new();
    std::fs::remove_dir_all(task.dir.join("harness")).unwrap();
    task.run_refused(&["task/spec.toml: `harness` names", "has no Cargo.toml"]);
}

#[test]
fn cases_that_do_not_parse() {
    let task = TinyCopy::new();
    task.edit(
        "cases.jsonl",
        "{\"input\": 2, \"expected\": 4}",
        "{\"input\": 2, \"expected\": 4",
    );
    task.run_refused(&["task/cases.jsonl:3:", "EOF while parsing"]);
}

#[test]
fn cases_whose_types_do_not_match_the_harness() {
    let task = TinyCopy::new();
    // Valid JSON objects, but `input` is a u64 in the harness.
    task.edit(
        "cases.jsonl",
        "{\"input\": 2, \"expected\": 4}",
        "{\"input\": \"two\", \"expected\": 4}",
    );
    task.run_refused(&[
        "task/cases.jsonl:3: the harness `tiny_harness` rejects the case",
        "invalid type: string \"two\", expected u64",
    ]);

    // A field the harness does not know is caught the same way.
    task.edit(
        "cases.jsonl",
        "{\"input\": \"two\", \"expected\": 4}",
        "{\"input\": 2, \"expect\": 4}",
    );
    task.run_refused(&["task/cases.jsonl:3:", "missing field `expected`"]);
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
fn a_lane_on_a_missing_database() {
    let scratch = Scratch::new();
    for args in [&["lane", "--until-empty"][..], &["lane"]] {
        refused(&scratch, args, &["assay.db: no such database"]);
        nothing_written(&scratch);
    }
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
    let task = TinyCopy::new();
    let scratch = &task.scratch;
    task.interrupted_batch();
    task.edit(
        "cases.jsonl",
        "{\"input\": 2, \"expected\": 4}",
        "{\"input\": 2, \"expected\": 5}",
    );
    let before = db_rows(scratch);
    refused(
        scratch,
        &["run", "--resume", "1"],
        &["batch 1 was run with another version of", "task/spec.toml"],
    );
    assert_eq!(db_rows(scratch), before);
    assert_eq!(
        scratch.json(&["batches", "--json"])[0]["status"],
        "interrupted"
    );
}

#[test]
fn resuming_with_another_task_spec() {
    let task = TinyCopy::new();
    task.interrupted_batch();
    task.edit("spec.toml", "name = \"tiny\"", "name = \"other\"");
    refused(
        &task.scratch,
        &["run", &task.arg(), "--resume", "1"],
        &["batch 1 is task `tiny`, the spec is task `other`"],
    );
}

/// A pools file in the scratch directory holding pool `a` with `keys`,
/// and a sampling preset so that the refusal is the only line.
fn pools_file(scratch: &Scratch, keys: &str) -> String {
    let body = format!("[pools.a]\n{keys}\n[pools.a.sampling]\ntemperature = 0.7\n");
    scratch.write("pools.toml", &body).display().to_string()
}

/// `assay run` of the tiny task drawing from pool `a`, whose keys are
/// `keys`: refused as [`refused_twice`] says.
fn pool_refused(keys: &str, want: &[&str]) {
    let scratch = Scratch::new();
    let pools = pools_file(&scratch, keys);
    let task = tiny();
    refused_twice(
        &scratch,
        &["run", &task, "--pools", &pools, "--pool", "a"],
        want,
    );
}

/// The keys of pool `a` at a loopback `port`.
fn at_port(port: u16) -> String {
    format!("base_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"m\"\n")
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
    pool_refused("model = \"m\"\n", &["pools.toml:1:", "`base_url`"]);
}

#[test]
fn a_pool_url_that_holds_a_password() {
    pool_refused(
        "base_url = \"http://user:sk-secret@127.0.0.1:9/v1\"\nmodel = \"m\"\n",
        &["pools.toml: pool `a`: `base_url`", "holds a password"],
    );
}

#[test]
fn a_pool_key_variable_that_is_unset() {
    pool_refused(
        &format!("{}api_key_env = \"ASSAY_TEST_KEY_NEVER_SET\"\n", at_port(9)),
        &["pools.toml: pool `a`: `api_key_env` names ASSAY_TEST_KEY_NEVER_SET, which is not set"],
    );
}

#[test]
fn an_unreachable_gateway() {
    // A port we hold bound but never listen on: connections to it are
    // refused for as long as the test runs, and no other process can take
    // it in between.
    let (_held, port) = net::bound_not_listening();
    pool_refused(
        &at_port(port),
        &[
            "pools.toml: pool `a`: `base_url`",
            &format!("http://127.0.0.1:{port}/v1 is unreachable"),
        ],
    );
}

/// Issue 30: `replay = "/dev/null"` was said not to exist.
#[test]
fn a_replay_corpus_that_is_a_device() {
    let task = TinyCopy::new();
    task.edit(
        "spec.toml",
        "replay = \"replies.jsonl\"",
        "replay = \"/dev/null\"",
    );
    task.run_refused(&[
        "task/spec.toml: `draw.replay` names /dev/null, which is not a regular file",
    ]);
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
    let task = TinyCopy::new();
    task.edit(
        "cases.jsonl",
        "{\"input\": 1, \"expected\": 2}",
        "{\"input\": 1, \"expected\": 2, \"name\": \"one\"}",
    );
    task.edit(
        "cases.jsonl",
        "{\"input\": 2, \"expected\": 4}",
        "{\"input\": 2, \"expected\": 4, \"name\": \"one\"}",
    );
    task.edit("spec.toml", "[admit]\n", "[admit]\nguard = [\"one\"]\n");
    task.run_refused(&["task/cases.jsonl:3: a second case named `one` (the first is on line 2)"]);
}

/// Issue 30: a cases file inside `harness/` that is not JSON reported the
/// JSON error, not the rule that it may not be there.
#[test]
fn cases_inside_the_harness_that_do_not_parse() {
    let task = TinyCopy::new();
    std::fs::write(task.dir.join("harness/cases.jsonl"), "{not json\n").unwrap();
    task.edit(
        "spec.toml",
        "cases = \"cases.jsonl\"",
        "cases = \"harness/cases.jsonl\"",
    );
    let line = task.run_refused(&[
        "task/spec.toml:5: `cases`",
        "lies inside the harness directory",
    ]);
    assert!(!line.contains("key must be a string"), "{line}");
}

/// Issue 30: `suite compare 1 2 -k 5` said "fewer than k completions"
/// without k or n.
#[test]
fn suite_compare_with_k_above_the_completions_says_k_and_n() {
    let scratch = Scratch::new();
    let (problems, completions) = scratch.small_suite();
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

/// `cmd` as a first-time user runs it: no `ASSAY_WORK_DIR`, so the default
/// work directory is used, here in the scratch directory's own cache
/// folder (so what a command builds or creates there is seen, and the
/// user's cache is never touched).
fn with_default_work_dir(scratch: &Scratch, args: &[&str]) -> std::process::Output {
    scratch
        .command(args)
        .env_remove("ASSAY_WORK_DIR")
        .env("XDG_CACHE_HOME", scratch.join("cache"))
        .output()
        .expect("assay starts")
}

/// Issue 30, item 5: `run --db text.db` checked the task and built the
/// harness's dependencies (40 MB in `text-out/work`) before finding that
/// the database was no database; `suite run` left an empty
/// `text-out/work`. The database is opened first.
#[test]
fn a_database_that_is_not_sqlite_is_found_before_anything_is_written() {
    let scratch = Scratch::new();
    let text = scratch.write("text.db", "a text file, not a database\n");
    let (problems, completions) = scratch.small_suite();
    let task = tiny();
    for args in [
        &["run", &task, "--db", "text.db"][..],
        &[
            "suite",
            "run",
            &problems,
            "--completions",
            &completions,
            "--db",
            "text.db",
        ],
    ] {
        let out = with_default_work_dir(&scratch, args);
        assert_refused(&out, args, &["text.db", "file is not a database"]);
        assert!(!scratch.join("text-out").exists(), "{args:?} made text-out");
        assert!(!scratch.join("cache").exists(), "{args:?} made a work dir");
        assert_eq!(
            std::fs::read_to_string(&text).unwrap(),
            "a text file, not a database\n"
        );
    }
}

/// Issue 30, item 6: `ladder` without a pools file created `q-out/work`
/// before refusing.
#[test]
fn a_ladder_without_a_pools_file_writes_nothing() {
    let scratch = Scratch::new();
    let task = tiny();
    let args = ["ladder", "--spec", &task, "--pool", "fast", "--db", "q.db"];
    refused(&scratch, &args, &["pool `fast` needs a pools file"]);
    assert!(!scratch.join("q-out").exists(), "q-out was made");
    assert!(!scratch.join("q.db").exists(), "q.db was made");
}

/// Issue 30, item 7: a `--svg` into a folder that does not exist was found
/// after the work (exit 1, no table). It is bad input, found first.
#[test]
fn a_chart_into_a_missing_folder_is_refused_before_the_work() {
    // A server that refuses connections: a ladder that got as far as
    // drawing would fail there instead.
    let (_held, port) = net::bound_not_listening();
    let scratch = Scratch::new();
    let pools = pools_file(&scratch, &at_port(port));
    scratch.create_empty_db();
    let before = db_rows(&scratch);
    let task = tiny();
    let want = [
        "--svg no/such/folder/c.svg",
        "folder no/such/folder does not exist",
    ];
    for args in [
        &["compare", "1", "2", "--svg", "no/such/folder/c.svg"][..],
        &[
            "suite",
            "compare",
            "1",
            "2",
            "--svg",
            "no/such/folder/c.svg",
        ],
        &[
            "ladder",
            "--spec",
            &task,
            "--pool",
            "a",
            "--pools",
            &pools,
            "--levels",
            "1",
            "--svg",
            "no/such/folder/c.svg",
        ],
    ] {
        refused(&scratch, args, &want);
    }
    refused(
        &scratch,
        &["compare", "1", "2", "--budget-svg", "no/such/folder/b.svg"],
        &[
            "--budget-svg no/such/folder/b.svg",
            "folder no/such/folder does not exist",
        ],
    );
    assert_eq!(db_rows(&scratch), before);
    assert!(!scratch.join("assay-out").exists());
}

/// Issue 30, item 9: error exits left `DB-wal` and `DB-shm` beside the
/// database (3 of 5 `promote ... --yes` failures). First the store's pool
/// was dropped, not closed, and the process could exit before SQLite's
/// connection threads closed their handles; then, with every command
/// closing its store, about one attempt in 35 under load still left them:
/// two of the pool's connections closed at once on two threads (one by
/// the close, one by sqlx's task that was still returning it to the
/// pool), and a connection deletes the files only if it closes alone
/// (`store::close_pool`). Each failure is tried several times, since what
/// it raced were threads.
#[test]
fn error_exits_leave_no_wal_files() {
    let scratch = Scratch::new();
    scratch.create_empty_db();
    let wal = scratch.join("assay.db-wal");
    let shm = scratch.join("assay.db-shm");
    assert!(!wal.exists() && !shm.exists());
    for args in [
        &["promote", "1", "0", "--yes"][..],
        &["run", "--resume", "77"],
        &["show", "9"],
        &["export", "9"],
        &["replay", "9"],
        &["compare", "1", "2"],
        &["suite", "show", "3"],
    ] {
        for attempt in 0..5 {
            let out = scratch.assay(args);
            assert_eq!(out.status.code(), Some(2), "{args:?}");
            assert!(
                !wal.exists() && !shm.exists(),
                "{args:?}, attempt {attempt}: left {} {}",
                if wal.exists() { "-wal" } else { "" },
                if shm.exists() { "-shm" } else { "" }
            );
        }
    }
}

/// Issue 30: `show 1 --db dirdb` said "no such database" where `run` says
/// "not a regular file"; both say the latter.
#[test]
fn a_database_that_is_a_folder_is_named_so_by_every_command() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.join("dirdb")).unwrap();
    let task = tiny();
    for args in [
        &["show", "1", "--db", "dirdb"][..],
        &["batches", "--db", "dirdb"],
        &["suite", "list", "--db", "dirdb"],
        &["run", "--resume", "1", "--db", "dirdb"],
        &["run", &task, "--db", "dirdb"],
    ] {
        refused(&scratch, args, &["--db ", "dirdb: not a regular file"]);
    }
    assert!(!scratch.join("dirdb-out").exists());
}

/// Issue 30: `--out afile` was refused as `.../afile/work`, a path the user
/// never typed.
#[test]
fn an_output_folder_that_is_a_file_is_named_as_given() {
    let scratch = Scratch::new();
    let file = scratch.write("afile", "x").canonicalize().unwrap();
    let task = tiny();
    let args = ["run", &task, "--out", "afile"];
    let out = with_default_work_dir(&scratch, &args);
    let line = assert_refused(
        &out,
        &args,
        &[&format!("--out {}: not a folder", file.display())],
    );
    assert!(!line.contains("afile/work"), "{line}");
    assert!(!scratch.join("cache").exists(), "a work dir was made");
    nothing_written(&scratch);
}

/// Issue 30: `task new --dir "weird dir/x"` printed its next commands
/// unquoted; pasted, they named two paths.
#[test]
fn task_new_quotes_the_commands_it_prints() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.join("weird dir")).unwrap();
    let out = scratch.assay_ok(&["task", "new", "roman", "--dir", "weird dir/x"]);
    assert!(
        out.contains("`assay task check 'weird dir/x'` and `assay run 'weird dir/x'`"),
        "{out}"
    );
    // What a shell makes of the printed line is the folder, whole.
    let line = out.lines().find(|l| l.starts_with("next:")).unwrap();
    let check = line.split('`').nth(1).unwrap();
    let words = std::process::Command::new("/bin/sh")
        .args([
            "-c",
            &format!("printf '%s\\n' {}", &check["assay ".len()..]),
        ])
        .output()
        .unwrap()
        .stdout;
    assert_eq!(
        String::from_utf8(words).unwrap(),
        "task\ncheck\nweird dir/x\n"
    );
}

/// A flag's value is read through the library's rules: a number out of its
/// bounds is one line naming the flag (clap's own words for no number at
/// all), and a closed set of names is listed in `--help`.
#[test]
fn flag_values_out_of_bounds_name_the_flag() {
    let scratch = Scratch::new();
    let out = scratch.assay(&["lane", "--jobs", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: --jobs: at least 1\n"
    );
    let out = scratch.assay(&["lane", "--jobs", "x"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("invalid value 'x' for '--jobs"), "{err}");
    let out = scratch.assay(&["suite", "compare", "1", "2", "-k", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: -k: must be at least 1\n"
    );
    let help = scratch.assay(&["run", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    let split = help
        .lines()
        .skip_while(|l| !l.contains("--split"))
        .take(12)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        split.contains("fixed") && split.contains("race"),
        "--help lists every value of --split: {split}"
    );
    nothing_written(&scratch);
}
