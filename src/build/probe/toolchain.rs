//! The toolchain the probe builds with, as that toolchain says it.
//!
//! Verdicts depend on the compiler (a lint that became an error, a new
//! trait impl), so every probe run records which one gave them. The
//! question goes through the same scrubbed environment, working directory
//! and `ASSAY_TOOLCHAIN` choice as the builds (`package::scrubbed_command`),
//! so rustup resolves the same toolchain for it as for cargo: asking the
//! `rustc` on our own PATH could name another one (`cargo +nightly run`
//! puts its toolchain first).

use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::build::package::{scrubbed_command, Package};

/// How long the version queries may take; rustup may have to read its
/// settings, nothing more.
const QUERY_TIMEOUT: Duration = Duration::from_secs(60);

/// What the probe's toolchain says it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Toolchain {
    /// `rustc -vV`, trimmed: release, commit, host, LLVM version.
    pub rustc: String,
    /// `cargo -V`, trimmed.
    pub cargo: String,
}

impl Toolchain {
    /// The first line of `rustc -vV` (`rustc 1.95.0 (59807616e 2026-04-14)`).
    pub fn rustc_release(&self) -> &str {
        self.rustc.lines().next().unwrap_or_default()
    }

    /// The host triple, as `rustc -vV` names it.
    pub fn host(&self) -> Option<&str> {
        self.rustc
            .lines()
            .find_map(|l| l.strip_prefix("host: "))
            .map(str::trim)
    }

    /// One line for reports: `rustc 1.95.0 (59807616e 2026-04-14)
    /// x86_64-unknown-linux-gnu, cargo 1.95.0 (f2d3ce0bd 2026-03-21)`.
    pub fn summary(&self) -> String {
        match self.host() {
            Some(host) => format!("{} {host}, {}", self.rustc_release(), self.cargo),
            None => format!("{}, {}", self.rustc_release(), self.cargo),
        }
    }
}

/// Asks the toolchain `package` builds with for its versions.
pub async fn toolchain(package: &Package) -> Result<Toolchain> {
    let rustc = ask(package, "rustc", "-vV").await?;
    let cargo = ask(package, "cargo", "-V").await?;
    Ok(Toolchain { rustc, cargo })
}

