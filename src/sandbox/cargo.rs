//! The nested cargo's confinement: a Landlock ruleset that lets cargo, rustc,
//! the linker and the harness's proc macros read only the toolchain, the
//! registry sources, the harness, the package and the target directory, and
//! write only the package and the target directory.
//!
//! What is deliberately absent: the cargo home's own files (`config.toml`,
//! `credentials.toml`, `env`), everything under `/opt`, `/sys`, `/proc`,
//! `/etc` (but the dynamic loader's cache and configuration), and the
//! home directory. A candidate that names one of them in `include_str!`,
//! `include_bytes!`, `#[path]` or `#[doc = include_str!(..)]` (possible
//! only where the spec's `[policy]` relaxes the rule) gets a compile error
//! that says "Permission denied", and not a byte of the file.

use std::os::fd::{AsFd as _, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Context, Result};
use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr,
};

use super::landlock::{landlock_abi, restrict_self, TARGET_ABI};

/// Directories a confined cargo build may use.
#[derive(Debug, Clone)]
pub struct BuildPaths {
    /// Read-only: the harness crate (and any path dependency of ours), and
    /// the compile wrapper's executable.
    pub read: Vec<PathBuf>,
    /// Read and write: the generated package, the target directory.
    pub write: Vec<PathBuf>,
    /// Where the confined cargo's own cargo home goes (read and write).
    /// One per target directory, never one per package: cargo's
    /// fingerprints hold each dependency's source path, so two packages
    /// that saw the registry at two paths would rebuild every dependency in
    /// the shared target directory each time the other had built.
    pub cargo_home: PathBuf,
}

/// System paths the compiler and linker read: programs, libraries, the
/// dynamic loader's configuration, and randomness (rustc hashes with it).
const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/lib",
    "/lib64",
    "/bin",
    "/sbin",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/dev/urandom",
    "/dev/random",
];

/// What of the cargo home a build needs: the rustup proxies (`bin`), the
/// registry's index cache, downloaded crates and their unpacked sources,
/// and git checkouts of git dependencies. Not its configuration,
/// credentials or `env`.
const CARGO_HOME_READ: &[&str] = &["bin", "registry", "git"];

/// What of the cargo home the confined cargo sees in its own cargo home
/// ([`shadow_cargo_home`]), as links to the real one.
const CARGO_HOME_LINKED: &[&str] = &["registry", "git"];

/// Confines a nested cargo (and the rustc, linker and proc macros it runs)
/// with Landlock: read the toolchain, the registry, the system's compiler
/// and linker and `paths.read`; read and write `paths.write`. Temporary
/// files go to the first write directory's `tmp/`. The caller fetched the
/// dependencies before (`package` does, unconfined, with the package's
/// toolchain): the confined cargo runs offline. Without Landlock the
/// command is left as it is and a warning is logged once.
pub fn confine_cargo(cmd: &mut tokio::process::Command, paths: &BuildPaths) -> Result<()> {
    if landlock_abi() < 1 {
        static WARNED: OnceLock<()> = OnceLock::new();
        WARNED.get_or_init(|| {
            tracing::warn!(
                "sandbox: Landlock is not available; the probe's cargo and rustc are not \
                 confined (include_str! of any readable file compiles where the policy \
                 allows include macros)"
            )
        });
        return Ok(());
    }
    if let Some(first) = paths.write.first() {
        let tmp = first.join("tmp");
        std::fs::create_dir_all(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        cmd.env("TMPDIR", &tmp);
    }
    if let (Some(real), _) = homes() {
        cmd.env("CARGO_HOME", shadow_cargo_home(&paths.cargo_home, &real)?);
    }
    // The confined cargo can neither reach the network nor write the
    // registry; offline it says so at once instead of retrying, and it
    // never tries to clean the (read-only) cache.
    cmd.env("CARGO_NET_OFFLINE", "true");
    cmd.env("CARGO_CACHE_AUTO_CLEAN_FREQUENCY", "never");
    let fd = build_ruleset(&build_reads(paths), &build_writes(paths))?;
    // SAFETY: the closure runs between fork and exec and makes only
    // async-signal-safe system calls (prctl, landlock_restrict_self); it
    // owns the ruleset fd, which stays open until the command is dropped.
    unsafe {
        cmd.pre_exec(move || restrict_self(Some(fd.as_fd())));
    }
    Ok(())
}

/// The confined cargo's own cargo home at `shadow`: links to the real
/// one's registry and git checkouts, and nothing else, so cargo finds no
/// configuration, credentials or `env` to read (and would be denied them:
/// the real cargo home's own files are outside the ruleset). Its lock files
/// and last-use records are its own.
fn shadow_cargo_home(shadow: &Path, real: &Path) -> Result<PathBuf> {
    let shadow = shadow.to_path_buf();
    std::fs::create_dir_all(&shadow)
        .with_context(|| format!("cannot create {}", shadow.display()))?;
    for name in CARGO_HOME_LINKED {
        let (target, link) = (real.join(name), shadow.join(name));
        if target.exists() && std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(&target, &link)
                .with_context(|| format!("cannot link {}", link.display()))?;
        }
    }
    Ok(shadow)
}

