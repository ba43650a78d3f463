//! Wide mode: one target per candidate, one `cargo build --keep-going` per
//! [`TARGETS_PER_BUILD`] of them. cargo schedules the targets over every
//! core, and a failing target stops nothing else.
//!
//! Linking a candidate's binary against `std` costs about as much CPU as
//! compiling it (docs/benchmarks.md), and almost nothing in a candidate can
//! make the link fail. So a candidate is built *unlinked* when it can be:
//! as an example of crate type `rlib` whose root hands the entry to
//! `black_box` from a `pub`, never-inlined `main`. rustc still runs code
//! generation from that `main`, so every post-monomorphization error the
//! binary would meet is met; only the linker does not run. Three things
//! keep the verdict exactly the binary's:
//!
//! - A candidate whose tokens could make a link fail is linked as before
//!   ([`needs_link`]: symbol and linkage attributes such as `#[no_mangle]`,
//!   `#[export_name]`, `#[link_section]`, `#[used]`, extern blocks and ABIs,
//!   inline and global assembly, crate-level attributes, and anything that
//!   does not lex).
//! - A library generates code for more than a binary does: every method of
//!   a private trait impl is a code generation root of an rlib, never of a
//!   binary. So an unlinked target that fails is built again as a binary,
//!   unless its errors carry a code only rustc's front end emits
//!   ([`FRONT_END_CODES`]): rustc starts code generation only when analysis
//!   gave no error, so such a failure happened before any difference
//!   between the two crate types and its diagnostics are the binary's. An
//!   unlinked target that built is a binary that builds: the binary's code
//!   generation roots are a subset of the rlib's.
//! - The one link failure no token shows is size: objects past the reach
//!   of 32-bit relocations (a 3 GiB static) do not link. An unlinked target
//!   whose allocated sections reach [`ALLOC_LIMIT`] is built again as a
//!   binary.

use std::path::Path;

use anyhow::Result;

use super::{target_verdict, ProbeOutcome, ProbeStats, ProbeVerdict, Probed};
use crate::package::{BuildReport, ModuleKey, Package, Profile};
use crate::policy::scan::{self, Found};

/// Attribute names that act on symbols, linkage or sections: a candidate
/// using one may build alone and still fail to link (or link and clash).
const LINK_ATTRS: &[&str] = &[
    "no_mangle",
    "export_name",
    "link_section",
    "link_name",
    "link",
    "link_ordinal",
    "no_link",
    "used",
    "linkage",
    "naked",
    "global_allocator",
    "panic_handler",
    "alloc_error_handler",
    "lang",
    "thread_local",
    "rustc_std_internal_symbol",
];

/// Crates `extern crate` may name without linking anything a binary of
/// the package does not link already.
const LINKED_ANYWAY: &[&str] = &["std", "core", "alloc"];

/// Error codes that only rustc's front end (parsing, name resolution, type
/// and trait checking, borrow checking, match checking, privacy,
/// coherence, const checking) emits, never code generation. One of them in
/// a failed build means analysis failed, so code generation never started.
/// A code not listed only costs a second build.
pub(crate) const FRONT_END_CODES: &[&str] = &[
    "E0004", "E0005", "E0015", "E0023", "E0026", "E0027", "E0040", "E0046", "E0049", "E0050",
    "E0053", "E0054", "E0057", "E0060", "E0061", "E0063", "E0069", "E0070", "E0072", "E0106",
    "E0107", "E0117", "E0119", "E0124", "E0133", "E0184", "E0191", "E0200", "E0201", "E0204",
    "E0207", "E0220", "E0223", "E0229", "E0252", "E0255", "E0261", "E0262", "E0263", "E0267",
    "E0268", "E0271", "E0277", "E0282", "E0283", "E0308", "E0364", "E0365", "E0369", "E0373",
    "E0381", "E0382", "E0384", "E0392", "E0403", "E0404", "E0405", "E0407", "E0412", "E0415",
    "E0416", "E0422", "E0423", "E0424", "E0425", "E0426", "E0428", "E0429", "E0430", "E0432",
    "E0433", "E0434", "E0435", "E0437", "E0438", "E0446", "E0449", "E0451", "E0463", "E0493",
    "E0499", "E0500", "E0501", "E0502", "E0503", "E0505", "E0506", "E0507", "E0508", "E0509",
    "E0515", "E0520", "E0532", "E0554", "E0559", "E0560", "E0562", "E0565", "E0571", "E0572",
    "E0581", "E0582", "E0592", "E0594", "E0596", "E0597", "E0599", "E0600", "E0603", "E0604",
    "E0605", "E0606", "E0607", "E0608", "E0609", "E0610", "E0614", "E0615", "E0616", "E0618",
    "E0620", "E0624", "E0658", "E0689", "E0700", "E0703", "E0716", "E0728", "E0746", "E0747",
    "E0764", "E0765", "E0766", "E0767", "E0782", "E0790",
];

