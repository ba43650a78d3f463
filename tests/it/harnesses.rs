//! The bundled tasks' harness crates carry their own unit tests (case
//! loading, comparison); run them as part of the suite so a broken oracle
//! harness cannot hide behind a green assay.

use std::path::Path;
use std::process::Command;

fn harness_tests_pass(task: &str) {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("specs")
        .join(task)
        .join("harness/Cargo.toml");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("harness-target");
    let out = Command::new(env!("CARGO"))
        .args(["test", "--release", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target)
        // The harness is its own workspace: no lock file is written into specs/.
        .env("CARGO_TERM_COLOR", "never")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{task} harness tests failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let passed: usize = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("test result: ok. "))
        .filter_map(|rest| rest.split(' ').next()?.parse::<usize>().ok())
        .sum();
    assert!(passed > 0, "{task}: no harness test ran:\n{stdout}");
}

#[test]
fn absolute_harness() {
    harness_tests_pass("absolute");
}

#[test]
fn shellwords_harness() {
    harness_tests_pass("shellwords");
}
