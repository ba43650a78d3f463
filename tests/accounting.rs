//! Phase accounting against known loads. One test in its own binary, so no
//! other test's threads add CPU time to the process while it measures.

use std::time::{Duration, Instant};

use assay::account::{Phase, PhaseGuard};

fn spin(for_: Duration) {
    let until = Instant::now() + for_;
    let mut x = 0u64;
    while Instant::now() < until {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
    }
    std::hint::black_box(x);
}

#[test]
fn phases_measure_idle_one_core_and_a_child() {
    let guard = PhaseGuard::start(Phase::Draw);
    std::thread::sleep(Duration::from_millis(450));
    let idle = guard.finish();
    assert!(idle.wall_s >= 0.45, "{idle:?}");
    assert!(idle.cpu_s < 0.1, "{idle:?}");

    let guard = PhaseGuard::start(Phase::Probe);
    spin(Duration::from_millis(700));
    let busy = guard.finish();
    assert!(busy.avg_busy > 0.6 && busy.avg_busy < 1.3, "{busy:?}");
    assert!(busy.peak_busy >= busy.avg_busy, "{busy:?}");
    assert!(busy.peak_busy > 0.6, "{busy:?}");

    // A child's CPU counts once it is reaped.
    let guard = PhaseGuard::start(Phase::ScoreRun);
    let status = std::process::Command::new("sh")
        .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
        .status()
        .unwrap();
    assert!(status.success());
    let child = guard.finish();
    assert!(child.cpu_s > 0.05, "{child:?}");
    assert!(child.avg_busy > 0.5, "{child:?}");
}
