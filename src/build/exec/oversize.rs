//! An image one unit makes unrunnable for all: a unit's huge static (a
//! gigabyte of zeros in `.bss` costs nothing to compile or link) is mapped
//! into every process started from the image, so every unit sharing it
//! would fail to start under the run's address-space limit. Such units are
//! found before their image-mates run: an image whose mapped size passes a
//! fraction of the limit has its symbols summed per unit (a symbol's
//! demangled path starts with its unit's module), and the largest units
//! are taken out, to be built alone and get their own verdicts there,
//! until the rest fits. Several large units that pass the limit only
//! together are taken out the same way; bytes no unit's symbol accounts
//! for (an anonymous constant, a name the demangler cannot place) leave
//! the image too large with nobody to take out, and then the image's units
//! are split in halves until each image fits or holds one unit.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use object::{Object, ObjectSegment, ObjectSymbol};

use crate::build::package::ModuleKey;

/// Of the run's address-space limit, what one image may map: honest
/// images map a few megabytes.
const IMAGE_SHARE: u64 = 4;

/// Of the run's address-space limit, the least a unit's symbols take for
/// it to be taken out by name; below it, an image still too large is
/// halved instead (an honest unit is a few kilobytes, and taking out
/// hundreds of them one by one would build each alone).
const UNIT_SHARE: u64 = 64;

/// What an image's size asks of the build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Oversize {
    /// Every unit may run from it.
    Fits,
    /// These units, built alone, leave an image that fits.
    TakeOut(Vec<ModuleKey>),
    /// Too large, and its named units do not account for it: split them
    /// in halves.
    Halve,
}

/// What the image at `path` asks, for a run's limit of `address_space`
/// bytes. `owner` says which unit a symbol's module path (`c3`) is.
pub fn check_image(
    path: &Path,
    address_space: u64,
    owner: impl Fn(&str) -> Option<ModuleKey>,
) -> Result<Oversize> {
    let data = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let file = object::File::parse(&*data)
        .with_context(|| format!("cannot read {} as an executable", path.display()))?;
    let mapped: u64 = file.segments().map(|s| s.size()).sum();
    if mapped <= address_space / IMAGE_SHARE {
        return Ok(Oversize::Fits);
    }
    let mut by_unit: BTreeMap<ModuleKey, u64> = BTreeMap::new();
    for symbol in file.symbols() {
        let Ok(name) = symbol.name() else { continue };
        let demangled = rustc_demangle::demangle(name).to_string();
        // `crate::c3::BIG`: the unit is the path's second segment.
        let Some(module) = demangled.split("::").nth(1) else {
            continue;
        };
        if let Some(key) = owner(module) {
            *by_unit.entry(key).or_default() += symbol.size();
        }
    }
    Ok(decide(mapped, by_unit, address_space))
}

/// The largest units first, while the image is too large and each is
/// large enough to name; `Halve` when that is not enough.
fn decide(mapped: u64, by_unit: BTreeMap<ModuleKey, u64>, address_space: u64) -> Oversize {
    let fits = address_space / IMAGE_SHARE;
    let mut units: Vec<(ModuleKey, u64)> = by_unit.into_iter().collect();
    units.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut left = mapped;
    let mut out = Vec::new();
    for (key, size) in units {
        if left <= fits || size <= address_space / UNIT_SHARE {
            break;
        }
        left = left.saturating_sub(size);
        out.push(key);
    }
    match (left <= fits, out.is_empty()) {
        (true, true) => Oversize::Fits,
        (true, false) => Oversize::TakeOut(out),
        (false, _) => Oversize::Halve,
    }
}

/// `c3` is candidate 3's module, `committed` the committed candidate's.
pub fn module_owner(module: &str) -> Option<ModuleKey> {
    if module == "committed" {
        return Some(ModuleKey::Committed);
    }
    let n = module.strip_prefix('c')?;
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .then(|| n.parse().ok().map(ModuleKey::Candidate))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_name_their_unit() {
        assert_eq!(module_owner("c12"), Some(ModuleKey::Candidate(12)));
        assert_eq!(module_owner("committed"), Some(ModuleKey::Committed));
        assert_eq!(module_owner("c"), None);
        assert_eq!(module_owner("core"), None);
        assert_eq!(module_owner("std"), None);
    }

    #[test]
    fn an_image_that_maps_little_is_not_looked_into() {
        // This test's own binary maps far less than 64 GiB.
        let me = std::env::current_exe().unwrap();
        assert_eq!(
            check_image(&me, 64 << 30, module_owner).unwrap(),
            Oversize::Fits
        );
    }

    const MIB: u64 = 1 << 20;

    fn units(sizes: &[(usize, u64)]) -> BTreeMap<ModuleKey, u64> {
        sizes
            .iter()
            .map(|&(n, size)| (ModuleKey::Candidate(n), size))
            .collect()
    }

    #[test]
    fn one_huge_unit_is_taken_out() {
        let by_unit = units(&[(0, MIB / 100), (1, 1024 * MIB), (2, MIB / 100)]);
        assert_eq!(
            decide(1030 * MIB, by_unit, 1024 * MIB),
            Oversize::TakeOut(vec![ModuleKey::Candidate(1)])
        );
    }

    #[test]
    fn units_too_large_only_together_are_taken_out_largest_first() {
        // Nine units of 120 MiB: none passes an eighth of 1 GiB, together
        // they pass the whole of it.
        let mut sizes: Vec<(usize, u64)> = (0..9).map(|n| (n, 120 * MIB)).collect();
        sizes[4].1 = 121 * MIB;
        sizes.push((9, MIB / 100));
        let Oversize::TakeOut(out) = decide(1090 * MIB, units(&sizes), 1024 * MIB) else {
            panic!("taken out by name");
        };
        assert_eq!(out[0], ModuleKey::Candidate(4), "the largest first");
        assert_eq!(out.len(), 7, "until the rest maps at most 256 MiB");
        assert!(!out.contains(&ModuleKey::Candidate(9)));
    }

    #[test]
    fn bytes_nobody_owns_halve_the_image() {
        let by_unit = units(&[(0, MIB / 100), (1, MIB / 100)]);
        assert_eq!(decide(900 * MIB, by_unit, 1024 * MIB), Oversize::Halve);
        // Named units that do not bring it under: halved too.
        let by_unit = units(&[(0, 100 * MIB), (1, MIB / 100)]);
        assert_eq!(decide(900 * MIB, by_unit, 1024 * MIB), Oversize::Halve);
    }

    #[test]
    fn an_image_under_its_share_fits() {
        assert_eq!(
            decide(200 * MIB, units(&[(0, 150 * MIB)]), 1024 * MIB),
            Oversize::Fits
        );
    }
}
