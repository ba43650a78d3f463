-- The Rust edition a suite's programs are read in (issue 38): `suite run
-- --edition`, as its year. MultiPL-E's `eval_rust.py` runs a plain
-- `rustc PATH -o EXE`, edition 2015; assay's default is 2021. Every suite
-- stored before this column was built as edition 2021, so that is what it
-- reads as, and a resume of it builds in that edition.
ALTER TABLE suites ADD COLUMN edition TEXT NOT NULL DEFAULT '2021'
    CHECK (edition IN ('2015', '2018', '2021', '2024'));
