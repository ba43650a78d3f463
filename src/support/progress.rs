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

    /// Draws on stderr, unless the command prints JSON (a script reads
    /// it, and wants no bars).
    pub fn unless_json(json: bool) -> Progress {
        if json {
            Progress::hidden()
        } else {
            Progress::stderr()
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

impl Progress {
    /// A line for one pool of the draw: done / in flight / failed and output
    /// tokens per second (from usage; unknown tokens are not counted).
    pub fn pool_bar(&self, pool: &str, len: usize) -> PoolBar {
        let style =
            ProgressStyle::with_template("{prefix:>12} [{bar:20}] {pos}/{len} {msg} {elapsed}")
                .expect("static template")
                .progress_chars("=> ");
        let bar = self
            .bars
            .add(ProgressBar::new(len as u64))
            .with_style(style)
            .with_prefix(pool.to_owned());
        PoolBar {
            bar,
            started: std::time::Instant::now(),
            stats: std::sync::Mutex::new(PoolStats::default()),
        }
    }

    /// Prints a line above the bars (or plainly on stderr when they are
    /// hidden), so notices are never lost behind a progress line.
    pub fn note(&self, line: &str) {
        self.bars.suspend(|| eprintln!("{line}"));
    }
}

/// One pool's progress line.
#[derive(Debug)]
pub struct PoolBar {
    bar: ProgressBar,
    started: std::time::Instant,
    stats: std::sync::Mutex<PoolStats>,
}

#[derive(Debug, Default)]
struct PoolStats {
    in_flight: usize,
    failed: usize,
    tokens: u64,
}

impl PoolBar {
    pub fn started(&self) {
        self.stats.lock().unwrap().in_flight += 1;
        self.redraw();
    }

    /// A request ended: `Some(ok, tokens)` for a reply, `None` when it was
    /// cancelled.
    pub fn ended(&self, reply: Option<(bool, Option<u64>)>) {
        {
            let mut s = self.stats.lock().unwrap();
            s.in_flight = s.in_flight.saturating_sub(1);
            if let Some((ok, tokens)) = reply {
                if !ok {
                    s.failed += 1;
                }
                s.tokens += tokens.unwrap_or(0);
            }
        }
        if reply.is_some() {
            self.bar.inc(1);
        }
        self.redraw();
    }

    /// A reply recorded without a request (a stopped pool's share).
    pub fn skipped(&self) {
        self.stats.lock().unwrap().failed += 1;
        self.bar.inc(1);
        self.redraw();
    }

    pub fn inc(&self, k: u64) {
        self.bar.inc(k);
    }

    pub fn finish(&self) {
        self.redraw();
        self.bar.finish();
    }

    fn redraw(&self) {
        let s = self.stats.lock().unwrap();
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        self.bar.set_message(format!(
            "{} in flight  {} failed  {:.0} tok/s",
            s.in_flight,
            s.failed,
            s.tokens as f64 / secs
        ));
    }
}
