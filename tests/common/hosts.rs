//! A second host on this machine for tests of lanes that share nothing
//! but the database (issue 36): a lane started in a mount namespace of
//! its own (`unshare --mount --propagation private`), where the folders
//! this test process names are hidden under empty tmpfs mounts, running
//! its own copy of the binary from a folder of its own.
//!
//! What host B sees: the root file system but the hidden folders (the
//! checkout, the cargo target directory the test binary and `assay` live
//! in, and whatever folders the test names: its queueing folder, its
//! scratch folders), its own folder (`bin/assay`, `home/`, `work/`,
//! `out/`), and the toolchain where rustup put it (`CARGO_HOME`,
//! `RUSTUP_HOME`, shared: a build machine has a toolchain of its own,
//! and this one's is that). It shares the network namespace, and reaches
//! PostgreSQL on 127.0.0.1. Its environment is cleared but `PATH`, the
//! toolchain's variables, `HOME` (its own) and `ASSAY_DB`.
//!
//! The namespace needs CAP_SYS_ADMIN (root, as on this machine and CI's):
//! where `unshare` is refused, [`HostB::wait`] fails saying so; the test
//! never passes without the second host.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The script host B runs in its namespace: hide, prove it, run the lane.
/// `$@` are the folders to hide; `$ASSAY_HOST_B` is B's own folder.
const HOST_B: &str = r#"
set -eu
b=$ASSAY_HOST_B
for d in "$@"; do
    mount -t tmpfs -o size=64k,mode=0755 assay-host-a "$d"
done
for d in "$@"; do
    if [ -n "$(ls -A "$d")" ]; then
        echo "host b: $d is not hidden" >&2
        exit 97
    fi
done
if [ -e "$ASSAY_HOST_A_BINARY" ]; then
    echo "host b: host a's binary $ASSAY_HOST_A_BINARY is visible" >&2
    exit 97
fi
printf '%s\n' "$@" > "$b/hidden"
cd "$b"
exec "$b/bin/assay" lane --lane b --until-empty --lease 3 --out "$b/out" --work-dir "$b/work"
"#;

/// A lane running as host B.
pub struct HostB {
    /// B's own folder (removed with it).
    pub dir: tempfile::TempDir,
    child: Child,
    hidden: Vec<PathBuf>,
}

impl HostB {
    /// Starts a lane draining `db` as host B, with `hide` (and the
    /// checkout and the target directory) hidden from it.
    pub fn start(db: &str, hide: &[&Path]) -> HostB {
        let dir = tempfile::Builder::new()
            .prefix("assay-host-b-")
            .tempdir()
            .unwrap();
        for sub in ["bin", "home", "work", "out"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        // Copied by a child process: no thread of this test process holds
        // the file open for writing when B executes it (ETXTBSY).
        let bin = dir.path().join("bin/assay");
        let copied = Command::new("cp")
            .arg(env!("CARGO_BIN_EXE_assay"))
            .arg(&bin)
            .status()
            .unwrap();
        assert!(copied.success(), "cannot copy the binary for host b");

        let hidden = hidden_folders(hide);
        for d in &hidden {
            assert!(
                !dir.path().starts_with(d),
                "host b's own folder {} is inside {}, which it must not see",
                dir.path().display(),
                d.display()
            );
        }
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap();
        let toolchain_var = |name: &str, default: &str| {
            std::env::var_os(name).unwrap_or_else(|| home.join(default).into_os_string())
        };
        let log = std::fs::File::create(dir.path().join("lane.log")).unwrap();
        let mut cmd = Command::new("unshare");
        cmd.args([
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            HOST_B,
        ])
        .arg("host-b")
        .args(&hidden)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.path().join("home"))
        .env("CARGO_HOME", toolchain_var("CARGO_HOME", ".cargo"))
        .env("RUSTUP_HOME", toolchain_var("RUSTUP_HOME", ".rustup"))
        .env("ASSAY_DB", db)
        .env("ASSAY_HOST_B", dir.path())
        .env("ASSAY_HOST_A_BINARY", env!("CARGO_BIN_EXE_assay"))
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
        // The toolchain host a's runs use, if one was chosen.
        if let Some(chosen) = std::env::var_os("RUSTUP_TOOLCHAIN") {
            cmd.env("RUSTUP_TOOLCHAIN", chosen);
        }
        let child = cmd.spawn().expect("unshare starts");
        HostB { dir, child, hidden }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// B's output folder (its batches' error files).
    pub fn out(&self) -> PathBuf {
        self.path().join("out")
    }

    /// Waits for the lane to drain the queue and end; fails loudly if the
    /// namespace was refused, the hiding did not hold, or the lane failed.
    pub fn wait(&mut self, limit: Duration) {
        let start = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "host b's lane did not end within {limit:?}:\n{}",
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        let proof = self.path().join("hidden");
        assert!(
            proof.is_file(),
            "host b never ran: `unshare --mount` or its tmpfs mounts were refused \
             (the two-hosts test needs CAP_SYS_ADMIN; it does not pass without them), \
             exit {status}:\n{}",
            self.log_tail()
        );
        let listed = std::fs::read_to_string(&proof).unwrap();
        let want: String = self
            .hidden
            .iter()
            .map(|d| format!("{}\n", d.display()))
            .collect();
        assert_eq!(listed, want, "host b hid other folders than asked");
        assert!(
            status.success(),
            "host b's lane failed ({status}):\n{}",
            self.log_tail()
        );
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.path().join("lane.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for HostB {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The folders to hide, absolute: `hide`, the checkout and the target
/// directory, leaving out any inside another (a mount over the outer one
/// hides it, and its path no longer exists to mount on).
fn hidden_folders(hide: &[&Path]) -> Vec<PathBuf> {
    let binary = Path::new(env!("CARGO_BIN_EXE_assay"));
    // target/<profile>/assay: the target directory is two folders up.
    let target = binary.parent().and_then(Path::parent).unwrap();
    let mut all: Vec<PathBuf> = [
        super::repo(),
        target,
        Path::new(env!("CARGO_TARGET_TMPDIR")),
    ]
    .into_iter()
    .chain(hide.iter().copied())
    .map(|p| std::fs::canonicalize(p).unwrap())
    .collect();
    all.sort();
    all.dedup();
    let mut outermost: Vec<PathBuf> = Vec::new();
    for p in all {
        if !outermost.iter().any(|o| p.starts_with(o)) {
            outermost.push(p);
        }
    }
    outermost
}