/// An unlinked target whose objects allocate this much (code, data, bss,
/// thread-locals) is built again as a binary: past 2 GiB the x86-64 small
/// code model's 32-bit relocations cannot reach, and the link fails.
pub(crate) const ALLOC_LIMIT: u64 = 1 << 30;

/// How a candidate is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Unlinked where [`needs_link`] allows, linked binaries otherwise (the
    /// default).
    Unlinked,
    /// Every candidate a linked binary (the scheme before unlinked targets;
    /// kept for the benchmark).
    Linked,
}

/// How many targets one cargo build of the wide probe holds at most; more
/// candidates are split into builds of about equal size, one after the other
/// (they share the target directory, whose lock would serialise them anyway).
/// cargo's own cost per unit grows with the number of targets in the
/// manifest: each unit's job keeps its own copy of the parsed manifest
/// (cargo's `ManifestErrorContext`, for diagnostics that point into
/// `Cargo.toml`), about 1.7 KB per target (peak 105 MB for 200 targets,
/// 1.76 GB for 1000), and it forks every rustc (its jobserver set-up rules out
/// `posix_spawn`), copying and then tearing down page tables in proportion to
/// its size. At 1000 targets in one build that cost about 0.13 CPU-s per
/// candidate in the kernel, more than rustc itself; at 100 it is about 5 ms.
pub const TARGETS_PER_BUILD: usize = 100;

pub(super) async fn probe(
    package: &Package,
    candidates: &[(usize, &str)],
    on_progress: &mut impl FnMut(usize),
) -> Result<ProbeOutcome> {
    probe_with(
        package,
        candidates,
        Scheme::Unlinked,
        TARGETS_PER_BUILD,
        on_progress,
    )
    .await
}

/// Wide mode with the scheme and the number of targets per cargo build
/// chosen (the benchmark compares them).
pub async fn probe_with(
    package: &Package,
    candidates: &[(usize, &str)],
    scheme: Scheme,
    targets_per_build: usize,
    on_progress: &mut impl FnMut(usize),
) -> Result<ProbeOutcome> {
    let names = write_modules(package, candidates)?;
    let mut is_bin = Vec::with_capacity(candidates.len());
    for ((idx, source), name) in candidates.iter().zip(&names) {
        let linked = match scheme {
            Scheme::Linked => true,
            Scheme::Unlinked => needs_link(source)
                .inspect(|why| {
                    tracing::debug!(candidate = idx, why, "wide probe: linked");
                })
                .is_some(),
        };
        is_bin.push(linked);
        if linked {
            write_bin_root(package, *idx, name)?;
        } else {
            write_lib_root(package, *idx, name)?;
        }
    }

    let mut stats = ProbeStats::default();
    let mut probed: Vec<Option<Probed>> = (0..candidates.len()).map(|_| None).collect();
    let mut relink = Vec::new();
    let mut done = 0;
    for chunk in chunks(candidates.len(), targets_per_build) {
        let select = |bin: bool| -> Vec<String> {
            chunk
                .clone()
                .filter(|&pos| is_bin[pos] == bin)
                .map(|pos| names[pos].clone())
                .collect()
        };
        let (bins, libs) = (select(true), select(false));
        package.set_targets(
            bins.iter().map(String::as_str),
            libs.iter().map(String::as_str),
        )?;
        let report = package
            .build_targets(Profile::Probe, &bins, &libs, |_, _| {
                done += 1;
                on_progress(done);
            })
            .await?;
        stats.add_build(&report);
        // Each verdict is read from the report of the build that held its
        // target: a timeout or a killed cargo belongs to that build only.
        for pos in chunk {
            let (idx, name) = (candidates[pos].0, &names[pos]);
            let verdict = target_verdict(idx, &report, name);
            if !is_bin[pos] && must_relink(&verdict, &report, name) {
                tracing::debug!(
                    candidate = idx,
                    "wide probe: unlinked target inconclusive, linking"
                );
                relink.push(pos);
            } else {
                probed[pos] = Some(verdict);
            }
        }
    }
    for &pos in &relink {
        write_bin_root(package, candidates[pos].0, &names[pos])?;
    }
    for chunk in chunks(relink.len(), targets_per_build) {
        let again: Vec<String> = relink[chunk.clone()]
            .iter()
            .map(|&pos| names[pos].clone())
            .collect();
        package.set_bins(again.iter().map(String::as_str))?;
        let report = package.build(Profile::Probe, &again, |_, _| {}).await?;
        stats.add_build(&report);
        for &pos in &relink[chunk] {
            probed[pos] = Some(target_verdict(candidates[pos].0, &report, &names[pos]));
        }
    }
    stats.fallbacks += relink.len();
    on_progress(candidates.len());
    Ok(ProbeOutcome {
        probed: probed
            .into_iter()
            .map(|p| p.expect("every candidate has a verdict"))
            .collect(),
        stats,
    })
}

