//! Building candidates and programs: the generated cargo package and its
//! scrubbed cargo ([`package`]), the executor that builds units in shared
//! or isolated images and narrows a failing group ([`exec`]), the probe's
//! verdicts and streaming waves ([`probe`]), and the warm work directory
//! the builds share ([`work_dir`]).

pub mod exec;
pub mod package;
pub mod probe;
pub mod verdict;
pub mod work_dir;
