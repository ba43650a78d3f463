//! Live progress on a terminal: one indicatif bar per stage, drawn on stderr
//! and hidden when stderr is not a terminal (or when asked to be quiet).

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

#[derive(Debug, Clone)]
pub struct Progress {
    bars: MultiProgress,
}

impl Progress {
    /// Draws on stderr when it is a terminal.
    pub fn stderr() -> Progress {
        Progress {
            bars: MultiProgress::with_draw_target(ProgressDrawTarget::stderr()),
        }
    }

    /// Draws nothing.
    pub fn hidden() -> Progress {
        Progress {
            bars: MultiProgress::with_draw_target(ProgressDrawTarget::hidden()),
        }
    }

    /// A bar for one stage of `len` steps.
    pub fn bar(&self, stage: &str, len: usize) -> ProgressBar {
        let style = ProgressStyle::with_template("{prefix:>8} [{bar:30}] {pos}/{len} {elapsed}")
            .expect("static template")
            .progress_chars("=> ");
        self.bars
            .add(ProgressBar::new(len as u64))
            .with_style(style)
            .with_prefix(stage.to_owned())
    }
}
