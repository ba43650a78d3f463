//! The environment nested cargo runs in: an allow-list of our variables,
//! the toolchain chosen explicitly, never inherited.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// Variables nested cargo may inherit. Everything else is dropped, which
/// covers every variable the issue names as poison for a warm target
/// directory or as a leak: `CARGO` and every `CARGO_*` but `CARGO_HOME`
/// (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, `CARGO_TARGET_DIR`,
/// `CARGO_BUILD_*`, `CARGO_ENCODED_RUSTFLAGS`...), `OUT_DIR`,
/// `RUSTUP_TOOLCHAIN`, `RUST_RECURSION_COUNT`, `CARGO_MAKEFLAGS`,
/// `MAKEFLAGS`, `MFLAGS`, `RUSTC`, `RUSTC_WRAPPER`,
/// `RUSTC_WORKSPACE_WRAPPER`, `RUSTFLAGS`, and any API key. An allow-list
/// rather than a deny-list, because a secret's name cannot be known in
/// advance. Cargo configuration belongs in `CARGO_HOME/config.toml`.
pub const INHERITED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "TMPDIR",
    "LANG",
    "LC_ALL",
    "USER",
];

/// The variable that picks the probe's toolchain explicitly (a rustup
/// toolchain name such as `stable` or `1.85.0`). Unset, rustup resolves its
/// own default for the work directory, the same whether `assay` was started
/// as a binary, by `cargo run` or by `cargo +nightly run`.
pub const TOOLCHAIN_VAR: &str = "ASSAY_TOOLCHAIN";

/// The toolchain [`TOOLCHAIN_VAR`] names, if any.
pub fn default_toolchain() -> Option<String> {
    std::env::var(TOOLCHAIN_VAR)
        .ok()
        .filter(|t| !t.trim().is_empty())
}

/// The one constructor of nested cargo commands: `cargo` with the scrubbed
/// environment of [`nested_env`], the toolchain pinned when one is given.
/// Anything that confines nested builds further wraps this function.
pub fn scrubbed_cargo(toolchain: Option<&str>) -> tokio::process::Command {
    scrubbed_command("cargo", toolchain)
}

/// `program` (`cargo`, `rustc`) in the environment nested cargo gets, so
/// that rustup resolves the same toolchain for it; the probe asks the
/// toolchain's versions this way.
pub fn scrubbed_command(program: &str, toolchain: Option<&str>) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(program);
    cmd.env_clear();
    cmd.envs(nested_env(std::env::vars_os(), toolchain));
    cmd
}

