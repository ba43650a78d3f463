//! What the package holds on disk and what its targets are named: the
//! module files candidates become, the targets' roots, the
//! runner crate, and the manifest that lists a build's targets.

use std::path::Path;

use anyhow::{Context, Result};

use super::manifest::Manifest;
use super::Package;
use crate::spec::Rule;

/// How a candidate's module is named inside the package.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum ModuleKey {
    Candidate(usize),
    Committed,
}

impl ModuleKey {
    pub fn name(&self) -> String {
        match self {
            ModuleKey::Candidate(i) => format!("c{i}"),
            ModuleKey::Committed => "committed".to_owned(),
        }
    }

    /// The module file, relative to the package.
    pub fn file(&self) -> String {
        format!("cands/{}.rs", self.name())
    }
}

impl Package {
    /// A tag unique to this package among those sharing its target
    /// directory (they are folders of one work directory, so their names
    /// differ), fit for a target name: the first 8 hex digits of the
    /// BLAKE3 hash of the folder's name. Executed targets carry it, because
    /// cargo copies each binary to one name in the target directory, shared
    /// by every package. Nothing stores it: every build names its targets
    /// afresh, so a tag that changes only leaves the old binaries unread.
    pub fn target_tag(&self) -> String {
        target_tag_of(&self.dir)
    }

    /// A new shared image's target name, unique among the package's
    /// images until it is opened again, and among the packages sharing its
    /// target directory (see [`Package::target_tag`]).
    pub fn next_image_target(&self) -> String {
        let n = self
            .images
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("img_{}_{n}", self.target_tag())
    }

    /// Clears the previous batch's sources and writes the runner crate and
    /// a manifest with no targets yet. The target directory and Cargo.lock
    /// stay (warm).
    pub(super) fn reset(&self) -> Result<()> {
        self.clear_sources()?;
        write_runner_crate(&self.dir.join("runner"))?;
        self.set_targets([], [])
    }

    /// Removes the last batch's or suite's sources.
    pub(super) fn clear_sources(&self) -> Result<()> {
        let cands = self.dir.join("cands");
        if cands.exists() {
            std::fs::remove_dir_all(&cands)
                .with_context(|| format!("cannot clear {}", cands.display()))?;
        }
        std::fs::create_dir_all(&cands)
            .with_context(|| format!("cannot create {}", cands.display()))
    }

    /// Writes a candidate's module file: its source unchanged, then the glue
    /// that brings the harness into scope and names the entry function.
    /// Unless the policy allows unsafe code, the file starts with
    /// `#![forbid(unsafe_code)]` on the source's first line (so line numbers
    /// stay the source's): rustc then refuses whatever the policy's scan
    /// missed, in macro expansions too, and nothing in the module can lower
    /// a `forbid`.
    pub fn write_module(&self, key: &ModuleKey, source: &str) -> Result<()> {
        let guard = if self.policy.allows(Rule::UnsafeCode) {
            ""
        } else {
            "#![forbid(unsafe_code)] "
        };
        let harness = self.harness()?;
        let glue = format!(
            "\n#[allow(unused_imports)]\nuse {h}::*;\npub(crate) const __ASSAY_ENTRY: {h}::Entry = {e};\n",
            h = harness.crate_name,
            e = harness.entry,
        );
        // The candidate is module `cN` of its image: its `crate::` paths
        // name its own items, so they are rebased onto that module.
        let source = crate::text::policy::rebase_crate_paths(source, &[&key.name()]);
        let mut text = String::with_capacity(guard.len() + source.len() + glue.len());
        text.push_str(guard);
        text.push_str(&source);
        text.push_str(&glue);
        write(&self.dir.join(key.file()), &text)
    }

    /// Writes a file of a unit beside the module files (`cands/NAME`): a
    /// suite program's module and its tests' module.
    pub fn write_cands_file(&self, name: &str, text: &str) -> Result<()> {
        write(&self.dir.join("cands").join(name), text)
    }

    /// Writes a binary target's root file. It sits beside the module files,
    /// so `#[path = "c3.rs"]` names a module and diagnostics read `cands/c3.rs`.
    pub fn write_bin(&self, name: &str, text: &str) -> Result<()> {
        write(&self.dir.join(format!("cands/{name}.main.rs")), text)
    }

    /// Writes an unlinked target's root file (`cands/c3.lib.rs`), beside
    /// the module files as [`Package::write_bin`] does.
    pub fn write_lib_root(&self, name: &str, text: &str) -> Result<()> {
        write(&self.dir.join(format!("cands/{name}.lib.rs")), text)
    }

    /// Rewrites the manifest with these binary targets.
    pub fn set_bins<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Result<()> {
        self.set_targets(names, [])
    }

    /// Adds these binary targets to the manifest, beside those of builds
    /// still running: each build selects its own (`--bin`), so builds of
    /// one package run side by side, each in a target slot of its own.
    /// A build's targets leave the list when its cargo has exited.
    pub fn add_bins<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Result<()> {
        let mut listed = self.listed();
        for name in names {
            if !listed.bins.iter().any(|b| b == name) {
                listed.bins.push(name.to_owned());
            }
        }
        self.write_manifest(&listed)
    }

