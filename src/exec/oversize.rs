//! An image one unit makes unrunnable for all: a unit's huge static (a
//! gigabyte of zeros in `.bss` costs nothing to compile or link) is mapped
//! into every process started from the image, so every unit sharing it
//! would fail to start under the run's address-space limit. Such a unit is
//! found before its image-mates run: an image whose mapped size passes a
//! fraction of the limit has its symbols summed per unit (a symbol's
//! demangled path starts with its unit's module), and each unit whose own
//! share passes its part of the limit is taken out, to be built alone and
//! get its own verdict there.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use object::{Object, ObjectSegment, ObjectSymbol};

use crate::package::ModuleKey;

/// Of the run's address-space limit, what one image may map before its
/// units' shares are looked at: honest images map a few megabytes.
const IMAGE_SHARE: u64 = 4;

/// Of the run's address-space limit, what one unit's symbols may take
/// before it is built alone: a unit that large is unusual for one
/// function, and alone it still gets the verdict its own run gives.
const UNIT_SHARE: u64 = 8;

/// The units of `members` whose symbols take more than their share of
/// `address_space` bytes in the image at `path`: none when the image maps
/// little. `owner` says which unit a symbol's module path (`c3`) is.
pub fn oversized_units(
    path: &Path,
    address_space: u64,
    owner: impl Fn(&str) -> Option<ModuleKey>,
) -> Result<Vec<ModuleKey>> {
    let data = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let file = object::File::parse(&*data)
        .with_context(|| format!("cannot read {} as an executable", path.display()))?;
    let mapped: u64 = file.segments().map(|s| s.size()).sum();
    if mapped <= address_space / IMAGE_SHARE {
        return Ok(Vec::new());
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
    Ok(by_unit
        .into_iter()
        .filter(|(_, size)| *size > address_space / UNIT_SHARE)
        .map(|(key, _)| key)
        .collect())
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
        assert!(oversized_units(&me, 64 << 30, module_owner)
            .unwrap()
            .is_empty());
    }
}