/// Splits `0..n` into the fewest consecutive ranges of at most `max`
/// (at least 1) items, their sizes differing by one at most, so the last
/// build is not a small tail that leaves cores idle.
pub(super) fn chunks(n: usize, max: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let count = n.div_ceil(max.max(1));
    (0..count).map(move |k| k * n / count..(k + 1) * n / count)
}

/// Whether an unlinked target's verdict could differ from its binary's: it
/// built but is too big to be sure it links, or it failed without an error
/// that proves the failure came before code generation.
fn must_relink(verdict: &Probed, report: &BuildReport, name: &str) -> bool {
    match &verdict.verdict {
        ProbeVerdict::Compiled => !report
            .built
            .get(name)
            .is_some_and(|rlib| allocated_bytes(rlib).is_ok_and(|n| n < ALLOC_LIMIT)),
        ProbeVerdict::CompileError { .. } => !report.diagnostics.get(name).is_some_and(|d| {
            d.messages.iter().filter(|m| m.is_error()).any(|m| {
                m.code
                    .as_deref()
                    .is_some_and(|c| FRONT_END_CODES.contains(&c))
            })
        }),
        ProbeVerdict::ProbeFailure(super::ProbeFailure::CompilerCrashed) => true,
        // The harness failed, or the build itself: the binary would say the same.
        ProbeVerdict::DependencyFailure | ProbeVerdict::ProbeFailure(_) => false,
        // Its own limit stopped it, or it was never built.
        ProbeVerdict::CompileTimeout
        | ProbeVerdict::CompileOutOfMemory
        | ProbeVerdict::Forbidden(_) => false,
    }
}

/// Writes each candidate's module; returns the target names, in the
/// candidates' order.
fn write_modules(package: &Package, candidates: &[(usize, &str)]) -> Result<Vec<String>> {
    let mut names = Vec::with_capacity(candidates.len());
    for (idx, source) in candidates {
        let key = ModuleKey::Candidate(*idx);
        package.write_module(&key, source)?;
        names.push(key.name());
    }
    Ok(names)
}

/// Writes each candidate's module and its own binary root; returns the
/// target names, in the candidates' order.
pub(super) fn write_targets(
    package: &Package,
    candidates: &[(usize, &str)],
) -> Result<Vec<String>> {
    let names = write_modules(package, candidates)?;
    for ((idx, _), name) in candidates.iter().zip(&names) {
        write_bin_root(package, *idx, name)?;
    }
    Ok(names)
}

fn write_bin_root(package: &Package, idx: usize, name: &str) -> Result<()> {
    package.write_bin(
        name,
        &format!(
            "// Probe target for candidate {idx}; generated by assay.\n\
             #[path = \"{name}.rs\"]\nmod candidate;\n\n\
             fn main() {{\n    std::hint::black_box(candidate::__ASSAY_ENTRY);\n}}\n",
        ),
    )
}

/// The unlinked root: the binary's, line for line, but its `main` is a
/// `pub` function, never inlined, so it is a code generation root of the
/// rlib and reaches the entry exactly as the binary's `main` does.
fn write_lib_root(package: &Package, idx: usize, name: &str) -> Result<()> {
    package.write_lib_root(
        name,
        &format!(
            "// Probe target for candidate {idx}; generated by assay.\n\
             #[path = \"{name}.rs\"]\nmod candidate;\n\n\
             #[inline(never)] pub fn main() {{\n    std::hint::black_box(candidate::__ASSAY_ENTRY);\n}}\n",
        ),
    )
}

/// Why a candidate must be linked to get the verdict it gets alone, or
/// `None` when its tokens contain nothing that can fail only at link time.
/// Conservative: a false alarm costs only the link.
pub fn needs_link(source: &str) -> Option<&'static str> {
    scan::first_reason(source, &|found| match found {
        Found::Attr(attr, _) => {
            scan::names_any(attr, LINK_ATTRS).then_some("symbol or linkage attribute")
        }
        Found::CrateAttr(..) => Some("crate-level attribute"),
        Found::Ident(tokens, i, name) => match name.as_str() {
            "extern" => {
                let harmless = tokens.ident(i + 1).as_deref() == Some("crate")
                    && tokens
                        .ident(i + 2)
                        .is_some_and(|c| LINKED_ANYWAY.contains(&c.as_str()));
                (!harmless).then_some("extern block, ABI or crate")
            }
            "asm" | "global_asm" | "naked_asm" | "llvm_asm" if tokens.punct(i + 1, '!') => {
                Some("assembly")
            }
            _ => None,
        },
    })
}

