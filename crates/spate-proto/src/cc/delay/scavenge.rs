//! `low` as a scavenger: a queue it does not own makes it give way, however short the buffer
//! (the module documentation's "Policies are values of α").
//!
//! ```text
//! bound   α ≤ max(FLOOR · α_low,  r · (q_alone + packet / peak))
//!         α_low = α/16 (`low`'s α), r the rate, q_alone = max(2 ms, 2 % of the RTT) (the
//!         queue a lone flow aims at), packet / peak one full packet's time at the highest
//!         delivery this flow has seen since the path last stepped down (its reading of a
//!         queue is in packets)
//! from    the flow's first share sample (its first settled stale probe): not in start-up
//! step    delivery below 1/COLLAPSE of what it was an RTT earlier, which was at least
//!         MEASURED_PACKETS per delivery window: the peak starts again from there
//! ```
//!
//! Every flow of the delay mode sends `α/q`. `low`'s α (4 687 bytes, about three packets) is a
//! sixteenth of `fair`'s, and next to a loss-based competitor in a deep buffer that is enough:
//! at 100 Mbit/s CUBIC keeps 40–200 ms of queue, and three packets over that is 1–3 % of the
//! link. But where the buffer is short the competitor's queue is short too: at 10 Mbit/s, 20 ms,
//! one BDP, it is at most 20 ms, `low` reads 4–11 ms of it (its floor holds CUBIC's trough),
//! and `α/q` is half the link. The
//! simulator had `low` at 45–55 % of 10 Mbit/s next to CUBIC (`experiments/s59-small-bdp/`),
//! the emulator 40 % next to kernel CUBIC. A scavenger that takes half of a home link from the
//! download it was meant to make room for is not one.
//!
//! LEDBAT's answer is a target in time: whoever holds the queue above it, the scavenger backs
//! off. Here the bound does that for `low` between two limits. `r · q_alone` bits at the rate `r`
//! is a target of `q_alone` seconds of queue whatever the rate, so a queue held above it by
//! someone else makes the rate, and with it the bound, fall — until `FLOOR · α_low`, where the
//! flow holds a fixed 586 bytes and sends `586 B / q` (under 10 % of a 10 Mbit/s link whose
//! queue stands at 5 ms). Alone, the rate is the capacity and the bound is the queue a lone `fair`
//! flow aims at; above 19 Mbit/s it is more than `α_low` and nothing changes (`low` next to a
//! `fair` flow at 1 Gbit/s takes the 6 % it took before). Among themselves `low` flows share
//! as before while their rates are high; at low rates the bound makes their rates neutral to
//! one another (any split with the queue at `q_alone` is an equilibrium), as LEDBAT's are.
//!
//! `packet / peak`: a flow reads the queue from its delay floor, and the floor can be up to a
//! packet short of a full packet's delay: a smaller packet set it. At 2 Mbit/s a lone flow read
//! 5.8 ms of queue on an empty link and steered down to 0.8 Mbit/s against a 2 ms target until
//! a drain re-based its floor 10 s later. One packet at the highest delivery seen keeps that
//! reading inside the target without counting competitors' packets: the flow's own rate would
//! (a packet at 0.5 Mbit/s is 24 ms, and `α` would never fall below a packet).
//!
//! *Steps down.* A step down leaves the floor short too: from 100 to 2 Mbit/s every packet
//! takes 6 ms longer to cross the bottleneck. Had the peak stayed at 100 Mbit/s, the flow would
//! read a packet's time as a queue it does not hold and sink to `FLOOR · α_low` over it. At a
//! few packets per RTT its stale probes measure nothing, so it would wait for the floor's 10 s
//! window. After steps from 100 Mbit/s or 1 Gbit/s to 1–3 Mbit/s it took up to 11 s to use the
//! link again (`experiments/s60-scavenger/steps.sh`; 0.3–2 s before the bound).
//!
//! A competitor does not take a flow's delivery down eightfold within an RTT (CUBIC's slow
//! start at most doubles per RTT); a step does. So after one the peak is what is delivered
//! then: the new capacity, or this flow's share of it. The 18 steps then deliver within 0.06
//! of what they did before the bound over the 20 s after the step. They reach 90 % of the new
//! rate in 0.7–3.3 s (0.3–2 s before), except three from 100 Mbit/s at 20 ms RTT, which take
//! 10 s (one did before). A delivery window of a few packets swings by more than eightfold
//! between one packet and none (a yielding flow at 0.5 Mbit/s, 20 ms), and a peak reset
//! there would undo the bound. So the earlier delivery must have been [`MEASURED_PACKETS`]
//! per window.
//!
//! *Not in start-up.* Before its first stale probe the flow's rate is far below the capacity and
//! its queue is its own; a target of 2 ms there stopped growth early, and a lone flow on 20 Mbit/s,
//! 100 ms took 0.83 of the link over 40 s instead of 0.94.
//!
//! Measured (`experiments/s60-scavenger/`): next to CUBIC on the 18 small paths `low`'s share
//! went from 0.03–0.55 to 0.003–0.10 (simulator), and next to kernel CUBIC in the emulator
//! from 40 to 7.5–7.7 % (10 Mbit/s, 20 ms) and from 58 to 8.7–9.5 % (20 Mbit/s, 10 ms). Alone, over
//! 120 runs of 2–50 Mbit/s, 10–200 ms and 0–2 % loss, utilization went 0.936 → 0.933 and the
//! queue p50 4.3 → 2.8 ms. The worst is 2 Mbit/s at 10 ms (a buffer under two packets):
//! 0.937–0.947 → 0.891–0.923.