async fn ask(package: &Package, program: &str, flag: &str) -> Result<String> {
    let mut cmd = scrubbed_command(program, package.toolchain());
    cmd.arg(flag)
        .current_dir(package.dir())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(QUERY_TIMEOUT, cmd.output())
        .await
        .with_context(|| format!("`{program} {flag}` did not answer in {QUERY_TIMEOUT:?}"))?
        .with_context(|| format!("cannot start `{program} {flag}`"))?;
    if !out.status.success() {
        bail!(
            "`{program} {flag}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_line_names_release_host_and_cargo() {
        let t = Toolchain {
            rustc: "rustc 1.95.0 (59807616e 2026-04-14)\nbinary: rustc\n\
                    commit-hash: 59807616e1fa2540724bfbac14d7976d7e4a3860\n\
                    host: x86_64-unknown-linux-gnu\nrelease: 1.95.0\nLLVM version: 22.1.2"
                .into(),
            cargo: "cargo 1.95.0 (f2d3ce0bd 2026-03-21)".into(),
        };
        assert_eq!(
            t.summary(),
            "rustc 1.95.0 (59807616e 2026-04-14) x86_64-unknown-linux-gnu, \
             cargo 1.95.0 (f2d3ce0bd 2026-03-21)"
        );
        let bare = Toolchain {
            rustc: "rustc 1.0.0".into(),
            cargo: "cargo 1.0.0".into(),
        };
        assert_eq!(bare.summary(), "rustc 1.0.0, cargo 1.0.0");
    }

    fn tiny_package(toolchain: Option<String>) -> (tempfile::TempDir, Package) {
        let tiny = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny");
        let spec = crate::spec::Spec::load(&tiny).unwrap();
        let work = tempfile::tempdir().unwrap();
        let target = work.path().join("target");
        let package = Package::open_with_toolchain(&spec, work.path(), &target, toolchain).unwrap();
        (work, package)
    }

    /// The answer is the toolchain's own, in full.
    #[tokio::test]
    async fn the_default_toolchain_answers() {
        let (_work, package) = tiny_package(None);
        let t = toolchain(&package).await.unwrap();
        assert!(t.rustc.starts_with("rustc "), "{t:?}");
        assert!(t.host().is_some(), "{t:?}");
        assert!(t.rustc.contains("\nrelease: "), "{t:?}");
        assert!(t.cargo.starts_with("cargo "), "{t:?}");
    }

    /// A toolchain linked into rustup for one test: its `rustc` and `cargo`
    /// answer with made-up versions no real toolchain has, so an answer
    /// from the default toolchain cannot pass for its own. Unlinked on drop.
    struct LinkedToolchain {
        name: String,
        _dir: tempfile::TempDir,
    }

    impl LinkedToolchain {
        fn link() -> LinkedToolchain {
            use std::os::unix::fs::PermissionsExt;
            let dir = tempfile::tempdir().unwrap();
            // rustup links a directory with `bin` and `lib`.
            std::fs::create_dir(dir.path().join("lib")).unwrap();
            let bin = dir.path().join("bin");
            std::fs::create_dir(&bin).unwrap();
            for (tool, answer) in [
                (
                    "rustc",
                    "rustc 0.0.0-assay-linked\nhost: x86_64-assay-test\nrelease: 0.0.0",
                ),
                ("cargo", "cargo 0.0.0-assay-linked"),
            ] {
                let path = bin.join(tool);
                std::fs::write(&path, format!("#!/bin/sh\nprintf '{answer}\\n'\n")).unwrap();
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
            let name = format!("assay-test-{}", std::process::id());
            let linked = std::process::Command::new("rustup")
                .args(["toolchain", "link", &name])
                .arg(dir.path())
                .output()
                .unwrap();
            assert!(linked.status.success(), "{linked:?}");
            LinkedToolchain { name, _dir: dir }
        }
    }

    impl Drop for LinkedToolchain {
        fn drop(&mut self) {
            let _ = std::process::Command::new("rustup")
                .args(["toolchain", "uninstall", &self.name])
                .output();
        }
    }

    /// Under rustup, the toolchain chosen for the probe is the one asked,
    /// whatever toolchain runs the tests: a linked toolchain answers with its
    /// own made-up version, each installed one as `rustup run` says it
    /// would, and one that is not installed is an error, not another
    /// toolchain's answer.
    #[tokio::test]
    async fn the_chosen_toolchain_is_the_one_asked() {
        if std::process::Command::new("rustup")
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("no rustup: only the default toolchain can be asked");
            return;
        }
        let linked = LinkedToolchain::link();
        let (_work, package) = tiny_package(Some(linked.name.clone()));
        let asked = toolchain(&package).await.unwrap();
        assert_eq!(
            (asked.rustc.as_str(), asked.cargo.as_str()),
            (
                "rustc 0.0.0-assay-linked\nhost: x86_64-assay-test\nrelease: 0.0.0",
                "cargo 0.0.0-assay-linked"
            )
        );
        let list = std::process::Command::new("rustup")
            .args(["toolchain", "list"])
            .output()
            .unwrap();
        let names: Vec<String> = String::from_utf8_lossy(&list.stdout)
            .lines()
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .filter(|n| !n.starts_with("assay-test-"))
            .take(2)
            .collect();
        assert!(!names.is_empty(), "rustup lists no toolchain");
        for name in names {
            let (_work, package) = tiny_package(Some(name.clone()));
            let asked = toolchain(&package).await.unwrap();
            let direct = std::process::Command::new("rustup")
                .args(["run", &name, "rustc", "-vV"])
                .output()
                .unwrap();
            assert_eq!(
                asked.rustc,
                String::from_utf8_lossy(&direct.stdout).trim(),
                "{name}"
            );
        }
        let (_work, package) = tiny_package(Some("assay-no-such-toolchain".into()));
        assert!(toolchain(&package).await.is_err());
    }
}