/// The bytes an rlib's object files allocate at run time (sections with
/// `SHF_ALLOC`: code, read-only data, data, bss, thread-locals), summed.
/// Reads the `ar` archive and each ELF64 member's section headers; an
/// archive it cannot read is an error, which the caller treats as too big.
pub(crate) fn allocated_bytes(rlib: &Path) -> std::io::Result<u64> {
    let bytes = std::fs::read(rlib)?;
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    let mut rest = bytes
        .strip_prefix(b"!<arch>\n".as_slice())
        .ok_or_else(|| bad("not an ar archive"))?;
    let mut total = 0u64;
    while rest.len() >= 60 {
        let (header, body) = rest.split_at(60);
        let size: usize = std::str::from_utf8(&header[48..58])
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| bad("bad ar member size"))?;
        let member = body.get(..size).ok_or_else(|| bad("truncated ar member"))?;
        // The symbol table (`/`, `/SYM64/`) and the long names (`//`) hold
        // no code; every other member (objects, `lib.rmeta`) must be ELF,
        // or the archive is laid out in a way not read here.
        let special = header.starts_with(b"/ ")
            || header.starts_with(b"//")
            || header.starts_with(b"/SYM64/");
        if member.starts_with(b"\x7fELF") {
            total += elf_allocated(member).ok_or_else(|| bad("bad ELF object"))?;
        } else if !special {
            return Err(bad("an archive member that is not ELF"));
        }
        // Members are 2-byte aligned.
        rest = body.get(size + size % 2..).unwrap_or(&[]);
    }
    Ok(total)
}

