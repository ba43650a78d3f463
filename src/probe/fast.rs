//! Fast mode (experimental): every candidate is a module of one binary
//! crate, built by one rustc. Candidates with errors are removed and the
//! rest built again, until a pass is clean. Large batches are dealt into a
//! few such crates (two per CPU) built side by side by one cargo: rustc's
//! front end is single-threaded, and a crate that built is done while only
//! the crates that had errors are built again. rustc stops before code
//! generation when any module has a type error, so the first passes cost
//! about as much as a `cargo check`; post-monomorphization errors surface in
//! the pass that generates code, and the loop removes those candidates too.
//!
//! Sharing a crate is invisible to a candidate unless it reaches outside its
//! module: the crate root (`crate::`, `super::`), crate-level attributes,
//! global symbols (`#[no_mangle]`, `#[export_name]`, extern blocks, global
//! assembly) or exported macros. [`needs_own_crate`] finds those by their
//! tokens, and such a candidate is probed in `wide` mode instead, as is every
//! candidate of a pass whose errors cannot be attributed to a module (a link
//! error, an internal compiler error, a killed build).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use anyhow::Result;
use proc_macro2::{Delimiter, TokenTree};

use super::{ProbeOutcome, ProbeStats, ProbeVerdict, Probed};
use crate::package::{CompilerDiag, ModuleKey, Package, Profile};
use crate::policy::scan::{self, Found};

/// The shared crates' binary targets are named `assay_fast_N`.
const FAST_BIN: &str = "assay_fast";

/// After this many passes the remaining candidates go to `wide`. Each pass
/// usually removes a whole compiler phase's errors, so three are the most
/// a batch usually needs (type errors, then post-monomorphization errors).
const MAX_PASSES: usize = 6;

/// Attribute names whose effect is crate-wide (symbols, linkage, exported
/// macros, runtime hooks).
const GLOBAL_ATTRS: &[&str] = &[
    "no_mangle",
    "export_name",
    "link_section",
    "link_name",
    "link",
    "used",
    "linkage",
    "naked",
    "global_allocator",
    "panic_handler",
    "macro_export",
    "lang",
];

/// Why a candidate must be built in a crate of its own to get the verdict
/// it would get alone, or `None` when sharing a crate cannot change it.
/// Conservative: a false alarm costs only speed.
pub fn needs_own_crate(source: &str) -> Option<&'static str> {
    scan::first_reason(source, &|found| match found {
        Found::Attr(attr, _) => {
            scan::names_any(attr, GLOBAL_ATTRS).then_some("global symbol or exported macro")
        }
        Found::CrateAttr(..) => Some("crate-level attribute"),
        Found::Ident(tokens, i, name) => match name.as_str() {
            "crate" | "super" if tokens.punct(i + 1, ':') && tokens.punct(i + 2, ':') => {
                Some("path through the crate root")
            }
            "extern" => {
                let abi = matches!(tokens.get(i + 1), Some(TokenTree::Literal(_)));
                let at = if abi { i + 2 } else { i + 1 };
                matches!(tokens.get(at), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace)
                    .then_some("extern block")
            }
            "global_asm" | "naked_asm" if tokens.punct(i + 1, '!') => Some("global assembly"),
            _ => None,
        },
    })
}

/// What one module collected in one pass.
#[derive(Default)]
struct ModuleDiags {
    rendered: String,
    errors: usize,
    warnings: usize,
    codes: Vec<String>,
}

