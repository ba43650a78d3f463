//! A line diff for `assay promote`'s preview: pure, no IO.
//!
//! Longest common subsequence over lines, printed as a unified diff. A
//! committed candidate is a few hundred lines at most, so the quadratic
//! table is small; past `MAX_CELLS` the diff gives up on alignment and shows
//! the whole old file removed and the new one added (still a true diff).

/// Beyond this many table cells (old lines x new lines) no alignment is
/// searched for.
const MAX_CELLS: usize = 4_000_000;

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
    let (n, m) = (a.len(), b.len());
    let mut ops = Vec::with_capacity(n + m);
    if n.saturating_mul(m) > MAX_CELLS {
        ops.extend((0..n).map(|i| (Op::Del, i, 0)));
        ops.extend((0..m).map(|j| (Op::Add, n, j)));
        return ops;
    }
    // lcs[i][j]: the common subsequence of a[i..] and b[j..].
    let mut lcs = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[at(i, j)] = if a[i] == b[j] {
                lcs[at(i + 1, j + 1)] + 1
            } else {
                lcs[at(i + 1, j)].max(lcs[at(i, j + 1)])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            ops.push((Op::Same, i, j));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[at(i + 1, j)] >= lcs[at(i, j + 1)]) {
            // Deletions first on a tie: a changed line reads `-old` then
            // `+new`, as diff(1) prints it.
            ops.push((Op::Del, i, j));
            i += 1;
        } else {
            ops.push((Op::Add, i, j));
            j += 1;
        }
    }
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