    /// Takes `names` off the list of targets (the manifest is rewritten
    /// at the next build that lists its own).
    pub(super) fn unlist<'a>(&self, names: impl IntoIterator<Item = &'a String>) {
        let mut listed = self.listed();
        for name in names {
            listed.bins.retain(|b| b != name);
            listed.libs.retain(|l| l != name);
        }
    }

    fn listed(&self) -> std::sync::MutexGuard<'_, Listed> {
        self.listed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes the manifest with the targets `listed`, whole at once: a
    /// cargo starting beside reads the old one or the new, never half.
    fn write_manifest(&self, listed: &Listed) -> Result<()> {
        let manifest = self
            .manifest
            .with_targets(
                listed.bins.iter().map(String::as_str),
                listed.libs.iter().map(String::as_str),
            )
            .render()?;
        let path = self.dir.join("Cargo.toml");
        let tmp = self.dir.join("Cargo.toml.tmp");
        write(&tmp, &manifest)?;
        std::fs::rename(&tmp, &path).with_context(|| format!("cannot replace {}", path.display()))
    }

    /// Rewrites the manifest with these binary targets (root
    /// `cands/NAME.main.rs`) and these unlinked targets (root
    /// `cands/NAME.lib.rs`): examples of crate type `rlib`, which rustc
    /// compiles through code generation into an rlib but never links.
    pub fn set_targets<'a, 'b>(
        &self,
        bins: impl IntoIterator<Item = &'a str>,
        libs: impl IntoIterator<Item = &'b str>,
    ) -> Result<()> {
        let mut listed = self.listed();
        *listed = Listed {
            bins: bins.into_iter().map(str::to_owned).collect(),
            libs: libs.into_iter().map(str::to_owned).collect(),
        };
        self.write_manifest(&listed)
    }
}

/// The targets the manifest lists, in the order they were given.
#[derive(Debug, Default)]
pub(super) struct Listed {
    bins: Vec<String>,
    libs: Vec<String>,
}

/// [`Package::target_tag`] of the package in `dir`.
fn target_tag_of(dir: &Path) -> String {
    let name = dir.file_name().unwrap_or_default();
    blake3::hash(name.as_encoded_bytes()).to_hex()[..8].to_owned()
}

/// Writes the runner every scoring image links (`runner_lib.rs`, beside this file),
/// only where its text changed, so cargo keeps its build fresh.
fn write_runner_crate(dir: &Path) -> Result<()> {
    const LIB: &str = include_str!("runner_lib.rs");
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let manifest = Manifest::runner().render()?;
    for (name, text) in [("Cargo.toml", manifest.as_str()), ("lib.rs", LIB)] {
        let path = dir.join(name);
        if std::fs::read_to_string(&path).is_ok_and(|old| old == text) {
            continue;
        }
        write(&path, text)?;
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: on a fresh machine the confined cargo was denied creating
    /// the target directory beside itself, and every first batch failed.
    #[test]
    fn packages_of_one_work_directory_tag_their_targets_apart() {
        let work = Path::new("/w");
        // Every build slot of a package is a folder of its own, sharing
        // target directories with the others' (`slots`): their images'
        // names must differ too.
        let tags: Vec<String> = ["tiny", "tiny-spin", "tiny_spin", "absolute", "suite"]
            .iter()
            .flat_map(|t| (0..4).map(move |k| super::super::slots::slot_path(&work.join(t), k)))
            .map(|dir| target_tag_of(&dir))
            .collect();
        assert_eq!(tags.len(), 20);
        for (i, a) in tags.iter().enumerate() {
            assert!(
                a.len() == 8 && a.bytes().all(|b| b.is_ascii_hexdigit()),
                "{a}"
            );
            assert!(tags[i + 1..].iter().all(|b| b != a), "{tags:?}");
        }
        // Stable: the same package keeps its targets, so its builds stay warm.
        assert_eq!(
            target_tag_of(&work.join("tiny")),
            target_tag_of(Path::new("/x/tiny"))
        );
    }

    /// Builds side by side list their targets together: each cargo parses
    /// a manifest naming its own, and none names a finished build's.
    #[test]
    fn builds_side_by_side_each_find_their_targets_in_the_manifest() {
        let work = tempfile::tempdir().unwrap();
        let package = Package::open_suite(
            work.path(),
            &work.path().join("target"),
            crate::spec::Policy::default(),
            crate::spec::CompileLimits::default(),
            1 << 30,
            crate::spec::Edition::default(),
        )
        .unwrap();
        let bins = || -> Vec<String> {
            let text = std::fs::read_to_string(package.dir().join("Cargo.toml")).unwrap();
            let manifest: toml::Table = text.parse().unwrap();
            manifest
                .get("bin")
                .and_then(|b| b.as_array())
                .map(|bins| {
                    bins.iter()
                        .map(|b| b["name"].as_str().unwrap().to_owned())
                        .collect()
                })
                .unwrap_or_default()
        };
        package.add_bins(["img_a", "img_b"]).unwrap();
        package.add_bins(["img_c", "img_a"]).unwrap();
        assert_eq!(bins(), ["img_a", "img_b", "img_c"]);
        package.unlist(&["img_a".to_owned(), "img_b".to_owned()]);
        package.add_bins(["img_d"]).unwrap();
        assert_eq!(bins(), ["img_c", "img_d"]);
        package.set_bins(["judge"]).unwrap();
        assert_eq!(bins(), ["judge"]);
        assert!(!package.dir().join("Cargo.toml.tmp").exists());
    }
}