pub(super) async fn probe(
    package: &Package,
    candidates: &[(usize, &str)],
    on_progress: &mut impl FnMut(usize),
) -> Result<ProbeOutcome> {
    let mut stats = ProbeStats::default();
    let mut verdicts: BTreeMap<usize, Probed> = BTreeMap::new();
    let position: HashMap<usize, usize> = candidates
        .iter()
        .enumerate()
        .map(|(pos, (idx, _))| (*idx, pos))
        .collect();
    let mut alone = Vec::new();
    let mut shared = Vec::new();
    for (pos, (idx, source)) in candidates.iter().enumerate() {
        package.write_module(&ModuleKey::Candidate(*idx), source)?;
        match needs_own_crate(source) {
            Some(why) => {
                tracing::debug!(candidate = idx, why, "fast probe: own crate");
                alone.push(pos);
            }
            None => shared.push(pos),
        }
    }
    let mut shards = deal(&shared, shard_count(shared.len()));
    package.set_bins(shards.iter().map(|s| s.name.as_str()))?;

    loop {
        let pending: Vec<usize> = (0..shards.len())
            .filter(|&s| !shards[s].members.is_empty())
            .collect();
        if pending.is_empty() {
            break;
        }
        if stats.passes == MAX_PASSES {
            for s in pending {
                alone.append(&mut shards[s].members);
            }
            break;
        }
        stats.passes += 1;
        let mut bins = Vec::with_capacity(pending.len());
        for &s in &pending {
            package.write_bin(&shards[s].name, &root(candidates, &shards[s].members))?;
            bins.push(shards[s].name.clone());
        }
        let report = package.build(Profile::Probe, &bins, |_, _| {}).await?;
        stats.add_build(&report);
        for &s in &pending {
            let shard = &mut shards[s];
            let target = report
                .diagnostics
                .get(&shard.name)
                .cloned()
                .unwrap_or_default();
            let in_shard: HashSet<usize> = shard.members.iter().copied().collect();
            let mut per_module: HashMap<usize, ModuleDiags> = HashMap::new();
            let mut unattributed = target.ices > 0;
            for msg in &target.messages {
                let owner = msg
                    .files
                    .iter()
                    .filter_map(|f| module_of(f))
                    .filter_map(|idx| position.get(&idx).copied())
                    .find(|pos| in_shard.contains(pos));
                match owner {
                    Some(pos) => {
                        let m = per_module.entry(pos).or_default();
                        m.rendered.push_str(&msg.rendered);
                        if msg.is_error() {
                            m.errors += 1;
                            m.codes.extend(msg.code.iter().cloned());
                        } else if msg.level == crate::package::DiagLevel::Warning {
                            m.warnings += 1;
                        }
                    }
                    None if msg.is_error() && !is_summary(msg) => unattributed = true,
                    None => {}
                }
            }
            if report.built.contains_key(&shard.name) {
                for pos in shard.members.drain(..) {
                    let m = per_module.remove(&pos).unwrap_or_default();
                    verdicts.insert(
                        pos,
                        Probed {
                            idx: candidates[pos].0,
                            verdict: ProbeVerdict::Compiled,
                            diagnostics: m.rendered,
                            warnings: m.warnings,
                        },
                    );
                }
                continue;
            }
            let failing: Vec<usize> = shard
                .members
                .iter()
                .copied()
                .filter(|pos| per_module.get(pos).is_some_and(|m| m.errors > 0))
                .collect();
            if unattributed || failing.is_empty() || !report.dependency_errors.is_empty() {
                // A link error, an ICE, a killed build, a broken harness: let
                // the wide build say which candidate it belongs to.
                alone.append(&mut shard.members);
                continue;
            }
            for pos in &failing {
                let mut m = per_module.remove(pos).unwrap_or_default();
                m.codes.sort();
                m.codes.dedup();
                verdicts.insert(
                    *pos,
                    Probed {
                        idx: candidates[*pos].0,
                        verdict: ProbeVerdict::CompileError { codes: m.codes },
                        diagnostics: m.rendered,
                        warnings: m.warnings,
                    },
                );
            }
            shard.members.retain(|pos| !verdicts.contains_key(pos));
        }
        on_progress(verdicts.len());
    }

    stats.fallbacks = alone.len();
    if !alone.is_empty() {
        alone.sort_unstable();
        let subset: Vec<(usize, &str)> = alone.iter().map(|&pos| candidates[pos]).collect();
        let done = verdicts.len();
        let wide = super::wide::probe(package, &subset, &mut |n| on_progress(done + n)).await?;
        stats.absorb(&wide.stats);
        // Counted once: wide's own fallbacks (targets it linked after an
        // unlinked build) are part of probing these candidates alone.
        stats.fallbacks = alone.len();
        for (pos, probed) in alone.iter().zip(wide.probed) {
            verdicts.insert(*pos, probed);
        }
    }
    on_progress(candidates.len());
    Ok(ProbeOutcome {
        probed: verdicts.into_values().collect(),
        stats,
    })
}

/// A crate of the fast probe and the candidates still in it.
#[derive(Debug, PartialEq)]
struct Shard {
    name: String,
    members: Vec<usize>,
}

/// How many crates share the candidates: two per CPU, so that while rustc's
/// single-threaded front end works on one crate the other CPUs have work,
/// and a pass that must be repeated repeats a fraction of the candidates;
/// at least [`MIN_PER_SHARD`] candidates each, so small batches stay one
/// crate.
fn shard_count(candidates: usize) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (candidates / MIN_PER_SHARD).clamp(1, 2 * cpus)
}

/// Below this many candidates a crate's fixed cost (loading `std`'s
/// metadata, linking) outweighs what splitting saves.
const MIN_PER_SHARD: usize = 16;

/// Deals positions round-robin into `count` shards.
fn deal(positions: &[usize], count: usize) -> Vec<Shard> {
    let mut shards: Vec<Shard> = (0..count)
        .map(|i| Shard {
            name: format!("{FAST_BIN}_{i}"),
            members: Vec::new(),
        })
        .collect();
    for (i, &pos) in positions.iter().enumerate() {
        shards[i % count].members.push(pos);
    }
    shards
}

/// One non-incremental build of the shared crate over `candidates`: the
/// floor that no one-crate scheme can beat (one rustc, no pass to repeat).
/// For the benchmark; says only whether the crate built.
pub async fn floor(package: &Package, candidates: &[(usize, &str)]) -> Result<bool> {
    for (idx, source) in candidates {
        package.write_module(&ModuleKey::Candidate(*idx), source)?;
    }
    package.set_bins([FAST_BIN])?;
    let all: Vec<usize> = (0..candidates.len()).collect();
    package.write_bin(FAST_BIN, &root(candidates, &all))?;
    let report = package
        .build(Profile::Probe, &[FAST_BIN.to_owned()], |_, _| {})
        .await?;
    Ok(report.built.contains_key(FAST_BIN))
}

