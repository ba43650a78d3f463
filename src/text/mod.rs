//! Pure functions of text: a reply's markdown and reasoning, the
//! candidate extracted from it, its fingerprints for dedup, and the
//! policy a candidate's code is checked against before any build. No IO.

pub mod dedup;
pub mod extract;
pub mod markdown;
pub mod policy;
