use super::*;

fn problem(prompt: &str, tests: &str) -> Problem {
    Problem {
        name: "p".to_owned(),
        prompt: prompt.to_owned(),
        tests: tests.to_owned(),
        stop_tokens: vec!["\n}".to_owned()],
    }
}

const PROMPT: &str = "/// Doubles.\nfn double(x: i32) -> i32 {\n";
const TESTS: &str =
    "}\n\nfn main() {\n    let candidate = double;\n    assert_eq!(candidate(2), 4);\n    assert_eq!(candidate(0), 0);\n}\n";

fn laid(prompt: &str, completion: &str, tests: &str) -> Result<ProgramModule, Unlaid> {
    let p = problem(prompt, tests);
    let program = super::super::completion_program(&p, completion);
    lay_out(&p, &program, "c7", true, Edition::E2021)
}

#[test]
fn the_solution_keeps_its_lines_and_the_tests_come_first() {
    let m = laid(PROMPT, "    x * 2\n}\n\nfn helper() {}\n", TESTS).unwrap();
    // Line for line the solution (prompt, the completion cut at its stop
    // token, the tests' brace), glue only on line 1.
    let lines: Vec<&str> = m.solution.lines().collect();
    assert!(
        lines[0].starts_with("#![forbid(unsafe_code)]  #[allow("),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains("pub(crate) mod __assay_tests { include!(\"c7.tests.rs\"); }"),
        "{}",
        lines[0]
    );
    assert!(lines[0].ends_with("/// Doubles."), "{}", lines[0]);
    // The stop token cut the helper away, as MultiPL-E cuts it.
    assert_eq!(lines[1..], ["fn double(x: i32) -> i32 {", "    x * 2", "}"]);
    syn::parse_file(&m.solution).expect(&m.solution);
    // The tests import the entry by name and nothing else.
    assert!(m.tests.contains("use super::{double};"), "{}", m.tests);
    assert!(!m.tests.contains("helper"), "{}", m.tests);
    assert!(m.tests.contains("fn __assay_main()"), "{}", m.tests);
    assert!(m
        .tests
        .contains("pub(crate) fn __assay_dispatch(which: &str) -> bool"));
    assert!(
        m.tests.contains("\"1\" => __assay_case_1(),"),
        "{}",
        m.tests
    );
    assert!(
        m.tests.contains(
            "fn __assay_signature(__assay_a0: i32) -> i32  {\n    super::double(__assay_a0)\n}"
        ),
        "{}",
        m.tests
    );
    syn::parse_file(&m.tests).expect(&m.tests);
    assert!(matches!(m.split, Split::Cases { ref cases, .. } if cases.len() == 2));
}

#[test]
fn a_macro_the_solution_defines_comes_after_the_tests_module() {
    // Closes the entry with an indented brace, then shadows the asserts.
    let shadow = "    x + 1\n  }\nmacro_rules! assert_eq { ($($t:tt)*) => {} }\nfn opened() {\n";
    let m = laid(PROMPT, shadow, TESTS).unwrap();
    let tests_at = m.solution.find("mod __assay_tests").unwrap();
    let macro_at = m.solution.find("macro_rules!").unwrap();
    assert!(tests_at < macro_at, "{}", m.solution);
    syn::parse_file(&m.solution).expect(&m.solution);
}

#[test]
fn inner_attributes_stay_first() {
    let p = problem(PROMPT, TESTS);
    let program = super::super::chat_program(
        &p,
        "#![allow(dead_code)]\n//! doc\nfn double(x: i32) -> i32 { x * 2 }",
    );
    let m = lay_out(&p, &program, "c1", false, Edition::E2021).unwrap();
    assert!(
        m.solution
            .starts_with("#![allow(dead_code)]\n//! doc #[allow(unused_imports, dead_code, unused_macros)] pub(crate) mod __assay_tests"),
        "{}",
        m.solution
    );
    syn::parse_file(&m.solution).expect(&m.solution);
    // The code's three lines, the glue on the second.
    assert_eq!(m.solution.lines().count(), 3);
}

