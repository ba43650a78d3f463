//! Issue 25 §1: a batch failed with "cannot start
//! …/assay-scorer.XXXX/3-c42: Text file busy". Linux refuses to exec a
//! file that any process holds open for writing (ETXTBSY), and assay wrote
//! its copies of images in its own process while other threads forked
//! confined children: each such child held the copy's write descriptor
//! until its own exec, after its cgroups, network namespace, uid drop and
//! Landlock.
//!
//! The test does what a batch's scoring does, many times over, on four
//! threads: each image is copied into a batch folder as cargo would report
//! it (`place_executable`, as `Scoring::run_as_built` does) and run at once
//! (`run_program`, which starts it as every scoring run starts:
//! `run::start`, and as root `Sandbox::runnable_exe`'s own copy when the
//! run's user cannot reach the folder), while other runs keep starting
//! confined children beside it. Every run must start and pass. The image
//! is the system's `true` grown to a scoring image's size: what it runs
//! does not matter, only how it got where it is exec'd.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use assay::sandbox::{place_executable, Sandbox};
use assay::score::{run_program, RunLimits};
use assay::suite::CaseEnd;

/// Tasks that copy images and run each once.
const PLACERS: usize = 3;
/// Images each of them copies.
const IMAGES_EACH: usize = 100;
/// Tasks that keep starting runs of an image nobody copies meanwhile.
const STARTERS: usize = 3;

/// Bytes of a scoring image (the bundled tasks' are 500 to 650 KB): the
/// window a copy leaves open lasts as long as it writes.
const IMAGE_BYTES: usize = 640 << 10;

/// An executable of the system's: `true` wherever it lives.
fn system_true() -> PathBuf {
    ["/usr/bin/true", "/bin/true"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("a `true` binary")
}

/// `true` grown to a scoring image's size, at `path`: the kernel maps
/// what the ELF headers name and ignores the bytes after it.
fn image_sized_true(path: &Path) {
    let mut bytes = std::fs::read(system_true()).unwrap();
    bytes.resize(bytes.len().max(IMAGE_BYTES), 0);
    std::fs::write(path, bytes).unwrap();
}

/// Runs `image` as a suite program's whole run (module `c0`); an error is the host's
/// (it could not be started), with the image's path in it.
async fn run(image: &Path, sandbox: &Sandbox) -> anyhow::Result<CaseEnd> {
    // A wall limit no loaded machine reaches: `true` exits at once.
    let limits = RunLimits::with_wall(Duration::from_secs(60));
    Ok(
        run_program(image, &["c0", "whole"], false, &limits, sandbox)
            .await?
            .end,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn images_copied_while_children_start_are_always_exec_d() {
    let tmp = tempfile::tempdir().unwrap();
    // Written before any child is forked, and never exec'd itself.
    let source = Arc::new(tmp.path().join("true"));
    image_sized_true(&source);
    let sandbox = Arc::new(Sandbox::probe(8));
    // Two batch folders: one the run's user can reach, whose images are
    // exec'd where they were copied, and one it cannot, whose images (as
    // root) are exec'd from the sandbox's own copy. Not root, both are
    // exec'd where they were copied.
    let open = tmp.path().join("open");
    let private = tmp.path().join("private");
    for (dir, mode) in [(tmp.path(), 0o755), (&open, 0o755), (&private, 0o700)] {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let placing = Arc::new(AtomicBool::new(true));

    let mut starters = tokio::task::JoinSet::new();
    for _ in 0..STARTERS {
        let (sandbox, placing) = (sandbox.clone(), placing.clone());
        starters.spawn(async move {
            let mut started = 0;
            while placing.load(Ordering::Relaxed) {
                let end = run(&system_true(), &sandbox).await.unwrap();
                assert_eq!(end, CaseEnd::Passed);
                started += 1;
            }
            started
        });
    }
    let mut placers = tokio::task::JoinSet::new();
    for p in 0..PLACERS {
        let (source, sandbox) = (source.clone(), sandbox.clone());
        let folders = [open.clone(), private.clone()];
        placers.spawn(async move {
            let mut failed = Vec::new();
            for i in 0..IMAGES_EACH {
                let image = folders[i % 2].join(format!("c{}", p * IMAGES_EACH + i));
                place_executable(&source, &image).unwrap();
                match run(&image, &sandbox).await {
                    Ok(end) => assert_eq!(end, CaseEnd::Passed, "{}", image.display()),
                    Err(e) => failed.push(format!("{e:#}")),
                }
            }
            failed
        });
    }
    let mut failed = Vec::new();
    while let Some(done) = placers.join_next().await {
        failed.extend(done.unwrap());
    }
    placing.store(false, Ordering::Relaxed);
    let mut beside = 0;
    while let Some(done) = starters.join_next().await {
        beside += done.unwrap();
    }
    // The runs beside them are what forks while images are copied.
    assert!(beside > 0, "no run started beside the copies");
    assert!(
        failed.is_empty(),
        "{} of {} images could not be started ({beside} runs beside them); the first: {}",
        failed.len(),
        PLACERS * IMAGES_EACH,
        failed[0]
    );
}
