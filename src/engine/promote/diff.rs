//! A line diff for `assay promote`'s preview: pure, no IO.
//!
//! `similar` does all of it: a Myers diff over lines (linear memory, a
//! minimal edit script) printed as a unified diff, hunks of changes within
//! `context` lines of each other, as diff(1) prints them.

use similar::TextDiff;

/// `old` and `new` as a unified diff with `context` lines around each
/// change; empty when they are equal.
pub fn unified(old: &str, new: &str, name: &str, context: usize) -> String {
    TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(context)
        .header(name, &format!("{name} (promoted)"))
        .to_string()
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
        // A range of one line is its start alone, as diff(1) writes it.
        check(
            "fn f() {}\n",
            "// header\n\nfn f() {}\n",
            "--- f.rs\n+++ f.rs (promoted)\n@@ -1 +1,3 @@\n+// header\n+\n fn f() {}\n",
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
    fn lines_that_change_places_read_old_then_new() {
        let old = "a\nb\nc\nb\na\n";
        let new = "b\na\nc\na\nb\n";
        let d = unified(old, new, "f.rs", 5);
        let body: Vec<&str> = d.lines().skip(3).collect();
        // Every old line kept or removed, every new line kept or added.
        let old_side: Vec<&str> = body
            .iter()
            .filter(|l| !l.starts_with('+'))
            .map(|l| &l[1..])
            .collect();
        let new_side: Vec<&str> = body
            .iter()
            .filter(|l| !l.starts_with('-'))
            .map(|l| &l[1..])
            .collect();
        assert_eq!(old_side, old.lines().collect::<Vec<_>>(), "{d}");
        assert_eq!(new_side, new.lines().collect::<Vec<_>>(), "{d}");
        assert!(d.starts_with("--- f.rs\n+++ f.rs (promoted)\n@@ -1,5 +1,5 @@\n"));
    }

    #[test]
    fn a_missing_final_newline_is_said() {
        check(
            "fn f() {}\n",
            "fn f() {}",
            "--- f.rs\n+++ f.rs (promoted)\n@@ -1 +1 @@\n-fn f() {}\n+fn f() {}\n\\ No newline at end of file\n",
        );
    }
}
