//! Random loss: Bernoulli or Gilbert–Elliott.
//!
//! Gilbert–Elliott in a nutshell: two states, Good (no loss) and Bad (every packet lost). With
//! average loss rate `p` and mean burst length `L` packets:
//!
//! ```text
//! P(Bad → Good) = 1 / L
//! P(Good → Bad) = p / ((1 − p) · L)      so that the stationary share of Bad is p
//! ```
//!
//! `L ≤ 1` means no bursts: plain independent loss with probability `p`.

use crate::rng::SimRng;

/// A loss process for one direction.
#[derive(Debug, Clone)]
pub struct LossModel {
    bad: bool,
}

impl Default for LossModel {
    fn default() -> Self {
        Self::new()
    }
}

impl LossModel {
    /// Start in the Good state.
    pub fn new() -> Self {
        LossModel { bad: false }
    }

    /// Whether the next packet is lost, for average rate `p` and mean burst length `burst`.
    pub fn lose(&mut self, rng: &mut SimRng, p: f64, burst: f64) -> bool {
        if p <= 0.0 {
            self.bad = false;
            return false;
        }
        if p >= 1.0 {
            return true;
        }
        if burst <= 1.0 {
            return rng.chance(p);
        }
        let to_good = 1.0 / burst;
        let to_bad = p / ((1.0 - p) * burst);
        let flip = if self.bad { to_good } else { to_bad };
        if rng.unit() < flip {
            self.bad = !self.bad;
        }
        self.bad
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_model_keeps_the_average_and_makes_bursts() {
        let mut rng = SimRng::new(5, 1);
        let mut m = LossModel::new();
        let n = 400_000;
        let mut lost = 0;
        let mut bursts = 0;
        let mut prev = false;
        for _ in 0..n {
            let l = m.lose(&mut rng, 0.01, 8.0);
            lost += usize::from(l);
            bursts += usize::from(l && !prev);
            prev = l;
        }
        let rate = lost as f64 / n as f64;
        assert!((0.008..0.012).contains(&rate), "rate {rate}");
        let mean_burst = lost as f64 / bursts as f64;
        assert!((6.5..9.5).contains(&mean_burst), "burst {mean_burst}");
    }
}
