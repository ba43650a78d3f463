//! pass@k and the paired bootstrap that compares two runs of one suite.
//!
//! pass@k is Chen et al. (2021)'s unbiased estimator: with n samples of
//! which c pass, 1 - C(n-c, k) / C(n, k), computed as
//! 1 - prod_{i=n-c+1}^{n} (1 - k/i) so that no binomial is ever formed.

/// pass@k of one problem; None when k is 0 or more than n samples, or c > n.
pub fn pass_at_k(n: usize, c: usize, k: usize) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    if n - c < k {
        // Every choice of k samples holds a passing one.
        return Some(1.0);
    }
    let fail_all: f64 = (n - c + 1..=n).map(|i| 1.0 - k as f64 / i as f64).product();
    Some(1.0 - fail_all)
}

/// The suite mean of pass@k over problems given as (n, c). None when there
/// is no problem or one has fewer than k samples (its pass@k is undefined,
/// and a mean over the others would not be the suite's).
pub fn suite_pass_at_k(problems: &[(usize, usize)], k: usize) -> Option<f64> {
    if problems.is_empty() {
        return None;
    }
    let mut sum = 0.0;
    for &(n, c) in problems {
        sum += pass_at_k(n, c, k)?;
    }
    Some(sum / problems.len() as f64)
}

/// The difference of two runs' suite means (b - a) and its bootstrap
/// interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub diff: f64,
    pub low: f64,
    pub high: f64,
    pub resamples: usize,
    pub seed: u64,
}

/// Paired bootstrap 95% interval of mean(b) - mean(a), where a[i] and b[i]
/// are the two runs' figures (pass@k, say) of problem i. Each resample draws
/// problems with replacement and takes the mean of their differences; the
/// interval is the 2.5th and 97.5th percentiles (nearest rank over the
/// sorted resamples). Seeded: the same input and seed give the same interval
/// on every machine. None when the runs have different or no problems, or
/// `resamples` is 0.
pub fn paired_bootstrap(a: &[f64], b: &[f64], resamples: usize, seed: u64) -> Option<Interval> {
    if a.len() != b.len() || a.is_empty() || resamples == 0 {
        return None;
    }
    let diffs: Vec<f64> = a.iter().zip(b).map(|(x, y)| y - x).collect();
    let n = diffs.len();
    let mut rng = SplitMix64(seed);
    let mut means: Vec<f64> = (0..resamples)
        .map(|_| (0..n).map(|_| diffs[rng.below(n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let rank = |q: f64| means[((resamples - 1) as f64 * q).round() as usize];
    Some(Interval {
        diff: diffs.iter().sum::<f64>() / n as f64,
        low: rank(0.025),
        high: rank(0.975),
        resamples,
        seed,
    })
}

/// SplitMix64 (Steele, Lea and Flood 2014): tiny, seedable, and the same
/// stream everywhere, which is all a reproducible bootstrap needs.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (multiply-shift; the bias is below 2^-32 for any
    /// suite size).
    fn below(&mut self, n: usize) -> usize {
        ((self.next() as u128 * n as u128) >> 64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1 - C(n-c,k)/C(n,k) with exact integer binomials, for small n.
    fn exact(n: u64, c: u64, k: u64) -> f64 {
        fn choose(n: u64, k: u64) -> u128 {
            if k > n {
                return 0;
            }
            (0..k).fold(1u128, |acc, i| acc * (n - i) as u128 / (i + 1) as u128)
        }
        1.0 - choose(n - c, k) as f64 / choose(n, k) as f64
    }

    #[test]
    fn matches_the_exact_binomial_form() {
        for n in 1..=20u64 {
            for c in 0..=n {
                for k in 1..=n {
                    let got = pass_at_k(n as usize, c as usize, k as usize).unwrap();
                    assert!(
                        (got - exact(n, c, k)).abs() < 1e-12,
                        "n={n} c={c} k={k}: {got}"
                    );
                }
            }
        }
    }

    #[test]
    fn known_values_and_bounds() {
        assert_eq!(pass_at_k(10, 0, 1), Some(0.0));
        assert_eq!(pass_at_k(10, 10, 5), Some(1.0));
        assert!((pass_at_k(10, 3, 1).unwrap() - 0.3).abs() < 1e-12);
        assert_eq!(pass_at_k(10, 9, 2), Some(1.0));
        assert_eq!(pass_at_k(5, 1, 6), None);
        assert_eq!(pass_at_k(5, 1, 0), None);
        assert_eq!(pass_at_k(5, 6, 1), None);
        // Large n stays finite and in [0, 1] where binomials would overflow.
        let big = pass_at_k(1000, 1, 100).unwrap();
        assert!((big - 0.1).abs() < 1e-9, "{big}");
    }

    #[test]
    fn suite_mean_needs_k_samples_everywhere() {
        let problems = [(10, 10), (10, 0), (10, 5)];
        assert!((suite_pass_at_k(&problems, 1).unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(suite_pass_at_k(&[(10, 1), (5, 1)], 10), None);
        assert_eq!(suite_pass_at_k(&[], 1), None);
    }

    #[test]
    fn bootstrap_is_deterministic_and_brackets_the_difference() {
        let a: Vec<f64> = (0..40)
            .map(|i| if i % 3 == 0 { 1.0 } else { 0.0 })
            .collect();
        let b: Vec<f64> = (0..40)
            .map(|i| if i % 2 == 0 { 1.0 } else { 0.0 })
            .collect();
        let one = paired_bootstrap(&a, &b, 2000, 7).unwrap();
        assert_eq!(paired_bootstrap(&a, &b, 2000, 7), Some(one));
        assert!(one.low <= one.diff && one.diff <= one.high, "{one:?}");
        assert!(one.low < one.high);
        let expect = b.iter().sum::<f64>() / 40.0 - a.iter().sum::<f64>() / 40.0;
        assert!((one.diff - expect).abs() < 1e-12);
        // Identical runs: every resample's difference is 0.
        let same = paired_bootstrap(&a, &a, 500, 1).unwrap();
        assert_eq!((same.diff, same.low, same.high), (0.0, 0.0, 0.0));
        assert_eq!(paired_bootstrap(&a, &b[..3], 10, 1), None);
        assert_eq!(paired_bootstrap(&[], &[], 10, 1), None);
    }
}
