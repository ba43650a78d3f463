//! A line diff for `assay promote`'s preview: pure, no IO.
//!
//! The alignment is `similar`'s Myers diff over lines (linear memory, a
//! minimal edit script); what is printed is assay's own unified format,
//! hunks of changes within `context` lines of each other.

use similar::{Algorithm, DiffTag};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Same,
    Del,
    Add,
}

/// `old` and `new` as a unified diff with `context` lines around each
/// change; empty when they are equal.
pub fn unified(old: &str, new: &str, name: &str, context: usize) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let ops = align(&a, &b);
    if ops.iter().all(|(op, _, _)| *op == Op::Same) {
        return String::new();
    }
    let mut out = format!("--- {name}\n+++ {name} (promoted)\n");
    // Hunks: runs of ops within `context` of a change.
    let changed: Vec<usize> = (0..ops.len()).filter(|&k| ops[k].0 != Op::Same).collect();
    let mut k = 0;
    while k < changed.len() {
        let start = changed[k].saturating_sub(context);
        let mut end = changed[k];
        while k < changed.len() && changed[k] <= end + 2 * context {
            end = changed[k];
            k += 1;
        }
        let end = (end + context + 1).min(ops.len());
        let (old_start, new_start) = (ops[start].1, ops[start].2);
        let old_len = ops[start..end].iter().filter(|o| o.0 != Op::Add).count();
        let new_len = ops[start..end].iter().filter(|o| o.0 != Op::Del).count();
        out.push_str(&format!(
            "@@ -{},{old_len} +{},{new_len} @@\n",
            old_start + 1,
            new_start + 1
        ));
        for &(op, i, j) in &ops[start..end] {
            match op {
                Op::Same => out.push_str(&format!(" {}\n", a[i])),
                Op::Del => out.push_str(&format!("-{}\n", a[i])),
                Op::Add => out.push_str(&format!("+{}\n", b[j])),
            }
        }
    }
    out
}

/// Each step of the edit script with the old and new line index it is at.
fn align(a: &[&str], b: &[&str]) -> Vec<(Op, usize, usize)> {
    let mut ops = Vec::with_capacity(a.len() + b.len());
    // The changed lines between two runs of equal ones, whatever ops the
    // algorithm split them into.
    let mut gap: Option<(std::ops::Range<usize>, std::ops::Range<usize>)> = None;
    let flush = |gap: &mut Option<(std::ops::Range<usize>, std::ops::Range<usize>)>,
                 ops: &mut Vec<(Op, usize, usize)>| {
        if let Some((old, new)) = gap.take() {
            // Deletions first: a changed line reads `-old` then `+new`, as
            // diff(1) prints it.
            ops.extend(old.clone().map(|i| (Op::Del, i, new.start)));
            ops.extend(new.map(|j| (Op::Add, old.end, j)));
        }
    };
    for op in similar::capture_diff_slices(Algorithm::Myers, a, b) {
        let (tag, old, new) = op.as_tag_tuple();
        if tag == DiffTag::Equal {
            flush(&mut gap, &mut ops);
            ops.extend(old.zip(new).map(|(i, j)| (Op::Same, i, j)));
            continue;
        }
        gap = Some(match gap {
            Some((o, n)) => (o.start..old.end, n.start..new.end),
            None => (old, new),
        });
    }
    flush(&mut gap, &mut ops);
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(old: &str, new: &str, expect: &str) {
        assert_eq!(unified(old, new, "f.rs", 1), expect);
    }

    #[test]
    fn equal_texts_have_no_diff() {
        check("a\nb\n", "a\nb\n", "");
    }

    #[test]
    fn a_changed_line_shows_with_its_context() {
        check(
            "a\nb\nc\nd\ne\n",
            "a\nb\nX\nd\ne\n",
            "--- f.rs\n+++ f.rs (promoted)\n@@ -2,3 +2,3 @@\n b\n-c\n+X\n d\n",
        );
    }

    #[test]
    fn a_header_added_on_top() {
        check(
            "fn f() {}\n",
            "// header\n\nfn f() {}\n",
            "--- f.rs\n+++ f.rs (promoted)\n@@ -1,1 +1,3 @@\n+// header\n+\n fn f() {}\n",
        );
    }

    #[test]
    fn distant_changes_are_separate_hunks() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n";
        let new = "X\n2\n3\n4\n5\n6\n7\nY\n";
        let d = unified(old, new, "f.rs", 1);
        assert_eq!(d.matches("@@ -").count(), 2, "{d}");
        assert!(d.contains("-1\n+X\n") && d.contains("-8\n+Y\n"), "{d}");
    }

    #[test]
    fn every_old_line_is_kept_or_removed_and_every_new_line_kept_or_added() {
        let old = "a\nb\nc\nb\na\n";
        let new = "b\na\nc\na\nb\n";
        let ops = align(
            &old.lines().collect::<Vec<_>>(),
            &new.lines().collect::<Vec<_>>(),
        );
        assert_eq!(ops.iter().filter(|o| o.0 != Op::Add).count(), 5);
        assert_eq!(ops.iter().filter(|o| o.0 != Op::Del).count(), 5);
    }
}