#[test]
fn prompt_names_the_tests_use_are_imported_and_their_own_are_not() {
    let prompt = "use std::collections::HashMap;\nuse std::fmt::{Debug, Display as Show};\n\n\
                  fn count(v: Vec<i32>) -> HashMap<i32, usize> {\n";
    let tests = "}\n\nuse std::collections::HashSet;\nfn main() {\n    let candidate = count;\n    \
                 let _: HashSet<i32> = HashSet::new();\n    assert_eq!(candidate(vec![1]), HashMap::from([(1, 1)]));\n}\n";
    let m = laid(prompt, "    let mut m = HashMap::new();\n    for x in v { *m.entry(x).or_insert(0) += 1; }\n    m\n}\n", tests).unwrap();
    assert!(
        m.tests.contains("use super::{HashMap, count};"),
        "{}",
        m.tests
    );
    assert!(
        m.tests.contains("-> HashMap < i32 , usize >"),
        "{}",
        m.tests
    );
    // Whole: a binding that runs code keeps `main` one case.
    assert!(matches!(m.split, Split::Whole { .. }), "{:?}", m.split);
}

#[test]
fn functions_of_the_tests_are_declared_beside_the_solution() {
    let m = laid(PROMPT, "    x * 2\n}\n", TESTS).unwrap();
    assert!(m
        .solution
        .lines()
        .next()
        .unwrap()
        .contains(" #[allow(dead_code)] fn main() {} "));
}

#[test]
fn what_cannot_be_laid_out() {
    // A solution syn cannot read, or that starts with a shebang.
    assert_eq!(laid(PROMPT, "    x *\n}\n", TESTS), Err(Unlaid::Unparsed));
    assert_eq!(laid("#!/bin/sh\n", "", TESTS), Err(Unlaid::Unparsed));
    // A program that does not end with the problem's tests.
    let p = problem(PROMPT, TESTS);
    assert_eq!(
        lay_out(&p, "fn main() {}", "c0", true, Edition::E2021),
        Err(Unlaid::Unparsed)
    );
    // Tests with no main, or that do not parse.
    assert_eq!(
        laid(PROMPT, "    x\n}\n", "}\nfn mian() {}\n"),
        Err(Unlaid::BrokenTests)
    );
    assert_eq!(
        laid(PROMPT, "    x\n}\n", "}\nfn main() {"),
        Err(Unlaid::BrokenTests)
    );
    assert_eq!(Unlaid::Unparsed.as_str(), "unparsed");
}

#[test]
fn the_root_dispatches_to_each_program_and_marks_a_return() {
    let root = image_root(&["c3".to_owned(), "c10".to_owned()]);
    assert!(root.contains("#[path = \"c3.rs\"]\nmod c3;"), "{root}");
    assert!(
        root.contains("\"c10\" => c10::__assay_tests::__assay_dispatch(&__assay_which),"),
        "{root}"
    );
    assert!(root.contains("::std::process::exit(64)"), "{root}");
    syn::parse_file(&root).expect(&root);
}

#[test]
fn no_pin_without_a_plain_signature() {
    let m = laid(
        "fn f(&self) -> i32 {\n",
        "    1\n}\n",
        "}\nfn main() { assert!(true); }\n",
    );
    assert!(!m.unwrap().tests.contains("__assay_signature"));
    let m = laid("// no function\n", "", "fn main() { assert!(true); }\n").unwrap();
    assert!(!m.tests.contains("__assay_signature"));
}

#[test]
fn crate_paths_name_the_programs_own_module() {
    let p = problem(PROMPT, TESTS);
    let program = super::super::chat_program(
        &p,
        "fn double(x: i32) -> i32 { crate::helper(x) }\nfn helper(x: i32) -> i32 { x * 2 }",
    );
    let m = lay_out(&p, &program, "c4", true, Edition::E2021).unwrap();
    assert!(
        m.solution.contains("crate::c4::helper(x)"),
        "{}",
        m.solution
    );
    assert_eq!(m.solution.lines().count(), 2);
}
