//! Learning-rate schedule: linear warm-up, then cosine decay to a floor
//! (Loshchilov & Hutter 2017, "SGDR", without restarts).
//!
//! `lr(s) = peak · (s + 1) / warmup` for `s < warmup`, then with
//! `p = (s − warmup) / (total − warmup)`:
//! `lr(s) = peak · (r + (1 − r) · ½ (1 + cos πp))`, `r` the floor ratio.

/// The learning rate of step `step` (0-based) out of `total`.
pub fn learning_rate(step: u64, total: u64, warmup: u64, peak: f64, min_ratio: f64) -> f64 {
    if step < warmup {
        return peak * (step + 1) as f64 / warmup as f64;
    }
    let span = total.saturating_sub(warmup).max(1) as f64;
    let progress = ((step - warmup) as f64 / span).min(1.0);
    peak * (min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warms_up_peaks_and_decays_to_the_floor() {
        let lr = |s| learning_rate(s, 1000, 100, 1e-3, 0.1);
        assert!((lr(0) - 1e-5).abs() < 1e-12);
        assert!((lr(99) - 1e-3).abs() < 1e-12);
        assert!((lr(100) - 1e-3).abs() < 1e-12);
        assert!((lr(550) - 0.55e-3).abs() < 1e-9);
        assert!((lr(1000) - 1e-4).abs() < 1e-12);
        assert!((1..1000).all(|s| s < 100 || lr(s) <= lr(s - 1)));
    }
}