use core::time::Duration;

use crate::time::Instant;

/// The least the bound takes `low`'s α to, as a fraction of it: 586 bytes, half a packet.
/// Lower yields more, and recovers worse from a floor a packet short: at 1/16 the 18 small
/// paths gave 0.2–4.8 % next to CUBIC (1/8: 0.3–10.4 %), but (before the step rule) in the
/// 20 s after a step from 100 to 1–3 Mbit/s a lone flow delivered 0.60–1.05 times the new
/// capacity (1/8: 0.66–1.12; without the bound 0.96–1.30, the excess over 1 being the queue
/// the step left).
const FLOOR: f64 = 1.0 / 8.0;

/// Delivery falling below 1/`COLLAPSE` of what it was an RTT earlier is a step down.
const COLLAPSE: f64 = 8.0;

/// Packets the earlier delivery window must have held for a fall to count as a step.
const MEASURED_PACKETS: f64 = 16.0;

/// What `low` has measured that its bound needs.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Scavenge {
    /// A share sample was taken: start-up is over.
    settled: bool,
    /// The highest delivery rate seen since the last step down, bits/s.
    peak: f64,
    /// A delivery rate (bits/s) and when it was measured, at most once per RTT: what a fall
    /// is compared with.
    earlier: Option<(Instant, f64)>,
}

impl Scavenge {
    /// The receiver measured delivery `d`, bits/s, over `window`; `packet` is a full packet's
    /// bits.
    pub(super) fn on_delivery(
        &mut self,
        now: Instant,
        d: f64,
        rtt: Duration,
        window: Duration,
        packet: f64,
    ) {
        match self.earlier {
            Some((t, _)) if now.saturating_since(t) < rtt => {}
            Some((_, before)) => {
                let measured = before * window.as_secs_f64() >= MEASURED_PACKETS * packet;
                if measured && d * COLLAPSE < before {
                    self.peak = d;
                }
                self.earlier = Some((now, d));
            }
            None => self.earlier = Some((now, d)),
        }
        self.peak = self.peak.max(d);
    }

    /// A stale probe took a share sample.
    pub(super) fn on_sample(&mut self) {
        self.settled = true;
    }

    /// α, bits, bounded for a scavenger: `alpha_low` is `low`'s α in bits, `rate` the pacing
    /// rate (bits/s), `alone` the queue a lone flow aims at and `packet` a full packet's bits.
    pub(super) fn bound(
        &self,
        alpha: f64,
        alpha_low: f64,
        rate: f64,
        alone: f64,
        packet: f64,
    ) -> f64 {
        if !self.settled || self.peak <= 0.0 {
            return alpha;
        }
        let target = alone + packet / self.peak;
        alpha.min((FLOOR * alpha_low).max(rate * target))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_down_starts_the_peak_again_and_a_sparse_window_does_not() {
        let (rtt, window, packet) = (
            Duration::from_millis(50),
            Duration::from_millis(25),
            12_000.0,
        );
        let at = |ms: u64| Instant::ZERO + Duration::from_millis(ms);
        let mut s = Scavenge::default();
        s.on_delivery(at(0), 100e6, rtt, window, packet);
        // Halved within an RTT (a competitor arrived): the peak stays.
        s.on_delivery(at(50), 50e6, rtt, window, packet);
        assert_eq!(s.peak, 100e6);
        // Fifty times less an RTT later (a step to 1 Mbit/s): the peak starts again.
        s.on_delivery(at(100), 1e6, rtt, window, packet);
        assert_eq!(s.peak, 1e6);
        // At 1 Mbit/s a 25 ms window holds two packets: its swings say nothing.
        s.on_delivery(at(150), 0.1e6, rtt, window, packet);
        assert_eq!(s.peak, 1e6);
    }

    #[test]
    fn the_bound_waits_for_start_up_then_gives_way_to_a_queue_held_by_others() {
        let alpha_low = 37_500.0;
        let packet = 12_000.0;
        let mut s = Scavenge::default();
        let ms = Duration::from_millis;
        s.on_delivery(Instant::ZERO, 10e6, ms(20), ms(20), packet);
        // Start-up: nothing bounded.
        assert_eq!(s.bound(alpha_low, alpha_low, 5e6, 0.002, packet), alpha_low);
        s.on_sample();
        // Alone at 10 Mbit/s: 2 ms and a packet (1.2 ms) of queue, 32 kbit.
        let alone = s.bound(alpha_low, alpha_low, 10e6, 0.002, packet);
        assert!((alone - 32_000.0).abs() < 1.0, "{alone}");
        // Fast enough that the target exceeds α: α as it was.
        assert_eq!(
            s.bound(alpha_low, alpha_low, 20e6, 0.002, packet),
            alpha_low
        );
        // Yielding at 0.5 Mbit/s: the floor, an eighth.
        let low = s.bound(alpha_low, alpha_low, 0.5e6, 0.002, packet);
        assert_eq!(low, alpha_low / 8.0);
        // Never above what the flow aimed at already (alone, a ceiling).
        assert_eq!(s.bound(1000.0, alpha_low, 10e6, 0.002, packet), 1000.0);
    }
}