/// An ELF64 little-endian object's `SHF_ALLOC` section sizes, summed.
fn elf_allocated(elf: &[u8]) -> Option<u64> {
    const SHF_ALLOC: u64 = 0x2;
    if elf.get(4) != Some(&2) || elf.get(5) != Some(&1) {
        return None; // not ELF64 little-endian: unknown, so not small
    }
    let u16_at = |at: usize| Some(u16::from_le_bytes(elf.get(at..at + 2)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(elf.get(at..at + 8)?.try_into().ok()?));
    let shoff = usize::try_from(u64_at(0x28)?).ok()?;
    let shentsize = usize::from(u16_at(0x3A)?);
    let shnum = usize::from(u16_at(0x3C)?);
    let mut total = 0u64;
    for k in 0..shnum {
        let sh = shoff + k * shentsize;
        if u64_at(sh + 8)? & SHF_ALLOC != 0 {
            total = total.saturating_add(u64_at(sh + 0x20)?);
        }
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_that_can_fail_only_at_link_time_are_linked() {
        let cases: &[(&str, Option<&str>)] = &[
            ("pub fn f(x: u64) -> u64 { x * 2 }", None),
            ("#![allow(dead_code)]\nfn f() {}", None),
            (
                "#[derive(Debug)] struct S; impl Drop for S { fn drop(&mut self) {} }",
                None,
            ),
            (
                "static T: [u8; 3] = [1, 2, 3]; fn f() -> &'static str { \"\" }",
                None,
            ),
            ("extern crate alloc; use alloc::vec::Vec;", None),
            ("fn f() { let used = 1; let link = used; }", None),
            ("use super::*; fn f() { crate::g() }", None),
            ("#![no_std]\nfn f() {}", Some("crate-level attribute")),
            (
                "#[no_mangle] pub fn f() {}",
                Some("symbol or linkage attribute"),
            ),
            (
                "#[unsafe(no_mangle)] pub fn f() {}",
                Some("symbol or linkage attribute"),
            ),
            (
                "mod m { #[export_name = \"g\"] fn f() {} }",
                Some("symbol or linkage attribute"),
            ),
            (
                "#[cfg_attr(all(), link_section = \".x\")] static X: u8 = 0;",
                Some("symbol or linkage attribute"),
            ),
            (
                "#[used] static KEEP: u8 = 0;",
                Some("symbol or linkage attribute"),
            ),
            (
                "extern \"C\" { fn abs(x: i32) -> i32; }",
                Some("extern block, ABI or crate"),
            ),
            (
                "pub extern \"C\" fn f() {}",
                Some("extern block, ABI or crate"),
            ),
            (
                "type F = unsafe extern fn();",
                Some("extern block, ABI or crate"),
            ),
            (
                "extern crate proc_macro;",
                Some("extern block, ABI or crate"),
            ),
            (
                "fn f() { unsafe { std::arch::asm!(\"nop\") } }",
                Some("assembly"),
            ),
            ("std::arch::global_asm!(\".globl x\");", Some("assembly")),
            ("fn f() { \"unterminated }", Some("does not lex")),
        ];
        for (source, want) in cases {
            assert_eq!(needs_link(source), *want, "{source}");
        }
    }

    /// An ELF64 object with these (flags, size) sections.
    fn elf(sections: &[(u64, u64)]) -> Vec<u8> {
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        elf[0x28..0x30].copy_from_slice(&64u64.to_le_bytes());
        elf[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        elf[0x3C..0x3E].copy_from_slice(&(sections.len() as u16).to_le_bytes());
        for (flags, size) in sections {
            let mut sh = [0u8; 64];
            sh[8..16].copy_from_slice(&flags.to_le_bytes());
            sh[0x20..0x28].copy_from_slice(&size.to_le_bytes());
            elf.extend_from_slice(&sh);
        }
        elf
    }

    /// An rlib as rustc writes one: the long-names member, `lib.rmeta`
    /// (ELF, nothing allocated) and one object with `.text` (alloc, 0x40),
    /// `.bss` (alloc, `bss`) and `.comment` (not alloc, 0x10).
    fn archive(bss: u64) -> Vec<u8> {
        let mut ar = b"!<arch>\n".to_vec();
        let names = b"c0-0123456789abcdef.c0.0123456789abcdef-cgu.0.rcgu.o/\n".to_vec();
        let members = [
            ("//", names),
            ("lib.rmeta/", elf(&[(0x0, 0x400)])),
            ("/0", elf(&[(0x6, 0x40), (0x3, bss), (0x30, 0x10)])),
        ];
        for (name, body) in members {
            ar.extend_from_slice(format!("{name:<16}{:<32}{:<10}`\n", 0, body.len()).as_bytes());
            ar.extend_from_slice(&body);
            if body.len() % 2 == 1 {
                ar.push(b'\n');
            }
        }
        ar
    }

    #[test]
    fn allocated_bytes_sum_alloc_sections_of_every_object() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("libc0.rlib");
        std::fs::write(&path, archive(3 << 30)).unwrap();
        assert_eq!(allocated_bytes(&path).unwrap(), 0x40 + (3 << 30));
        std::fs::write(&path, archive(8)).unwrap();
        assert_eq!(allocated_bytes(&path).unwrap(), 0x48);
        std::fs::write(&path, b"not an archive").unwrap();
        assert!(allocated_bytes(&path).is_err());
        // A BSD-style member (`#1/NN`, its name before its data) is not read.
        let mut bsd = b"!<arch>\n".to_vec();
        bsd.extend_from_slice(format!("{:<16}{:<32}{:<10}`\n", "#1/4", 0, 8).as_bytes());
        bsd.extend_from_slice(b"c0.o\x7fELF");
        std::fs::write(&path, bsd).unwrap();
        assert!(allocated_bytes(&path).is_err());
    }

    #[test]
    fn candidates_are_split_into_even_builds_of_bounded_size() {
        let cases: &[(usize, usize, &[usize])] = &[
            (0, 100, &[]),
            (1, 100, &[1]),
            (100, 100, &[100]),
            (101, 100, &[50, 51]),
            (200, 100, &[100, 100]),
            (250, 100, &[83, 83, 84]),
            (1000, 100, &[100; 10]),
            (7, usize::MAX, &[7]),
            (3, 0, &[1, 1, 1]),
        ];
        for &(n, max, sizes) in cases {
            let ranges: Vec<_> = chunks(n, max).collect();
            let got: Vec<usize> = ranges.iter().map(|r| r.len()).collect();
            assert_eq!(got, sizes, "n {n}, max {max}");
            let covered: Vec<usize> = ranges.into_iter().flatten().collect();
            assert_eq!(covered, (0..n).collect::<Vec<_>>(), "n {n}, max {max}");
        }
    }

    #[test]
    fn only_front_end_codes_settle_an_unlinked_failure() {
        for post_mono in ["E0080", "E0275", "E0391", "E0511"] {
            assert!(!FRONT_END_CODES.contains(&post_mono), "{post_mono}");
        }
        assert!(
            FRONT_END_CODES.windows(2).all(|w| w[0] < w[1]),
            "sorted, unique"
        );
    }
}
