//! Leaves every other module may use and that use nothing of the crate:
//! phase accounting, the shared wait policy, timestamps, printed command
//! lines, reading input files, who owns a run, progress on a terminal,
//! aligned tables and the test points.

pub mod account;
pub mod backoff;
pub mod clock;
pub mod hint;
pub mod input;
pub mod owner;
pub mod progress;
pub mod table;
pub mod testpoint;