/// The cargo home and rustup home as nested cargo will see them.
pub(super) fn homes() -> (Option<PathBuf>, Option<PathBuf>) {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".cargo")));
    let rustup_home = std::env::var_os("RUSTUP_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".rustup")));
    (cargo_home, rustup_home)
}

/// Everything a confined build may read (besides what it may write).
pub(super) fn build_reads(paths: &BuildPaths) -> Vec<PathBuf> {
    let (cargo_home, rustup_home) = homes();
    let mut read: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
    if let Some(ch) = &cargo_home {
        read.extend(CARGO_HOME_READ.iter().map(|d| ch.join(d)));
    }
    // The toolchains, and rustup's settings (which toolchain is default).
    read.extend(rustup_home);
    read.extend(paths.read.iter().cloned());
    // cargo reads `.cargo/config.toml` in every ancestor of the package,
    // and the `Cargo.toml` of every ancestor of a path dependency (looking
    // for its workspace); those files must stay readable or cargo stops.
    // Only those files, and never the cargo home's own configuration.
    for dir in paths.write.iter().chain(&paths.read) {
        for ancestor in dir.ancestors().skip(1) {
            let is_cargo_home = cargo_home
                .as_deref()
                .is_some_and(|ch| same_dir(ch, &ancestor.join(".cargo")));
            let mut files = vec![ancestor.join("Cargo.toml")];
            if !is_cargo_home {
                files.push(ancestor.join(".cargo/config.toml"));
                files.push(ancestor.join(".cargo/config"));
            }
            read.extend(files.into_iter().filter(|f| f.is_file()));
        }
    }
    // A rule needs an open file; what does not exist cannot be read anyway.
    read.retain(|p| p.exists());
    read
}

fn build_writes(paths: &BuildPaths) -> Vec<PathBuf> {
    let mut write: Vec<PathBuf> = paths.write.clone();
    write.push(paths.cargo_home.clone());
    write.push(PathBuf::from("/dev/null"));
    write
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// A ruleset reading `read` and reading and writing `write`, no TCP.
pub(super) fn build_ruleset(read: &[PathBuf], write: &[PathBuf]) -> Result<OwnedFd> {
    let abi = TARGET_ABI;
    let created = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))?
        .handle_access(AccessNet::from_all(abi))?
        .create()?
        .add_rules(path_beneath_rules(read, AccessFs::from_read(abi)))?
        .add_rules(path_beneath_rules(write, AccessFs::from_all(abi)))?;
    Option::<OwnedFd>::from(created).context("the kernel gave no Landlock ruleset")
}
