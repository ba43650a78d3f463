//! Skipping the score build's cargo when nothing it reads has changed.
//!
//! Every batch builds the judge and the committed candidate's image,
//! which between batches of a task are almost always fresh: cargo then
//! only starts, reads the manifest and checks its fingerprints, which
//! costs more CPU than the rest of a warm score build. A stamp in the
//! package records, for the last build of both, a hash of everything the
//! build reads and a hash of each binary it gave; when both still hold,
//! the binaries are used as they are.
//!
//! What the build reads: the toolchain (`rustc -vV`, `cargo -V`), the
//! code of assay's that runs cargo, the package's manifest and lock file,
//! the harness's and the runner's manifests, and every source file rustc
//! read for either binary (cargo's dep-info beside each, which lists the
//! path dependencies' files and whatever `include_str!` pulled in).
//! Registry dependencies are fixed by the lock file. A binary whose bytes are not the ones recorded (another
//! build put something else under its name) is never used: the stamp is
//! a shortcut past cargo's freshness check, never a way round a build.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::build::package::Package;
use crate::build::probe::Toolchain;

/// The stamp's file in the package.
const STAMP: &str = "score-build.stamp.json";

/// Bumped whenever what a stamp covers changes meaning.
const VERSION: &str = concat!("assay score stamp 1, assay ", env!("CARGO_PKG_VERSION"));

/// The code that decides how nested cargo runs (its arguments, its
/// environment, the manifests it reads): a build of assay that changes it
/// may build other binaries from the same files, so its stamps are not
/// this build's.
const HOW_CARGO_RUNS: [&str; 3] = [
    include_str!("../build/package/cargo.rs"),
    include_str!("../build/package/env.rs"),
    include_str!("../build/package/manifest.rs"),
];

/// The last build of the judge and the committed image.
#[derive(Debug, Serialize, Deserialize)]
struct Stamp {
    /// The hash of what that build read ([`inputs`]).
    inputs: String,
    artifacts: Vec<Artifact>,
}

/// A binary the stamped build gave.
#[derive(Debug, Serialize, Deserialize, Clone)]
struct Artifact {
    target: String,
    path: PathBuf,
    blake3: String,
}

/// The binaries of `targets` (target name, path), when the stamp says the
/// last build of exactly these targets read what they would read now and
/// each binary is the one it gave; `None` when cargo must decide.
pub(super) fn reuse(
    package: &Package,
    toolchain: &Toolchain,
    targets: &[String],
) -> Option<Vec<(String, PathBuf)>> {
    let text = std::fs::read_to_string(package.dir().join(STAMP)).ok()?;
    let stamp: Stamp = serde_json::from_str(&text).ok()?;
    let stamped: Vec<&str> = stamp.artifacts.iter().map(|a| a.target.as_str()).collect();
    if stamped != targets.iter().map(String::as_str).collect::<Vec<_>>() {
        return None;
    }
    let paths: Vec<(String, PathBuf)> = stamp
        .artifacts
        .iter()
        .map(|a| (a.target.clone(), a.path.clone()))
        .collect();
    if inputs(package, toolchain, &paths)? != stamp.inputs {
        return None;
    }
    let intact = stamp
        .artifacts
        .iter()
        .all(|a| hash_file(&a.path).is_some_and(|h| h == a.blake3));
    intact.then_some(paths)
}

/// Records that `built` (target name, path; the build's whole selection)
/// came from what the package holds now. A stamp that cannot be written
/// costs only the next build's shortcut.
pub(super) fn record(package: &Package, toolchain: &Toolchain, built: &[(String, PathBuf)]) {
    let stamp = (|| {
        let artifacts = built
            .iter()
            .map(|(target, path)| {
                Some(Artifact {
                    target: target.clone(),
                    path: path.clone(),
                    blake3: hash_file(path)?,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Stamp {
            inputs: inputs(package, toolchain, built)?,
            artifacts,
        })
    })();
    let path = package.dir().join(STAMP);
    // A torn write is no danger: a stamp that does not parse is no stamp.
    let written = match stamp {
        Some(stamp) => serde_json::to_vec(&stamp)
            .map_err(std::io::Error::other)
            .and_then(|bytes| std::fs::write(&path, bytes)),
        None => std::fs::remove_file(&path).or_else(ignore_missing),
    };
    if let Err(e) = written {
        tracing::debug!(
            "cannot write the score build's stamp {}: {e}",
            path.display()
        );
    }
}

/// Forgets the stamp: the next score build asks cargo.
pub(super) fn forget(package: &Package) {
    let path = package.dir().join(STAMP);
    if let Err(e) = std::fs::remove_file(&path).or_else(ignore_missing) {
        tracing::debug!("cannot remove {}: {e}", path.display());
    }
}

fn ignore_missing(e: std::io::Error) -> std::io::Result<()> {
    if e.kind() == std::io::ErrorKind::NotFound {
        Ok(())
    } else {
        Err(e)
    }
}

/// A hash of everything a build of `artifacts` reads, `None` when any of
/// it cannot be read (a dep-info file gone, say).
fn inputs(
    package: &Package,
    toolchain: &Toolchain,
    artifacts: &[(String, PathBuf)],
) -> Option<String> {
    let mut hasher = blake3::Hasher::new();
    let mut part = |name: &str, bytes: &[u8]| {
        // Length-prefixed, so no two different inputs hash alike.
        for piece in [name.as_bytes(), bytes] {
            hasher.update(&(piece.len() as u64).to_le_bytes());
            hasher.update(piece);
        }
    };
    part("version", VERSION.as_bytes());
    for code in HOW_CARGO_RUNS {
        part("how cargo runs", code.as_bytes());
    }
    part("rustc", toolchain.rustc.as_bytes());
    part("cargo", toolchain.cargo.as_bytes());
    part(
        "target dir",
        package.target_dir().as_os_str().as_encoded_bytes(),
    );
    let mut manifests = vec![
        package.dir().join("Cargo.toml"),
        package.dir().join("Cargo.lock"),
        package.dir().join("runner/Cargo.toml"),
    ];
    manifests.extend(package.harness_dir().map(|d| d.join("Cargo.toml")));
    for file in manifests {
        part(&file.to_string_lossy(), &std::fs::read(&file).ok()?);
    }
    for (target, path) in artifacts {
        part("target", target.as_bytes());
        for source in dep_info(path)? {
            part(&source.to_string_lossy(), &std::fs::read(&source).ok()?);
        }
    }
    Some(hasher.finalize().to_hex().to_string())
}

/// The source files cargo's dep-info beside `binary` (`name.d`) lists.
fn dep_info(binary: &Path) -> Option<Vec<PathBuf>> {
    let text = std::fs::read_to_string(binary.with_extension("d")).ok()?;
    let (_, sources) = text.split_once(": ")?;
    Some(split_make_words(sources).map(PathBuf::from).collect())
}

/// The words of a makefile rule's prerequisites, as cargo writes them
/// (a space inside a path escaped as `\ `).
fn split_make_words(text: &str) -> impl Iterator<Item = String> + '_ {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut chars = text.trim().chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => word.extend(chars.next()),
            c if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words.into_iter()
}

fn hash_file(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    Some(blake3::hash(&bytes).to_hex().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn make_words_keep_escaped_spaces() {
        let words: Vec<String> = split_make_words(" /a/b.rs /c\\ d/e.rs\n").collect();
        assert_eq!(words, ["/a/b.rs", "/c d/e.rs"]);
    }
}