/// The environment nested cargo sees, given ours: [`INHERITED_ENV`] only,
/// with `PATH` stripped of rustup toolchain directories (a `cargo +nightly
/// run` may put one first, which would pick the toolchain behind our back),
/// `RUSTUP_TOOLCHAIN` set only when a toolchain was chosen, and cargo's
/// colour off. Pure, so the rules are tested directly.
pub fn nested_env(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    toolchain: Option<&str>,
) -> BTreeMap<OsString, OsString> {
    let parent: BTreeMap<OsString, OsString> = parent.into_iter().collect();
    let mut env = BTreeMap::new();
    for key in INHERITED_ENV {
        if let Some(value) = parent.get(OsStr::new(key)) {
            env.insert(OsString::from(key), value.clone());
        }
    }
    if let Some(path) = parent.get(OsStr::new("PATH")) {
        let rustup_home = parent
            .get(OsStr::new("RUSTUP_HOME"))
            .map(PathBuf::from)
            .or_else(|| {
                parent
                    .get(OsStr::new("HOME"))
                    .map(|h| Path::new(h).join(".rustup"))
            });
        let toolchains = rustup_home.map(|h| h.join("toolchains"));
        let kept: Vec<PathBuf> = std::env::split_paths(path)
            .filter(|dir| !toolchains.as_ref().is_some_and(|t| dir.starts_with(t)))
            .collect();
        if let Ok(joined) = std::env::join_paths(kept) {
            env.insert(OsString::from("PATH"), joined);
        }
    }
    if let Some(toolchain) = toolchain {
        env.insert(
            OsString::from("RUSTUP_TOOLCHAIN"),
            OsString::from(toolchain),
        );
    }
    env.insert(OsString::from("CARGO_TERM_COLOR"), OsString::from("never"));
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    /// What `cargo +stable run` under a rustup proxy, inside a build script
    /// or a make jobserver, with keys in the shell, hands to `assay`.
    const UNDER_CARGO_RUN: &[(&str, &str)] = &[
        ("PATH", "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/bin:/root/.cargo/bin:/usr/bin"),
        ("HOME", "/root"),
        ("CARGO_HOME", "/root/.cargo"),
        ("RUSTUP_HOME", "/root/.rustup"),
        ("CARGO", "/root/.rustup/toolchains/stable/bin/cargo"),
        ("CARGO_MANIFEST_DIR", "/src/assay"),
        ("CARGO_MANIFEST_PATH", "/src/assay/Cargo.toml"),
        ("CARGO_PKG_NAME", "assay"),
        ("CARGO_PKG_VERSION", "0.1.0"),
        ("CARGO_BIN_NAME", "assay"),
        ("CARGO_CRATE_NAME", "assay"),
        ("CARGO_TARGET_DIR", "/elsewhere"),
        ("CARGO_BUILD_TARGET_DIR", "/elsewhere"),
        ("CARGO_ENCODED_RUSTFLAGS", "-Cdebuginfo=2"),
        ("CARGO_MAKEFLAGS", "-j --jobserver-fds=3,4"),
        ("MAKEFLAGS", "-j4"),
        ("MFLAGS", "-j4"),
        ("OUT_DIR", "/src/assay/target/debug/build/x/out"),
        ("RUSTUP_TOOLCHAIN", "stable"),
        ("RUSTUP_TOOLCHAIN_SOURCE", "cli"),
        ("RUST_RECURSION_COUNT", "1"),
        ("RUSTC", "/usr/bin/rustc"),
        ("RUSTC_WRAPPER", "sccache"),
        ("RUSTC_WORKSPACE_WRAPPER", "clippy-driver"),
        ("RUSTFLAGS", "-Dwarnings"),
        ("OPENAI_API_KEY", "sk-secret"),
        ("ASSAY_POOL_KEY", "secret"),
        ("HF_TOKEN", "secret"),
        ("LANG", "C.UTF-8"),
    ];

    #[test]
    fn nothing_cargo_run_or_rustup_sets_reaches_nested_cargo() {
        let env = nested_env(env_of(UNDER_CARGO_RUN), None);
        let keys: Vec<&str> = env.keys().map(|k| k.to_str().unwrap()).collect();
        assert_eq!(
            keys,
            [
                "CARGO_HOME",
                "CARGO_TERM_COLOR",
                "HOME",
                "LANG",
                "PATH",
                "RUSTUP_HOME"
            ]
        );
        assert_eq!(env[OsStr::new("PATH")], "/root/.cargo/bin:/usr/bin");
        assert_eq!(env[OsStr::new("CARGO_HOME")], "/root/.cargo");
    }

    #[test]
    fn the_toolchain_is_set_only_when_chosen() {
        let env = nested_env(env_of(UNDER_CARGO_RUN), Some("1.85.0"));
        assert_eq!(env[OsStr::new("RUSTUP_TOOLCHAIN")], "1.85.0");
        let env = nested_env(env_of(&[("PATH", "/usr/bin")]), None);
        assert!(!env.contains_key(OsStr::new("RUSTUP_TOOLCHAIN")));
        assert_eq!(env[OsStr::new("PATH")], "/usr/bin");
    }

    #[test]
    fn toolchain_dirs_are_found_under_the_default_rustup_home() {
        let env = nested_env(
            env_of(&[
                ("HOME", "/home/u"),
                ("PATH", "/home/u/.rustup/toolchains/nightly-x/bin:/bin"),
            ]),
            None,
        );
        assert_eq!(env[OsStr::new("PATH")], "/bin");
    }
}