/// The shared crate's root: one module per candidate, each named by its
/// batch index, and a `main` that passes every entry to `black_box` (so code
/// generation and the linker reach every entry function, as each wide
/// target's `main` does and as the scorer will).
fn root(candidates: &[(usize, &str)], active: &[usize]) -> String {
    let mut text = String::from("// Fast probe crate; generated by assay.\n");
    for &pos in active {
        let name = ModuleKey::Candidate(candidates[pos].0).name();
        text.push_str(&format!("#[path = \"{name}.rs\"]\nmod {name};\n"));
    }
    text.push_str("\nfn main() {\n");
    for &pos in active {
        let name = ModuleKey::Candidate(candidates[pos].0).name();
        text.push_str(&format!(
            "    std::hint::black_box({name}::__ASSAY_ENTRY);\n"
        ));
    }
    text.push_str("}\n");
    text
}

/// The candidate a diagnostic's file is (`cands/c12.rs` is candidate 12).
fn module_of(file: &str) -> Option<usize> {
    let path = Path::new(file);
    if path.parent()?.file_name()? != "cands" {
        return None;
    }
    path.file_name()?
        .to_str()?
        .strip_prefix('c')?
        .strip_suffix(".rs")?
        .parse()
        .ok()
}

/// rustc's closing line (`aborting due to N previous errors`), which
/// belongs to no module.
fn is_summary(msg: &CompilerDiag) -> bool {
    msg.files.is_empty() && msg.code.is_none() && msg.rendered.starts_with("error: aborting due to")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_that_reach_outside_their_module_need_their_own_crate() {
        let cases: &[(&str, Option<&str>)] = &[
            ("pub fn f(x: u64) -> u64 { x * 2 }", None),
            ("#![allow(dead_code)]\n#![deny(unused)]\nfn f() {}", None),
            ("pub(crate) fn f() {} fn g() { self::f() }", None),
            ("#[derive(Debug)] struct S; #[inline] fn f() {}", None),
            ("extern crate core; pub extern \"C\" fn f() {}", None),
            ("fn f() { let used = 1; let link = used; }", None),
            ("#![no_std]\nfn f() {}", Some("crate-level attribute")),
            ("#![feature(never_type)]", Some("crate-level attribute")),
            ("#![cfg(test)]", Some("crate-level attribute")),
            (
                "#[no_mangle] pub extern \"C\" fn f() {}",
                Some("global symbol or exported macro"),
            ),
            (
                "#[unsafe(no_mangle)] pub fn f() {}",
                Some("global symbol or exported macro"),
            ),
            (
                "#[export_name = \"g\"] fn f() {}",
                Some("global symbol or exported macro"),
            ),
            (
                "#[cfg_attr(all(), no_mangle)] fn f() {}",
                Some("global symbol or exported macro"),
            ),
            (
                "mod m { #[macro_export] macro_rules! m { () => {} } }",
                Some("global symbol or exported macro"),
            ),
            (
                "extern \"C\" { fn abs(x: i32) -> i32; }",
                Some("extern block"),
            ),
            ("extern { fn abs(x: i32) -> i32; }", Some("extern block")),
            ("use crate::Input;", Some("path through the crate root")),
            ("fn f() { super::g() }", Some("path through the crate root")),
            (
                "macro_rules! m { () => { $crate::f() } }",
                Some("path through the crate root"),
            ),
            ("std::arch::global_asm!(\"nop\");", Some("global assembly")),
            ("fn f() { \"unterminated }", Some("does not lex")),
        ];
        for (source, want) in cases {
            assert_eq!(needs_own_crate(source), *want, "{source}");
        }
    }

    #[test]
    fn diagnostics_are_owned_by_their_module_file() {
        assert_eq!(module_of("cands/c12.rs"), Some(12));
        assert_eq!(module_of("/w/absolute/cands/c3.rs"), Some(3));
        assert_eq!(module_of("cands/c3.main.rs"), None);
        assert_eq!(module_of("cands/assay_fast.main.rs"), None);
        assert_eq!(module_of("src/c3.rs"), None);
        assert_eq!(module_of("cands/committed.rs"), None);
    }

    #[test]
    fn candidates_are_dealt_round_robin() {
        let shards = deal(&[0, 1, 2, 3, 4], 2);
        assert_eq!(shards[0].members, [0, 2, 4]);
        assert_eq!(shards[1].members, [1, 3]);
        assert_eq!(shards[1].name, "assay_fast_1");
        assert_eq!(shard_count(3), 1);
        assert_eq!(
            shard_count(10_000),
            2 * std::thread::available_parallelism().unwrap().get()
        );
    }

    #[test]
    fn the_root_names_every_entry() {
        let cands = [(4, ""), (9, "")];
        let text = root(&cands, &[1]);
        assert!(text.contains("#[path = \"c9.rs\"]\nmod c9;"), "{text}");
        assert!(
            text.contains("std::hint::black_box(c9::__ASSAY_ENTRY);"),
            "{text}"
        );
        assert!(!text.contains("c4"), "{text}");
    }
}
