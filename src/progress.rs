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

    /// A spinner for a stage whose length is unknown.
    pub fn spinner(&self, stage: &str) -> ProgressBar {
        let style = ProgressStyle::with_template("{prefix:>8} {spinner} {elapsed}")
            .expect("static template");
        let bar = self
            .bars
            .add(ProgressBar::new_spinner())
            .with_style(style)
            .with_prefix(stage.to_owned());
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        bar
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
