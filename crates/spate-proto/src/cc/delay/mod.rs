//! The adaptive delay-based controller behind the `fair`, `high` and `low` policies.
//!
//! # The idea in one sentence
//!
//! Each flow keeps a small, fixed amount of its own data — `α` bytes — waiting in the
//! bottleneck queue; since every flow sees the same queueing delay `q`, every flow then sends at
//! `α / q`, so flows with equal `α` share the link equally whatever their RTT, and the queue
//! stays at `Σα / capacity` (half a millisecond for one flow at 1 Gbit/s).
//!
//! # In a nutshell
//!
//! ```text
//! q      = owd − base_owd          queueing delay: receiver-measured one-way delay (minimum
//!                                  over 3 report gaps, 2–10 ms) minus its windowed minimum (10 s)
//! rtt    = min_rtt + q
//! D      = delivery rate measured by the receiver over w = max(rtt/2, 20 ms) (IP bytes)
//! p      = fraction of bytes lost, averaged over 1 s
//! q*     = 8·α / r                 this flow's equilibrium queueing delay at rate r (α less
//!                                  while the flow holds the bottleneck alone: below)
//! T      = 2 · (rtt + 10 ms)       steering horizon: two loop delays
//! L      = max(rtt, delay window)  growth's loop delay: a new queue takes the window to show
//!
//! grow   if q < q*/4 for a whole RTT, unless D < r(now − rtt − w) / 2 for a whole RTT:
//!                                      r ← max(r · 2^(g'·dt/L), D_last)
//!                                      g ← min(1, g · 2^(dt/L))   (doublings per L)
//!                                      g' = min(g, 1/32) while D' ≤ 1.02 · D_last, else g
//!                                      (not in a buffer that overflows, nor with `compete`)
//! steer  otherwise:  r ← max(D' + (8·α − D·q) / T,  D'/4)            g ← 1/8
//!                    D' = D / (1 − p) while D·q < 1.5·8·α, else D;  plus u
//! u      = sending capacity the sender left unused while the window's packets left (bits/s)
//! limited: u > 5 % of the rate then:  no growth, and steering cuts only for q > q* over an RTT
//! drain  at the first steering step after growth, if the bits sent over the latest RTT sample
//!        exceed D'·min_rtt by more than 4·8·α (and D kept up with what was sent): r ← D',
//!        and half of it is sent until they no longer exceed D'·min_rtt + 8·α (overshoot.rs)
//! ```
//!
//! *Steer* is a proportional controller on a first-order plant: the queue obeys
//! `dQ/dt = Σr − C`, the delivered rate `D` is the flow's share of `C`, and each flow pushes its
//! own queued bits `D·q` towards `8·α` over `T`. With loop delay `d ≈ rtt`, `dQ/dt = −(Q(t−d) −
//! Q*)/T` converges with little overshoot for `d/T ≤ 1/2`. (FAST TCP's law paced as
//! `r = w/(base + q)` has the gain `C/rtt` on a one-RTT-old queue, `d/T ≈ 1`: it oscillated
//! between an empty and a full buffer in FASP scenario 2.) At the fixed point `D·q = 8·α`
//! for every flow, so all flows with the same `α` get the same rate, `α/q`, whatever their RTT,
//! and the queue holds `Σα` (0.6 ms for one flow at 1 Gbit/s). Shares converge at a relative
//! speed of about `q/T` per RTT, so fairness among many flows takes seconds, not RTTs.
//!
//! * **Loss is not congestion.** Random loss leaves `q` flat; `D' = D/(1 − p)` credits the
//!   bytes that used the bottleneck and were lost after it, so random loss changes nothing.
//!   Overflow loss comes with a queue far above target: no credit, and steering drains it.
//! * **Find capacity fast.** With no queue for an RTT, the rate grows multiplicatively; growth
//!   speed `g` starts at 1/8 doubling per RTT (a brief empty queue overshoots by ~9 % of an
//!   RTT's data) and doubles every RTT the queue stays empty (100× in about 9 RTTs). The rate
//!   first returns to the last steered delivery rate `D_last`: slow growth is only
//!   for capacity the flow has not seen. Above `D_last` it grows at most 1/32 doubling per
//!   RTT until delivery shows more than `D_last` ([`REGROWTH`]): steering, one loop late,
//!   often empties the queue right at capacity, and growing faster into it overshot by a
//!   whole RTT's worth (a queue swinging between 0 and 20 ms at 250 Mbit/s, 200 ms).
//!   Growth still learns one loop late that it passed capacity, by which time start-up has
//!   paced up to twice what the link carries and half a BDP is on its way to the queue; the
//!   sender knows what it sent, and drains that at once instead of steering it out over
//!   seconds (`overshoot.rs`: at 250 Mbit/s, 200 ms the queue peaked at 99 ms and took 1 s
//!   to go, now 0.2 s; not for flows that may compete).
//! * **Shed it fast.** When capacity drops the queue jumps; steering asks for at most `D`,
//!   the receiver's measured rate, minus the excess over `T` — within one RTT of the drop.
//! * **Policies are values of α**: `fair` = α, `high` = 2α (twice a fair flow's share),
//!   `low` = α/16 (a scavenger: about 1/17 of the link against a fair flow, all of it alone);
//!   once settled, `low` also keeps α at most its rate times a lone flow's queue and a packet,
//!   so a queue others hold above that makes it give way in any buffer (`scavenge.rs`).
//! * **A slow sender is not a slow path.** When the sender leaves pacing credit unused — it
//!   had nothing to send, or its CPU could not keep pace (at 20 Gbit/s on two cores) — the
//!   delivery rate measures the sender, not the path. Steering on it alone ratcheted the rate
//!   down to every dip in what the sender managed (veth at ~20 Gbit/s: 13–17 Gbit/s
//!   delivered, with growth overshooting to 30–49 Gbit/s in between, whose bursts made 0.5–1.3
//!   ms queue spikes). So the unused rate `u` is added back to what was delivered, and while it
//!   exceeds [`SENDER_LIMITED`] the rate is held: a higher pace would not be used, only let
//!   out a burst once the sender catches up. Held means not cut either, unless the queue has
//!   been above target for an RTT: a limited sender does not grow, so a cut for a dip in
//!   delivery, or for a path stall's brief rise in delay, would stay.
//!   On a busy host (the emulator's VM: the sender not scheduled for milliseconds at a time,
//!   the emulator holding packets as long) every such dip cut, and a 100 Mbit/s flow sank to
//!   26–36 Mbit/s for 5 s with no queue; `tests.rs` reproduces it
//!   (`a_busy_host_does_not_ratchet_the_rate_down`).
//!   Waits imposed by the in-flight bound or a silent path are the path's doing and are not
//!   counted.
//! * **Outages.** On a silent path the rate is saved; when feedback returns, sending resumes at
//!   the saved rate instead of starting over. The share (below) is measured again: the outage
//!   may have been a handover.
//! * **Drains keep floors true.** A flow that starts while others hold a queue takes that queue
//!   for its floor and would take twice its share. At the instants of an 8 s grid of UTC
//!   (`grid.rs`), and whenever its floor is [`DRAIN_AFTER`] old, a flow sends at half rate
//!   for twice the queueing delay and a margin, then 1.5× as long (`start.rs`): its own queue
//!   leaves and returns. Flows that read one clock drain together, so the queue empties and
//!   all floors agree, however far apart the flows started. (Until session 51 only the
//!   floor's age timed drains: they coincided for flows whose floors were taken together —
//!   each dip refreshes the others' floors, the mechanism BBR's ProbeRTT relies on — but a
//!   latecomer drained alone and kept its stale floor.) A flow that may compete drains by
//!   floor age only (`grid.rs`).
//! * **Stale floors.** After a handover to a longer path, `owd − base_owd` includes the extra
//!   propagation delay and reads as a standing queue. Every [`PROBE_EVERY`] RTTs (at least
//!   [`PROBE_MIN_INTERVAL`]) with the queue settled near target, the flow sends 15 % faster for
//!   half an RTT and 15 % slower for another half (rate-neutral; less on long, fast paths,
//!   so that the bump adds at most [`PROBE_BUMP`] of queue). If delivery rises by nearly
//!   the bump while the queue does not rise, the queue was not real and the floor is re-based.
//!   The rate is held during any probe: its reports describe the probe, not the path —
//!   unless delivery falls below [`PROBE_COLLAPSE`] of what it was when the probe started:
//!   the capacity stepped down, and the probe ends unmeasured (a drain that began 20 ms
//!   before 1 Gbit/s became 100 Mbit/s held 1 Gbit/s for 0.5 s, nine tenths of it dropped).
//!   Drains that decide the competitive mode run their course. A full
//!   drop-tail buffer does not rise either, and gives a small flow nearly all of its bump; a
//!   flow that may compete therefore takes a probe that lost packets for an overflow, not a
//!   stale floor.
//! * **Alone, a shorter queue.** α is what makes shares converge (at `q/T` per RTT); a flow
//!   alone has nothing to converge with, and α is only queue: 6 ms at 100 Mbit/s, 60 ms at
//!   10 Mbit/s. The stale-floor probe measures the flow's share of the bottleneck, `r/C`, two
//!   ways: its half RTT at +15 % adds `0.15·half·r/C` seconds of queue (the rise to the
//!   probe's top, less half of the queue's drift over the probe, over `0.15·half`), and on a
//!   full link served first come first served delivery rises by `1 − r/C` of the bump. A
//!   sample is the smaller of the two, and counts as 0 unless the bump came back out of the
//!   queue (someone else's queue keeps growing) and the queue before the probe was at most
//!   [`SHARE_AT_TARGET`] of this flow's target (a stale floor's phantom is not). Smoothed
//!   samples above [`ALONE_SHARE`] lower α linearly, down to `max(2 ms, 2 % of the RTT)` of
//!   queue at the flow's rate (never above α: at 1 Gbit/s α is 0.6 ms and nothing changes).
//!   Delivery below [`SHARE_RESET`] of what it was when the share was measured forgets it
//!   (a step down, or newcomers), and the flow aims at α again — one delivery window later,
//!   unless delivery first comes back to [`SHARE_RECOVERED`] of it: a newcomer's or a step
//!   down's dip lasts, while a path stall's (its held packets then arrive at once) or this
//!   flow's own drain's passes, and says nothing about others (10 Mbit/s, 92 ms, a 20 ms stall
//!   every second: forgotten every few seconds, queue p50 over seeds 1–8 8.5–53.9 ms, against
//!   3.8–20.8 ms with the wait). A probe whose delivery rose by more than its bump (a
//!   stall's burst, or capacity others left) takes no sample, nor
//!   does one above target before any share is known (start-up's queue). One flow alone
//!   measures 0.83–1.03, each of four sharing flows 0.13–0.66. At 100 Mbit/s, 92 ms, 0.06 %
//!   loss the queue falls from 6.0 to 2.0 ms (median) at the same utilization. A sample more
//!   than `SHARE_OUTLIER` (`share.rs`) from the smoothed share counts only when the next one
//!   is as far on the same side: a stall's burst that lifted delivery by 1.17 times the bump
//!   read a lone flow as sharing nothing, and one such sample had sent it back to α (a 59 ms
//!   median queue in one stall run of 24). Since session 54 any rise above the bump takes no
//!   sample (`SHARE_BURST` 0), and the next probe comes sooner ([`PROBE_RETRY`]).
//! * **A buffer shorter than α.** At 10 Mbit/s α is 60 ms of queue, longer than a one-BDP
//!   buffer on a 20–56 ms path: the flow cannot reach its target, the overflow is credited as
//!   random loss (20 %), and it held the buffer full, sending 1.6× what the link carried. A
//!   queue that stands still ([`PINNED_FLAT`]) for [`PINNED_RTTS`] while [`PINNED_LOSS`] of
//!   the bytes are lost, and loss still arrives every RTT, is a buffer *held full*; steering
//!   counts it as settled, so probes run. (Without "every RTT" a step down's one burst of
//!   overflow, still in the second-long loss fraction, made the queue the flow was steering
//!   down count as settled: probes and drains ran in it, RLNC A2's queue p50/p95 6.0/14.7 ms
//!   against 4.9/9.0.)
//!   In a full buffer the stale probe's bump cannot raise the queue, only be lost, and drop-tail
//!   drops take each flow's share of the excess, so delivery alone measures the share: a lone
//!   flow's does not rise at all. So does a probe that lost packets and raised the queue by
//!   less than [`CAPPED_RISE`] of a lone bump, before the buffer counts as held full: read by
//!   the queue, start-up's first probe at the top of the buffer said "shared", the flow was
//!   charged, and it overflowed again and again (1 % loss, one BDP, seeds 1–6: 1.6–8.3 % →
//!   1.2–2.1 % retransmitted in 30 s). Found alone there, the flow forgets the loss (its own
//!   overflow), lowers α as any lone flow does, and remembers the queue at which the buffer
//!   overflowed: it never aims above [`CEILING_FRACTION`] of it, so a noisy later sample
//!   cannot send it back to the top; both are forgotten with the share. A drain while held
//!   full halves what is *delivered* (the rate is far above it). Alone at 10 Mbit/s, 20 ms,
//!   one BDP: 143 % of the data retransmitted → 0.7 %.
//!   Flows that *share* a buffer shorter than their Σα each read it short of their α and
//!   push for ever. A buffer found held full therefore counts as held full for up to
//!   [`HELD_FULL_FOR`] while the queue stays near where it was found (a flow that stops
//!   pushing stops overflowing, and must not push again at once), and there no flow takes
//!   credit for its loss (credited, a flow's own overflow sustains itself: sending `D/(1 − p)`
//!   overflows `p`), and one that has not found itself alone pays for it instead:
//!   `r ← D + (8α − D·q)/T − K·p·r` ([`OVERFLOW_CHARGE`]; before its first share sample never
//!   below `D`). Drop-tail gives every flow the same `p`, so the charge leaves the pushes'
//!   differences — what makes shares converge — and removes nine tenths of their sum. No
//!   growth either while [`PINNED_LOSS`] is lost with a loss every RTT for [`PINNED_RTTS`]
//!   (two flows at 10 Mbit/s have `q*/4` = 30 ms, above a 20 ms buffer, so the queue read as
//!   empty). Probes from a full buffer bump for longer than the delivery window, and pay
//!   nothing back: a 10 ms bump measured over 20 ms read a true half as 0.85. Flows that may
//!   compete keep the rules before these (their modes were tuned with them), and so does the
//!   second after an outage (what was sent into it is lost). `scripts/shallow-grid.sh`, 64
//!   runs: mean retransmission overhead 61 % → 19 %, Jain below 0.9 in 5–9 → 2–3 runs.
//!   Next to a loss-based flow such a buffer does not stay held full: the competitor cuts
//!   and starves, this flow's probes find it alone, it aims low, the competitor regrows, the
//!   dip forgets the share, and α pushes again (`fair` took 95 % from CUBIC at 10 Mbit/s,
//!   20 ms). Found alone three times in a row from the same delivery around such a dip, the
//!   flow keeps α below half the buffer in bits at the capacity it measured (`starving.rs`;
//!   37 % there).
//!
//! * **Short paths.** With reports every 10 ms a path of 100 µs RTT could double its rate only
//!   once per report, the delay window being 10 ms: 110–150 ms from 10 Mbit/s to 20 Gbit/s.
//!   The sender asks for about one report per millisecond there (spec §6.5); the window
//!   shrinks to three report gaps and growth's loop delay `L` with it, one doubling per 3 ms.
//!   Growth never outruns the filter: a queue that appears stops it within one window.
//!
//! # Modes: sharing with loss-based TCP (`compete`, off by default)
//!
//! Against a sender that fills the buffer until it overflows (CUBIC, Reno) a flow that holds
//! α bytes yields: the queue it steers to is the competitor's, and `D = α/q` shrinks as the
//! competitor's queue grows (15 % of 100 Mbit/s next to one CUBIC flow in a 4×BDP buffer). A
//! flow configured to compete (`RateConfig::compete`, `fair` and `high` only; `low` always
//! yields) switches to competitive mode (`compete.rs`) when a drain cannot empty the queue
//! (`drained.rs` judges drains, `modes.rs` keeps the switch's constants and state):
//!
//! ```text
//!             judged drain leaves q_min > q0/4,         (drains on the UTC grid and
//!             still falling at its end, and the next    by floor age while delay-based;
//!             grid drain does too (`drained.rs`)        a drain is judged when it starts
//!   ┌───────┐ ─────────────────────────────────────►  ┌─────────────┐   from q0 ≥ 2 ms,
//!   │ delay │                                          │ competitive │   at most every 4 s;
//!   └───────┘ ◄─────────────────────────────────────  └─────────────┘   a grid drain only
//!             two judged drains in a row empty it       (drains every 8 s) if on time)
//! ```
//!
//! A standing drain off the grid only raises a suspicion: at the next grid instant every
//! Spate flow drains and their queue empties, a buffer-filling competitor's does not, so the
//! grid drain decides (`drained.rs`, "Suspect, then confirm", with the cases that enter at
//! once). Until session 69 the first standing drain entered, and Spate flows that joined
//! seconds apart took each other for competitors.
//!
//! A drain that leaves a queue standing but *bottomed out* — the queue fell by at most twice
//! this flow's own target, never rose, stayed flat for the last 40 % of the slow half (within
//! noise: at least one packet's time at the flow's rate; the slow half's readings timed from
//! the RTT the drain started with, so that its refill's rise is not among them), and
//! lies at most half as deep as the deepest queue of the last 30 s — is not a competitor's
//! queue: with a competitor holding a standing queue, the queue falls by what this flow
//! holds back for as long as it holds back. Alone on a path that got longer (a handover),
//! this flow's own data leaves the queue and what stays is the extra propagation delay under
//! a stale floor, which the floor's 10 s window then takes in. Such a drain changes nothing
//! (sessions 26–27; before, FASP scenario 1 and RLNC A1/A2 with `compete = true` followed
//! CUBIC's law into the new bottleneck's buffer for 12 s). The depth condition keeps a
//! buffer that a competitor holds full from passing for a bottom: kernel BBR in a 1×BDP
//! buffer keeps it near the top, and a drain there also stops falling once this flow's part
//! has left.
//!
//! A judged drain holds the queue empty 20 ms (two report gaps) so that a report sees it. In
//! competitive mode the floor is kept (not left to expire into the competitor's standing
//! queue) and the rate follows a paced CUBIC window cut when the competitor cuts (`compete.rs`
//! has its nutshell) — unless the competitor is BBR, which does not cut on loss. Under the
//! CUBIC law the drains do not refill (the slow half is not made up by a fast one): the fast
//! half overflowed the buffer while the law's events were suspended, and the competitor took
//! those losses. A competing
//! flow watches the queue, in either mode, for BBR's ProbeRTT: an empty queue, not of its own
//! making, twice 9–12 s apart at the same delay floor (`dips.rs`); and the CUBIC law watches
//! the rhythm of its cuts: five in a row, each within 20 RTTs of the last, are quicker than a
//! loss-based competitor regrows, and are BBR's gain cycle (`compete.rs`). Seen within the
//! last 36 s, either makes the competitive mode follow BBR's own law instead (`follow.rs`:
//! bandwidth filter, gain cycle, in-flight cap, ProbeRTT). Entering, the flow starts from
//! half the larger of the path's rate measured by the drain (the lower of bits it removed /
//! how far the queue fell, and its rate over the share the fall's speed shows) and its own
//! peak delivery of the last 30 s (two thirds for `high`), at most three times that peak
//! (`capacity.rs`, "Entering"). Each drain of the mode also measures the bottleneck's
//! capacity, by how fast the queue falls at its start, and neither law takes more than one
//! competitor's fair share of it (`capacity.rs`; kept across the mode's spells). BBR's law
//! starts from the rate the mode was entered with.
//!
//! Why it is still off by default: the drain test needs the other Spate flows to drain at
//! the same moment. Flows that started seconds apart drain one at a time by their floors'
//! ages, each leaves the others' α standing, and until session 69 each took the others for a
//! competitor (four `fair` flows joining 3 s apart at 100 Mbit/s, 50 ms: Jain 0.460 at every
//! placement of the grid). Confirming at the grid cut that to 0.828–1.000 over the eight
//! placements (none competing at four), and the Spate-only runs of
//! `experiments/s51-drain-grid/spate-grid.sh` with a flow competing from 19 of 36 to 2–10
//! (five placements), but not to none: a flow whose floor is under 1 s old lets a grid instant
//! pass (`grid.rs`), and a confirming drain then meets its queue. (A flow whose floor went
//! stale when the path got longer took it for a competitor too, until drains that bottom out
//! were told apart, above; it still does after a step down to 10 Mbit/s, where its first
//! judged drain starts while it still sends 1.5× the new link and its own target, 60 ms of
//! queue, exceeds the phantom.) `docs/design.md` ("Sharing with TCP") lists what was tried.
//!
//! What it deliberately ignores: ECN (not yet reported), per-packet delay variation (one
//! sample per feedback; the minimum over three reports rejects transient spikes), and BBR
//! versions other than v1 (v2 and v3 probe the RTT every 5 s down to half their window, so
//! their queue need not empty: `dips.rs` would not recognise them).

mod capacity;
mod compete;
mod dips;
mod drained;
mod filters;
mod follow;
mod grid;
mod modes;
mod overshoot;
mod probe;
mod scavenge;
mod share;
mod start;
mod starving;

use core::time::Duration;

use capacity::Capacity;
use dips::Dips;
use drained::{DrainEnd, DrainReadings, Drained, FLAT_AFTER};
pub use filters::{BitTally, DeliveryRate, LossFraction, RateHistory, WindowedMax, WindowedMin};
use grid::DrainGrid;
use modes::{
    depth, Mode, Suspicion, BOTTOM_PEAK_WINDOW, COMPETE_DRAIN_EVERY, DRAINS_TO_LEAVE,
    GRID_JUDGED_LATE, JUDGED_FROM, JUDGED_MARGIN, JUDGE_EVERY, PEAK_WINDOW, QUEUE_PEAK_WINDOW,
    READING_KEPT, RESIDUE_ENTERS,
};
use overshoot::Step;
use probe::{Probe, ProbeKind};
use scavenge::Scavenge;
use share::{alone_weight, Share, ALONE_SHARE, SHARE_MAX};
use starving::Starving;

use super::{RateControl, RateSample};
use crate::time::Instant;
use crate::wire::IP_UDP_OVERHEAD;

/// Default α: 50 full packets (75 000 bytes). One flow then holds q = 0.6 ms of queue at
/// 1 Gbit/s, 6 ms at 100 Mbit/s, 60 µs at 10 Gbit/s: small enough for the delay goals
/// (FASP scenario 1 after its drop to 100 Mbit/s: p95 14 ms, bound 25), and large enough that
/// shares converge in seconds — the rate at which unequal flows equalise is about q/T per
/// RTT, so with 60 000 bytes a `high` flow against a `fair` one at 1 Gbit/s, 50 ms had only
/// reached 1.35× after 30 s; with 75 000 it holds 2.1× from 10 s (see docs/design.md). A
/// 50-packet queue is also easy to measure: 50 packet times, far above the 1 µs timestamp
/// resolution.
pub const DEFAULT_QUEUE_TARGET: u64 = 75_000;
/// Rate before any measurement: 10 Mbit/s. A 10 Gbit/s path is reached in 10 doublings.
pub const INITIAL_RATE: u64 = 10_000_000;
/// Growth stops when the delivery rate stays below this fraction of the rate its packets were
/// sent at (the oldest rate of the window) for a whole RTT. Growing at one doubling per RTT,
/// delivery matches that rate; random loss of a few per cent takes a few per cent. A path
/// that delivers less than half of what was sent is full whatever the delay says.
const KEEP_UP: f64 = 0.5;
/// The sender counts as limited — by its CPU or by having nothing to send — when it left more
/// than this fraction of its pacing rate unused. A sender that keeps pace forfeits nothing
/// (the pacer lets it make up 1 ms); 5 % leaves room for the odd late wake-up.
const SENDER_LIMITED: f64 = 0.05;
/// Growth speed right after a cut, doublings per RTT (1/8: +9 % per RTT).
const MIN_GROWTH: f64 = 0.125;
/// Growth speed, doublings per RTT, above the rate last steered to while delivery shows no
/// capacity beyond it (`NEW_CAPACITY`). Steering, one loop late, often empties the queue at
/// about capacity; growing from there at 1/8 was 12–18 % over capacity when the queue showed
/// (250 Mbit/s, 200 ms, 1 %: the queue swung between 0 and 20 ms every 1.3 s). Not for a
/// flow in a buffer that overflows (growth is how shares converge there) nor one that may
/// compete (its regrowth after CUBIC's cuts is its share); docs/design.md, session 45.
const REGROWTH: f64 = 1.0 / 32.0;
/// Delivery (credited for random loss) above this multiple of the rate last steered to is
/// capacity the flow has not seen: growth runs at full speed.
const NEW_CAPACITY: f64 = 1.02;
/// Steering horizon T in loop delays: the queue error is corrected over
/// `T = STEER_RTTS · (rtt + FEEDBACK_DELAY)`. The queue obeys dQ/dt = −(Q(t−d) − Q*)/T with
/// loop delay d ≈ rtt + half a feedback interval; that converges without overshoot for
/// d/T < 1/e and oscillates (ever less damped) as d/T approaches π/2. 3 leaves a margin for
/// the extra lag of the delivery-rate filter.
const STEER_RTTS: f64 = 2.0;
/// Feedback delay added to the RTT in the horizon: one 10 ms feedback interval.
const FEEDBACK_DELAY: f64 = 0.010;
/// Steering never asks for less than this fraction of the delivered rate, so a huge queue
/// (a capacity drop into a deep buffer) drains at up to 3/4 of capacity and the flow keeps
/// moving.
const MIN_STEER_FRACTION: f64 = 0.25;
/// Loss is credited back as random only while this flow's queued data `D·q` is below this
/// many α (its equilibrium is 1). Above, the loss may be overflow: with 4 a 5 ms buffer at
/// 200 Mbit/s (1.7 α when full) stayed full for 2 s after start-up, the credited overflow
/// propping the rate up.
const CREDIT_BELOW: f64 = 1.5;
/// Horizon of the loss-fraction estimate used to correct the delivered rate for random loss.
const LOSS_HORIZON: Duration = Duration::from_secs(1);
/// Window of the delay floor (one-way delay minimum), as for the minimum RTT.
const BASE_WINDOW: Duration = Duration::from_secs(10);
/// Drain when the delay floor is this old (it expires at BASE_WINDOW). When one flow drains,
/// the queue shrinks, every flow's floor is refreshed and their next drains fall together —
/// the queue then empties and all floors agree, which a latecomer (that never saw the empty
/// queue) needs to take its fair share.
const DRAIN_AFTER: Duration = Duration::from_secs(8);
/// A flow's first drain lasts at least this many of its α at its rate (up to one RTT): twice
/// the queue of flows sharing equally, read at up to twice a fair rate (`grid.rs`).
const FIRST_DRAIN_ALPHAS: f64 = 4.0;
/// Rate factor of a drain: half rate for twice the queueing delay removes the flow's queue.
const DRAIN_GAIN: f64 = 0.5;
/// Extra drain time, seconds, so the queue is seen empty for a moment.
const DRAIN_MARGIN: f64 = 0.002;
/// ...or this fraction of the queue it reads, if more, for a flow on the grid that has not
/// found itself alone. Flows drain at their first report after a grid instant, up to a report
/// gap (10 ms) apart, and half rate for exactly twice the queue empties it only if all start
/// at once: four flows joining 3 s apart at 100 Mbit/s, 50 ms never saw it empty, and drains
/// repeated until a floor expired and was taken anew 10 ms too high (`docs/design.md`,
/// "Session 53"). With half the queue more, that run's queue p50 over eight placements of the
/// grid: 23.9–31.6 ms, mean 25.7 (30.7 before the grid; session 54).
const DRAIN_MARGIN_QUEUE: f64 = 0.5;
/// Longest slow half of a drain at small RTTs, seconds (it may last up to one RTT otherwise):
/// a shallow buffer at RTT ≈ 0 still needs 2q + margin (a few ms) to empty.
const DRAIN_MAX_HALF: f64 = 0.020;
/// A probe that raises the queueing delay by less than this (or 0.5 % of the RTT) did not
/// meet a queue: seconds.
const STALE_QUEUE_NOISE: f64 = 0.000_2;
/// Window of the current-delay minimum filter: [`RECENT_REPORTS`] report gaps within these
/// bounds, so a single delayed sample does not move the estimate but it follows the queue
/// within a few reports: 10 ms with the default 10 ms reports, 3 ms when the sender asks for
/// a report every millisecond on a short path (spec §6.5).
const RECENT_WINDOW: (Duration, Duration) = (Duration::from_millis(2), Duration::from_millis(10));
/// Report gaps in the current-delay window: the minimum of three samples.
const RECENT_REPORTS: f64 = 3.0;
/// Probe for stale delay floors every this many RTTs in steady state...
const PROBE_EVERY: u32 = 8;
/// ...but not more often than this.
const PROBE_MIN_INTERVAL: Duration = Duration::from_secs(2);
/// Rate change during a probe: +15 % for half an RTT, then −15 % for half an RTT. On a full
/// link this adds at most 0.075 RTT of queue for half an RTT and takes it away again (the probe
/// is rate-neutral); on a link with spare capacity the receiver sees 15 % more for half an RTT.
const PROBE_GAIN: f64 = 0.15;
/// A stale probe's bump adds at most this much queue for a flow alone, seconds (the gain is
/// lowered to `PROBE_BUMP / half` on long paths): at 200 ms the full gain's 15 ms bump every
/// 2–2.5 s made most of a lone flow's 95th percentile (250 Mbit/s, 1 %: 13.1 → 6.3 ms). Not
/// for flows that may compete (tuned with the full bump), nor from a buffer held full.
const PROBE_BUMP: f64 = 0.005;
/// ...nor below this many packets' time at the flow's rate: a 5 ms cap at 10–20 Mbit/s (where
/// the RTT includes 30–60 ms of α) sent lone flows back to α (docs/design.md, session 45).
const BUMP_PACKETS: f64 = 40.0;
/// Queue a flow aims at while it holds the whole bottleneck, seconds at its own rate (when
/// that is less than α). Not less: at 250 Mbit/s and 200 ms a target of 0.7 ms let the queue
/// touch empty, the growth rule fired, and the queue swung between 0 and 18 ms every 1.5 s.
const ALONE_QUEUE: f64 = 0.002;
/// ...or this fraction of the path's RTT, if more: the queue must stay clear of empty while
/// the loop (about an RTT) answers rate noise. At 250 Mbit/s, 200 ms and 1 % random loss a
/// 2 ms target swung between 0 and 20 ms from 19 s on, where α (2.4 ms there) held steady.
const ALONE_QUEUE_RTT: f64 = 0.02;
/// Delivery below this fraction of what it was when the share was measured forgets the
/// share (a step down, or newcomers).
const SHARE_RESET: f64 = 0.7;
/// Delivery below this fraction of what it was when a probe started ends it: a step down. A
/// drain's slow half leaves 1/2, a 20 ms stall in a 46 ms window 57 % (ending those probes, at
/// 0.7, left lone flows at 10 Mbit/s with stalls without share samples: p50 6.1 → 38.3 ms).
const PROBE_COLLAPSE: f64 = 0.35;
/// ...unless, within a delivery window of the dip, delivery comes back to this fraction of
/// it: the dip has passed. (Until session 52 only a rise above 1.1 times, a stall's burst of
/// held packets, cancelled it; a lone flow forgot its share after every dip that ended
/// without one: each of the ten forgets in the stall runs of seeds 1–8, delivery back at
/// 0.98–1.0 of the share's when the window ended.)
const SHARE_RECOVERED: f64 = 0.9;
/// A stale probe that lost packets and raised the queue by less than this fraction of what its
/// bump adds for a flow alone (`PROBE_GAIN · half`) met a buffer that could not hold the bump:
/// its share is measured by delivery alone, as from a buffer found held full. A flow whose
/// true share is this small reads much the same by delivery (`1 − r/C` of the bump gets
/// through), so the fraction only has to lie below a lone flow's rise and above start-up's
/// reading at the top of a one-BDP buffer (0.14–0.15 at 10 Mbit/s, 40 ms; 0.1 missed it).
const CAPPED_RISE: f64 = 0.25;
/// A probe measures the share only if the queue before it was at most this multiple of the
/// flow's own target.
const SHARE_AT_TARGET: f64 = 1.25;
/// A probe whose delivery rose by more than `1 + SHARE_BURST` times the bump (the share by
/// delivery below `−SHARE_BURST`) took no sample. Sharing gives a flow less of its bump, never
/// more; a stall's burst gave −0.17 to −0.67 at 10 Mbit/s, 92 ms with 20 ms stalls (at 0.2,
/// the −0.17 read a lone flow as sharing nothing, and it held α, 60 ms, for 9 s).
const SHARE_BURST: f64 = 0.0;
/// After a probe that met a burst and measured nothing, the next comes after this many RTTs
/// (at least [`PROBE_RETRY_MIN`]) instead of [`PROBE_EVERY`]: with 20 ms stalls about every
/// second a probe meets one about a third of the time, and four in a row left a lone flow at
/// α for 20 s. Bursts are rare without stalls, so this costs a path without them nothing.
const PROBE_RETRY: u32 = 4;
/// ...and not sooner than this: the burst's stall and its queue are over by then.
const PROBE_RETRY_MIN: Duration = Duration::from_millis(500);
/// A queue that stands still while this fraction of the bytes of the last second were lost is
/// a drop-tail buffer held full ("A buffer shorter than α"): more than twice the 2 % random
/// loss the hardest seed paths have, less than the 20 % (the credit's cap) a lone flow at
/// 10 Mbit/s, 20 ms lost in a one-BDP buffer. And a loss reported within the last RTT: the
/// second-long fraction keeps a step down's one burst of overflow (10 Gbit/s → 100 Mbit/s:
/// 15 % for 5 s) long after the buffer stopped overflowing, and a buffer held full loses
/// packets every RTT.
const PINNED_LOSS: f64 = 0.05;
/// ... standing still: within this, seconds, or a tenth of the queue, for [`PINNED_RTTS`].
/// A full buffer read 20.47–20.56 ms for seconds; a queue that still fills moves by more.
const PINNED_FLAT: f64 = 0.001;
/// RTTs the queue must stand still before the buffer counts as full (as long as steering
/// must hold the queue settled before a probe).
const PINNED_RTTS: u32 = 2;
/// A flow alone in a buffer it overflowed aims at no more than this fraction of the queue at
/// which it overflowed: half the buffer, room for the probes' bumps (0.15 of half an RTT)
/// and the delay filter's lag without touching the top.
const CEILING_FRACTION: f64 = 0.5;
/// While a buffer is held full, each flow that has not found itself alone in it lowers its
/// target by this many times the bits it loses (`K·p·r`). Drop-tail drops every flow's
/// arrivals alike, so `p` is the same for all; at the fixed point `push = (1 + K)·p·r` for
/// every flow, so the overflow is `1/(1 + K)` of what the pushes alone would make it, and
/// `push / r` is equal across flows — equal rates, since the push is `(8α − D·q)/T`.
/// Without a charge (no credit, no push above delivery) each flow paced what it was
/// delivered and shares froze wherever they stood: Jain below 0.9 in 8–13 of the 64 runs of
/// `scripts/shallow-grid.sh`; with the charge in 2–3 (the controller before: 5–9).
const OVERFLOW_CHARGE: f64 = 9.0;
/// A buffer found held full counts as held full for this long after the loss that showed it
/// stops, while the queue stays up: a flow that stops pushing into it stops overflowing it,
/// and without this it pushed again within an RTT.
const HELD_FULL_FOR: Duration = Duration::from_secs(10);
/// ... while the queue stays above this fraction of where the buffer was found full.
const HELD_FULL_LEVEL: f64 = 0.9;
/// A stale probe from a buffer held full starts only when delivery over the last window is
/// within this fraction of delivery over [`FULL_STABLE_WINDOWS`] windows: the share is
/// measured against it.
const FULL_STABLE: f64 = 0.03;
/// See [`FULL_STABLE`].
const FULL_STABLE_WINDOWS: u32 = 4;
/// Losses within this of an outage's end were packets sent into the outage.
const RESTORE_QUIET: Duration = Duration::from_secs(1);

/// The window of the delivery rate `D` at round-trip time `rtt`: half an RTT, less lag in the
/// loop than a whole RTT (the 100 Mbit/s phase of FASP scenario 1 rang for 4 s with a
/// whole-RTT window), but at least 20 ms, still hundreds of packets.
fn delivery_window(rtt: Duration) -> Duration {
    (rtt / 2).max(Duration::from_millis(20))
}

/// Keep `since` at the moment `holds` became true, and clear it once it is false.
fn mark_since(since: &mut Option<Instant>, holds: bool, now: Instant) {
    if !holds {
        *since = None;
    } else if since.is_none() {
        *since = Some(now);
    }
}

/// What the controller saw and decided at its last report: for logs and the lab, never for
/// decisions (the fields are the nutshell's, in its units).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DelayTrace {
    /// Queueing delay `q`, seconds.
    pub q: f64,
    /// This flow's target queue `q*`, seconds.
    pub target: f64,
    /// Delivery rate `D` over the delay window, bits/s (`None`: not measurable yet).
    pub delivery: Option<f64>,
    /// Sending capacity left unused while the window's packets left, bits/s (`u`).
    pub unused: f64,
    /// `u` above 5 % of the rate: no growth, and steering cuts only for a queue above target
    /// for a whole RTT.
    pub limited: bool,
    /// Delivery behind half of what was sent for a whole RTT: no growth.
    pub behind: bool,
    /// The queue has been empty for an RTT and delivery keeps up: the rate grew.
    pub spare: bool,
    /// A probe or drain is in progress: the rate is held.
    pub probing: bool,
    /// Fraction of bytes lost over the last second.
    pub loss: f64,
}

/// The delay controller. See the module documentation.
#[derive(Debug, Clone)]
pub struct Delay {
    /// The last report's inputs and verdicts ([`Delay::trace`]).
    trace: DelayTrace,
    alpha_bits: f64,
    /// This flow's share of the bottleneck's capacity as its stale probes measured it
    /// (`None` before the first, and once forgotten).
    share: Option<Share>,
    /// When delivery fell below [`SHARE_RESET`] of the share's: it is forgotten a delivery
    /// window later, unless delivery comes back first ([`SHARE_RECOVERED`]).
    share_dip: Option<Instant>,
    /// The stale probe under way met a burst: the next one comes sooner ([`PROBE_RETRY`]).
    probe_retry: bool,
    /// The queue this flow aims at alone, seconds: [`ALONE_QUEUE`] or [`ALONE_QUEUE_RTT`] of
    /// the path's RTT.
    alone_queue: f64,
    cap: f64,
    floor: f64,
    /// Pacing rate, bits/s, within [floor, cap].
    rate: f64,
    base_owd: WindowedMin,
    recent_owd: WindowedMin,
    delivery: DeliveryRate,
    /// The path's rate (delivery credited for random loss) at the last steering step, bits/s:
    /// where growth restarts after a brief empty queue.
    last_steered: f64,
    last_update: Option<Instant>,
    /// Rates sent at, to tell whether delivery keeps up.
    sent: RateHistory,
    /// Since when delivery has been less than [`KEEP_UP`] of the rate sent.
    behind_since: Option<Instant>,
    saved_rate: Option<f64>,
    /// Growth speed, doublings per RTT (1/8..=1).
    growth: f64,
    loss: LossFraction,
    /// Since when steering has kept the queue near this flow's target.
    settled_since: Option<Instant>,
    /// The queue, seconds, at which a buffer this flow held alone overflowed (a stale probe
    /// from a full buffer found it alone); forgotten with the share.
    ceiling: Option<f64>,
    /// Whether this flow has found itself starving a loss-based competitor, and the bound
    /// on α it keeps then (`starving.rs`).
    starving: Starving,
    /// Since when the queue has stood still while [`PINNED_LOSS`] of the bytes were lost (a
    /// drop-tail buffer held full), and the lowest and highest queue since, seconds.
    pinned: Option<(Instant, f64, f64)>,
    /// When a report last said packets were lost.
    lost_at: Option<Instant>,
    /// Since when [`PINNED_LOSS`] of the bytes have been lost with a loss in every RTT.
    lossy_since: Option<Instant>,
    /// The buffer is held full: until when that counts, and the queue, seconds, it was last
    /// found full at.
    held_full: Option<(Instant, f64)>,
    /// When feedback last returned after an outage.
    restored_at: Option<Instant>,
    /// Minimum queueing delay over the last RTT, µs (the reference a probe is judged against).
    q_rtt_min: WindowedMin,
    /// Since when the queue has been below a quarter of this flow's share.
    empty_since: Option<Instant>,
    probe: Probe,
    /// Sending capacity left unused (the sender was idle or slower than paced).
    unused: BitTally,
    /// Bits put on the wire (what is in flight, `overshoot.rs`).
    wire: BitTally,
    /// Time between reports, seconds (moving average over about four reports).
    report_gap: f64,
    /// Flows' worth this flow competes as against buffer-filling traffic (0: it never does).
    compete_as: f64,
    /// `low`'s bound, which gives way to a queue others hold (`scavenge.rs`); `None` for
    /// `fair` and `high`.
    scavenge: Option<Scavenge>,
    mode: Mode,
    /// Drains in a row that emptied it.
    emptied_drains: u32,
    /// Deepest delay level (delay floor plus queue, µs, as `compete.rs` keeps them) of the
    /// last [`QUEUE_PEAK_WINDOW`] (kept only by a flow that may compete, as the next one).
    /// A level, not a queue: the floor moves. Queues read from a floor that has since risen
    /// (into a competitor's standing queue) made a full buffer look 6–7 ms short of full to
    /// a flow entering the mode: it never saw the buffer full, never cut, and held it at 1.25
    /// times what it was delivered (`fair` joining BBR late: 88 % of the link; `tcp.rs`,
    /// `a_flow_entering_competitive_mode_reads_the_buffer_from_the_floor_it_has`).
    level_peak: WindowedMax,
    /// The deepest delay level of the last [`BOTTOM_PEAK_WINDOW`], against which a drain's
    /// bottom is judged (read from the floor at the drain's end, as `level_peak`).
    level_peak_long: WindowedMax,
    /// When the last judged drain started.
    last_judged: Option<Instant>,
    /// Highest delivery rate of the last [`PEAK_WINDOW`], bits/s: what the path gave this
    /// flow when others left room.
    peak_delivery: WindowedMax,
    /// Bits of one full packet on the wire.
    packet_bits: f64,
    /// The bottleneck's capacity as competitive mode's drains measured it, kept across the
    /// mode's ends and returns: the mode takes at most a fair share of it (`capacity.rs`).
    capacity: Capacity,
    /// Watches for BBR's ProbeRTT (kept only by a flow that may compete).
    dips: Dips,
    /// When BBR was last recognised.
    bbr_seen: Option<Instant>,
    /// An empty queue until then may be this flow's own doing (a probe or drain and two RTTs
    /// after it).
    own_until: Instant,
    /// The instants at which flows that read one clock drain together.
    grid: DrainGrid,
    /// A competitor suspected by a standing drain, to be confirmed at the next grid instant
    /// (`drained.rs`).
    suspect: Option<Suspicion>,
    /// The last judged grid drain left the queue standing: the next standing drain enters at
    /// once (`drained.rs`).
    grid_stood: bool,
    /// The capacity the last delay-mode drain of a flow that may compete read from the queue
    /// it removed, bits/s, and when.
    drain_reading: Option<(Instant, f64)>,
}

impl Delay {
    /// A controller keeping `queue_target` bytes queued, rate within `[floor_bps, cap_bps]`
    /// (`cap_bps` 0 means no cap).
    pub fn new(queue_target: u64, cap_bps: u64, floor_bps: u64) -> Self {
        let cap = if cap_bps == 0 {
            f64::MAX
        } else {
            cap_bps as f64
        };
        let floor = (floor_bps as f64).min(cap);
        Delay {
            trace: DelayTrace::default(),
            alpha_bits: (queue_target.max(1500) * 8) as f64,
            share: None,
            share_dip: None,
            probe_retry: false,
            alone_queue: ALONE_QUEUE,
            cap,
            floor,
            rate: (INITIAL_RATE as f64).clamp(floor.max(crate::pacer::MIN_RATE_BPS as f64), cap),
            base_owd: WindowedMin::new(BASE_WINDOW),
            recent_owd: WindowedMin::new(RECENT_WINDOW.1),
            report_gap: FEEDBACK_DELAY,
            delivery: DeliveryRate::default(),
            last_steered: 0.0,
            last_update: None,
            sent: RateHistory::default(),
            behind_since: None,
            saved_rate: None,
            growth: 1.0,
            loss: LossFraction::default(),
            empty_since: Some(Instant::ZERO),
            settled_since: None,
            pinned: None,
            lost_at: None,
            lossy_since: None,
            held_full: None,
            restored_at: None,
            ceiling: None,
            starving: Starving::default(),
            q_rtt_min: WindowedMin::new(Duration::from_millis(100)),
            probe: Probe::Idle {
                next: Instant::ZERO,
            },
            unused: BitTally::default(),
            wire: BitTally::default(),
            compete_as: 0.0,
            scavenge: None,
            mode: Mode::Delay,
            emptied_drains: 0,
            level_peak: WindowedMax::new(QUEUE_PEAK_WINDOW),
            level_peak_long: WindowedMax::new(BOTTOM_PEAK_WINDOW),
            last_judged: None,
            peak_delivery: WindowedMax::new(PEAK_WINDOW),
            packet_bits: 1500.0 * 8.0,
            capacity: Capacity::default(),
            dips: Dips::default(),
            bbr_seen: None,
            own_until: Instant::ZERO,
            grid: DrainGrid::new(0),
            suspect: None,
            grid_stood: false,
            drain_reading: None,
        }
    }

    /// What the last report showed and decided (for logs and the lab).
    pub fn trace(&self) -> DelayTrace {
        self.trace
    }

    /// Let the flow compete as `n` flows' worth against buffer-filling traffic (`fair` 1,
    /// `high` 2); without this call it keeps yielding (`low`).
    pub fn competing_as(mut self, n: f64) -> Self {
        self.compete_as = n;
        self
    }

    /// Make the flow a scavenger (`low`): it gives way to a queue that others hold.
    pub fn scavenging(mut self) -> Self {
        self.scavenge = Some(Scavenge::default());
        self
    }

    /// Place the drain grid (`grid.rs`) on this session's clock, whose `Instant::ZERO` is
    /// `epoch_utc_ns` nanoseconds of UTC (0 where every flow reads one clock, a simulation).
    pub fn on_clock(mut self, epoch_utc_ns: u64) -> Self {
        self.grid = DrainGrid::new(epoch_utc_ns);
        self
    }

    /// The least queueing delay of the last RTT, seconds (`q`, the latest, before any): a
    /// queue that has stood that long, not a spike.
    fn queue_over_rtt(&mut self, now: Instant, q: f64) -> f64 {
        self.q_rtt_min.get(now).map_or(q, |v| v as f64 / 1e6)
    }

    /// This flow's own equilibrium queueing delay at its rate, seconds: `q* = 8α / r`.
    fn own_target(&self) -> f64 {
        self.alpha() / self.rate
    }

    /// The queue this flow aims to hold, bits: α, or, while its probes say it holds (nearly)
    /// the whole bottleneck, as little as [`ALONE_QUEUE`] seconds at its rate. See
    /// "Alone, a shorter queue" in the module doc.
    fn alpha(&self) -> f64 {
        let alone = alone_weight(self.share.map(|s| s.smoothed));
        let short = (self.rate * self.alone_queue).min(self.alpha_bits);
        let alpha = self.alpha_bits - alone * (self.alpha_bits - short);
        let alpha = self
            .ceiling
            .map_or(alpha, |c| alpha.min(self.rate * c * CEILING_FRACTION));
        let alpha = self.scavenge.map_or(alpha, |s| {
            let (rate, alone, packet) = (self.rate, self.alone_queue, self.packet_bits);
            s.bound(alpha, self.alpha_bits, rate, alone, packet)
        });
        self.starving.bound(alpha)
    }

    /// The queue is not being steered (growth, a competitive law, a sender short of pace):
    /// neither settled near the target nor held full.
    fn unsettle(&mut self) {
        self.settled_since = None;
        self.pinned = None;
    }

    /// Follow whether the buffer is held full: the queue `q` (seconds) stood still within
    /// [`PINNED_FLAT`] while `lossy` ([`PINNED_LOSS`] lost, a loss within the last RTT, and
    /// no more than twice α held).
    /// True once that has lasted [`PINNED_RTTS`].
    fn track_pinned(&mut self, now: Instant, q: f64, rtt: Duration, lossy: bool) -> bool {
        self.pinned = match self.pinned {
            _ if !lossy => None,
            None => Some((now, q, q)),
            Some((t, lo, hi)) => {
                let (lo, hi) = (lo.min(q), hi.max(q));
                Some(if hi - lo <= PINNED_FLAT.max(0.1 * hi) {
                    (t, lo, hi)
                } else {
                    (now, q, q)
                })
            }
        };
        self.pinned
            .is_some_and(|(t, ..)| now.saturating_since(t) >= rtt * PINNED_RTTS)
    }

    /// Aim at α again until a probe says this flow is alone: the share, and the ceiling
    /// found with it, describe a path or company that has changed.
    fn forget_share(&mut self, now: Instant) {
        self.starving.on_forget(now, self.ceiling.is_some());
        self.share = None;
        self.ceiling = None;
        self.share_dip = None;
    }

    #[allow(clippy::too_many_arguments)]
    fn probe_step(
        &mut self,
        now: Instant,
        rtt: Duration,
        srtt: Duration,
        q: f64,
        floor: i64,
        d: Option<f64>,
        steady: bool,
        lost: bool,
    ) {
        let competing = self.is_competing();
        let alpha_now = self.alpha();
        // A stale probe's share sample, the delivery it started from, and whether it came
        // from a full buffer (measured by delivery alone).
        let mut share_sample = None;
        // The loss that kept a buffer full was this flow's own overflow, not the path's.
        let mut own_overflow = None;
        let (verdict, drained) = match &mut self.probe {
            Probe::Idle { next } => {
                let next = *next;
                self.start_probe(now, rtt, q, d, steady || competing, alpha_now, next);
                return;
            }
            Probe::Up {
                kind,
                start,
                half,
                q: readings,
                d0,
                q_max,
                d_max,
                judged,
                confirms,
                lost: lost_during,
                pinned,
                rtt0,
                gains,
                ..
            } => {
                let up_gain = gains.0 - 1.0; // a stale probe's: less on long paths (PROBE_BUMP)
                let age = now.saturating_since(*start);
                // The rate is held for the probe, but not into a step down; a drain that
                // decides the mode, or under a competitive law, runs its course.
                let decides = *judged || competing;
                if !decides && d.is_some_and(|d| d < PROBE_COLLAPSE * *d0) {
                    self.end_probe(now, rtt);
                    return;
                }
                // Reports about packets sent during the probe arrive from one RTT after its start.
                if age >= rtt {
                    *q_max = q_max.max(q);
                    readings.q_min = readings.q_min.min(q);
                    // How fast the queue falls at the start measures this flow's share of
                    // the bottleneck (`capacity.rs`).
                    readings.note_fall(
                        age.saturating_sub(*rtt0).as_secs_f64(),
                        q,
                        half.as_secs_f64(),
                    );
                    // The slow half's readings, timed from the RTT it started with: with the
                    // RTT read now, a refill's first rise (3.3 ms after a step to a longer
                    // path) lengthened the window that was to end before it, and the flat
                    // bottom of a stale floor read as a competitor's standing queue.
                    if age < *rtt0 + half.mul_f64(FLAT_AFTER) {
                        readings.q_early = readings.q_early.min(q);
                    } else if age < *rtt0 + *half {
                        readings.q_late_max = readings.q_late_max.max(q);
                    }
                    *d_max = d_max.max(d.unwrap_or(0.0));
                    *lost_during |= lost;
                }
                if age < (rtt * 2).max(*half * 2) {
                    return;
                }
                // A drain right after another starts from the queue the first one left: it
                // says nothing about who holds the queue, so only drains from a standing queue
                // are judged.
                // This flow's share of the bottleneck, by how fast the queue fell at the start.
                let share_by_fall = readings.share_by_fall(gains.0);
                // The slow half took (1 − DRAIN_GAIN)·rate·half bits out of the queue, which
                // fell by q0 − q_min: the bottleneck's rate is their ratio, unless the others
                // grew into the drain. The speed of the fall at its start reads it too, and the
                // lower of the two is the reading a flow enters with (`capacity.rs`,
                // "Entering"). A delay-mode drain's reading is kept for an entry that has none.
                let removed = self.rate * (1.0 - DRAIN_GAIN) * half.as_secs_f64();
                let by_removal =
                    (readings.fell() > JUDGED_FROM / 4.0).then(|| removed / readings.fell());
                if let (ProbeKind::Drain, false, true, Some(c)) =
                    (*kind, competing, self.compete_as > 0.0, by_removal)
                {
                    self.drain_reading = Some((now, c));
                }
                let drained = judged.then(|| {
                    // `own_target()`, spelled out: `self.probe` is borrowed here.
                    let own = alpha_now / self.rate;
                    let deepest = depth(&mut self.level_peak_long, now, floor);
                    let packet = self.packet_bits / self.rate;
                    DrainEnd {
                        outcome: Drained::judge(*readings, own, deepest, packet),
                        by_removal,
                        share_by_fall,
                        bottom: readings.q_min,
                        confirms: *confirms,
                    }
                });
                // Competitive mode's drains also measure the bottleneck (`capacity.rs`).
                if let (ProbeKind::Drain, Some(share), true) = (*kind, share_by_fall, competing) {
                    self.capacity.drained(now, self.rate, *d0, share, gains.0);
                }
                // On a full link the bump adds PROBE_GAIN/2 RTT of this flow's data to the
                // queue (0.6 ms for one of four flows at 50 ms); on an idle one, nothing.
                let queue_grew =
                    *q_max > readings.q0 + STALE_QUEUE_NOISE.max(0.005 * rtt.as_secs_f64());
                // Delivery must rise by nearly the whole bump: on a full link shared with
                // others, FIFO service gives this flow only part of its extra rate.
                // A full drop-tail buffer cannot grow either, and a small flow's share of it
                // grows with what it sends: next to BBR holding a 1×BDP buffer full, a joining
                // `high` flow took the 50 ms standing queue into its floor, read it as empty
                // for 10 s and saw none of BBR's ProbeRTT dips. What overflows loses packets;
                // a flow that may compete therefore does not call its floor stale when the
                // bump lost any (random loss only delays the verdict to a later probe).
                let overflowed = (self.compete_as > 0.0 || pinned.is_some()) && *lost_during;
                // The bump's half RTT at +g adds g·r·half bits to the queue, g·half·r/C
                // seconds of it: the rise over that is r/C.
                if *kind == ProbeKind::Stale && !half.is_zero() && *d0 > 0.0 {
                    let added = up_gain * half.as_secs_f64();
                    let by_queue = (*q_max - (readings.q0 + q) / 2.0) / added;
                    let by_delivery = 1.0 - (*d_max / *d0 - 1.0) / up_gain;
                    // This flow's bump comes back out of the queue in the probe's second half;
                    // a queue that is still rising at the end is someone else's growing.
                    let came_back = q - readings.q0 <= 0.5 * (*q_max - readings.q0);
                    // And the queue before it was the one this flow aims at, not more: a
                    // delay floor left stale by a longer path reads as a queue that does
                    // not go away, and a shorter target would only cut the rate for it.
                    // Within a packet: the queue is read in packets (1.2 ms at 10 Mbit/s; a
                    // lone flow aiming at 2 ms read 2.58 and counted as sharing). Flows that
                    // may compete keep the bound as it was: their drains were tuned with it.
                    let packet = if self.compete_as > 0.0 {
                        0.0
                    } else {
                        2.0 * self.packet_bits / self.rate
                    };
                    let at_target = readings.q0 <= SHARE_AT_TARGET * alpha_now / self.rate + packet;
                    // Delivery cannot rise by more than the bump: if it did, a burst of
                    // held arrivals (a stall ending) or capacity others left filled the
                    // probe's window, and it measured neither share.
                    let burst = by_delivery < -SHARE_BURST;
                    self.probe_retry = burst;
                    // Before any share is known, a queue above target (start-up's, or a
                    // stale floor's) says nothing about the share either: counting it as 0
                    // took three or four good samples, 2.3 s apart, to undo.
                    let unknown_above_target = !at_target && self.share.is_none();
                    // A buffer held full cannot grow: the bump's excess was lost, so the queue
                    // measures nothing (a lone flow at 10 Mbit/s, 20 ms read 0.04–0.19), and
                    // only delivery measures the share: FIFO drops take this flow's share of
                    // the excess, so delivery rises by the others' share of the bump — by
                    // nothing when the flow is alone. It comes back flat, or not at all.
                    // A bump that lost packets and raised the queue by less than
                    // [`CAPPED_RISE`] of what it adds alone met a full buffer too, whether or
                    // not the flow had found it held full yet (start-up's overflow: a lone
                    // flow at 10 Mbit/s, 40 ms, 1 % loss read 0.14 there and was charged).
                    // Its bump may be shorter than the delivery window, which dilutes the rise
                    // by their ratio (a flow with no share at all reads 0.5 from a bump half
                    // the window): the reading is scaled back, up to twice.
                    let seen = (half.as_secs_f64() / delivery_window(rtt).as_secs_f64()).min(1.0);
                    let capped = seen >= 0.5 && *q_max - readings.q0 < CAPPED_RISE * added;
                    let full = (pinned.is_some() || capped) && *lost_during;
                    let came_back = came_back || full && (q - readings.q0).abs() <= PINNED_FLAT;
                    let x = if came_back && at_target {
                        if full {
                            1.0 - (1.0 - by_delivery) / seen
                        } else {
                            by_queue.min(by_delivery)
                        }
                    } else {
                        0.0
                    };
                    share_sample = (!burst && !unknown_above_target).then_some((
                        x.clamp(0.0, SHARE_MAX),
                        *d0,
                        full,
                    ));
                    if full && x >= ALONE_SHARE.0 {
                        // Where the buffer overflowed, not where this probe found the queue:
                        // under a ceiling the queue stands lower, and each probe would lower
                        // the ceiling again (1 ms of buffer: 0.35 ms, then 0.15, 0.02).
                        own_overflow = Some(pinned.unwrap_or(readings.q0).max(readings.q0));
                    }
                }
                let stale = *kind == ProbeKind::Stale
                    && !queue_grew
                    && !overflowed
                    && *d_max > *d0 * (1.0 + up_gain * 0.85);
                (stale, drained)
            }
        };
        if let Some((x, delivery, full)) = share_sample {
            if let Some(s) = &mut self.scavenge {
                s.on_sample();
            }
            self.starving.on_sample(x, delivery, full);
            self.share = Some(
                self.share
                    .map_or(Share::new(x, delivery), |s| s.update(x, delivery)),
            );
            self.share_dip = None;
        }
        // Alone by the smoothed share, not by one sample: next to three others in a full
        // buffer one sample read 0.78 at a true quarter, and a ceiling and a lowered α would
        // have followed from it.
        let alone = self.share.is_some_and(|s| s.alone());
        if let (Some(q_full), Some((_, delivery, _)), true) = (own_overflow, share_sample, alone) {
            self.loss = LossFraction::default();
            // Below ALONE_QUEUE, the least a flow aims at alone anyway, a ceiling would only
            // cut that aim, and the flat test (PINNED_FLAT) tells nothing there: start-up's
            // one burst of overflow with 2 % random loss read as a buffer held full at
            // 0.36 ms (1 Gbit/s, RTT 0, a 1 ms buffer), and its ceiling cost 0.8 % goodput.
            if q_full >= ALONE_QUEUE {
                self.ceiling = Some(q_full);
            }
            self.starving.on_alone_in_full_buffer(now, q_full, delivery);
        }
        if let Some(end) = drained {
            self.after_drain(now, end, srtt, q, floor);
        }
        if verdict {
            // The "queue" did not grow while more was delivered: the floor is stale.
            self.base_owd
                .reset(now, self.recent_owd.get(now).unwrap_or(0));
        }
        self.end_probe(now, rtt);
    }

    /// The probe is over (measured, or cut short): the next one waits [`PROBE_EVERY`] RTTs,
    /// or [`PROBE_RETRY`] if a burst spoilt this one.
    fn end_probe(&mut self, now: Instant, rtt: Duration) {
        let wait = if std::mem::take(&mut self.probe_retry) {
            (rtt * PROBE_RETRY).max(PROBE_RETRY_MIN)
        } else {
            (rtt * PROBE_EVERY).max(PROBE_MIN_INTERVAL)
        };
        self.probe = Probe::Idle { next: now + wait };
        self.empty_since = None;
    }
}

impl RateControl for Delay {
    fn pacing_rate(&self) -> u64 {
        let r = match self.probe {
            Probe::Up { gain, .. } => (self.rate * gain).min(self.cap),
            Probe::Idle { .. } => self.rate,
        };
        r as u64
    }

    fn on_sent(&mut self, now: Instant, wire_bytes: u64, unused: Duration) {
        self.wire.add(wire_bytes as f64 * 8.0);
        if !unused.is_zero() {
            self.unused
                .add(unused.as_secs_f64() * self.pacing_rate() as f64);
        }
        if let Probe::Up {
            start,
            half,
            gains,
            gain,
            ..
        } = &mut self.probe
        {
            let age = now.saturating_since(*start);
            *gain = if age < *half {
                gains.0
            } else if age < *half * 2 {
                gains.1
            } else {
                1.0
            };
        }
    }

    fn on_feedback(&mut self, now: Instant, s: &RateSample) {
        let Some(owd) = s.one_way_delay_us else {
            return;
        };
        let gap = self
            .last_update
            .map(|t| now.saturating_since(t).as_secs_f64());
        if let Some(gap) = gap {
            self.report_gap += (gap.min(FEEDBACK_DELAY) - self.report_gap) / 4.0;
        }
        let (lo, hi) = RECENT_WINDOW;
        let recent_window = Duration::from_secs_f64(RECENT_REPORTS * self.report_gap).clamp(lo, hi);
        self.recent_owd.set_window(recent_window);
        self.base_owd.push(now, owd);
        self.recent_owd.push(now, owd);
        self.delivery.push(s.receiver_time_us, s.receiver_bytes);
        let mut base_owd = self.base_owd.get(now).unwrap_or(owd);
        if let Mode::Competitive { floor, .. } = self.mode {
            base_owd = base_owd.min(floor);
        } else if let Some(suspect) = self.suspect {
            base_owd = base_owd.min(suspect.floor);
        }
        let recent = self.recent_owd.get(now).unwrap_or(owd);
        // The last packet of a batch waits behind the batch itself (§7.1): not a standing queue.
        let batch_us = i64::try_from(s.batch_time.as_micros()).unwrap_or(i64::MAX);
        let q = (recent - base_owd).saturating_sub(batch_us).max(0) as f64 / 1e6;
        let base = s.min_rtt.as_secs_f64();
        let rtt_s = (base + q).max(1e-4);
        self.alone_queue = ALONE_QUEUE.max(ALONE_QUEUE_RTT * base);
        let rtt = Duration::from_secs_f64(rtt_s);
        // Growth is judged per loop delay: the RTT, or the delay filter's window when that is
        // longer (a queue takes the window to show). 10 ms reports on a short path thus allow
        // one doubling per report, 1 ms reports one per 3 ms.
        let loop_s = rtt_s.max(recent_window.as_secs_f64());
        let gap = gap.unwrap_or(0.0);
        let grow_dt = gap.min(loop_s);
        let dt = gap.min(rtt_s);
        self.last_update = Some(now);
        // Receiver byte counts are DATA payload; rates here are IP bits.
        let dg = s.datagram_bytes.max(1) as f64;
        let wire_bits = (dg + IP_UDP_OVERHEAD as f64) / dg * 8.0;
        self.packet_bits = dg * wire_bits;
        let delivered_over = |w: Duration| self.delivery.rate(w).map(|b| b as f64 * wire_bits);
        let window = delivery_window(rtt);
        let d = delivered_over(window);
        if let (Some(d), true) = (d, self.compete_as > 0.0) {
            self.peak_delivery.push(now, d as i64);
        }
        if let Some(d) = d {
            self.starving.on_delivery(d);
            if let Some(s) = &mut self.scavenge {
                s.on_delivery(now, d, rtt, window, self.packet_bits);
            }
        }
        self.loss
            .push(dt / LOSS_HORIZON.as_secs_f64(), s.acked_bytes, s.lost_bytes);
        if s.lost_bytes > 0 {
            self.lost_at = Some(now);
        }
        let losing = self.loss.fraction() >= PINNED_LOSS
            && self.lost_at.is_some_and(|t| now.saturating_since(t) <= rtt);
        mark_since(&mut self.lossy_since, losing, now);
        // Packets sent into an outage are lost when it ends: not a full buffer.
        let after_outage = self
            .restored_at
            .is_some_and(|t| now.saturating_since(t) < RESTORE_QUIET);
        let overflowing = !after_outage
            && self.compete_as == 0.0
            && self
                .lossy_since
                .is_some_and(|t| now.saturating_since(t) >= rtt * PINNED_RTTS);
        self.q_rtt_min.set_window(rtt);
        self.q_rtt_min.push(now, (q * 1e6) as i64);
        if self.compete_as > 0.0 {
            self.watch_levels(now, q, rtt, base_owd);
        }
        let q_star = self.own_target();

        let mut steady = false;
        // Spare capacity shows as a queue (nearly) empty for a whole RTT. A queue emptied
        // briefly — by a probe's slow half, or by steering's reaction to a one-RTT-old queue —
        // is not spare capacity, and growing into it overshoots.
        if q >= q_star / 4.0 {
            self.empty_since = None;
        } else if self.empty_since.is_none() {
            self.empty_since = Some(now);
        }
        let probing = matches!(self.probe, Probe::Up { .. });
        // The share was measured on another path, or before others came: the path's
        // capacity stepped down, or others took part of it. Aim at α until a probe says
        // again that this flow is alone. Not before the dip has lasted a delivery window: a
        // path stall's or this flow's own drain's passes within one, a step down's or
        // newcomers' does not.
        if let (Some(d), false, Some(share)) = (d, probing, self.share) {
            if self.share_dip.is_none() && d < SHARE_RESET * share.delivery {
                self.share_dip = Some(now);
            } else if d >= SHARE_RECOVERED * share.delivery {
                self.share_dip = None;
            }
            // Flows that may compete forget at once, as before: their drains are judged
            // against the other flows' (Spate flows started together must drain together),
            // and a share kept a window longer moved those drains (two `compete` flows
            // started together at 100 Mbit/s, 50 ms: one competed with the other for 12 s).
            let wait = if self.compete_as > 0.0 {
                Duration::ZERO
            } else {
                window
            };
            if self
                .share_dip
                .is_some_and(|t| now.saturating_since(t) >= wait)
            {
                self.forget_share(now);
            }
        }
        // ...and delivery must keep up with what was sent one loop earlier (the packets the
        // window's deliveries were sent between rtt + window and rtt ago; compared with the
        // oldest rate, which during growth is the lowest). An empty queue with
        // delivery far behind is a delay floor that took in a standing queue, or a buffer too
        // short to show delay: growing there only adds loss.
        // Only judged once the whole window's packets were sent at known rates (not in the
        // first two RTTs, when deliveries still include the handshake's idle time).
        // A single short window can fall behind by chance (reordered packets, a report gap),
        // so it must stay behind for a whole RTT.
        // The window's packets left between rtt + window and rtt ago, paced at `then`, of
        // which `unused` bits/s the sender did not send (nothing to send, or a busy CPU).
        self.unused.mark(now);
        self.wire.mark(now);
        let sent_from = now.saturating_sub(rtt + window);
        let unused = self.unused.rate(sent_from, now.saturating_sub(rtt));
        let then = self.sent.at(sent_from);
        let limited = then.is_some_and(|r| unused > SENDER_LIMITED * r);
        let behind = match (d, then) {
            // Raw D, not credited for loss: overflow counted as loss must not excuse it.
            (Some(d), Some(then)) => d < KEEP_UP * (then - unused),
            _ => false,
        };
        mark_since(&mut self.behind_since, behind, now);
        let keeps_up = self
            .behind_since
            .is_none_or(|t| now.saturating_since(t) < rtt);
        let spare = self
            .empty_since
            .is_some_and(|t| now.saturating_since(t) >= rtt)
            && !probing
            && keeps_up
            && !overflowing;
        self.trace = DelayTrace {
            q,
            target: q_star,
            delivery: d,
            unused,
            limited,
            behind: !keeps_up,
            spare,
            probing,
            loss: self.loss.fraction(),
        };
        let step = Step {
            now,
            latest: s.rtt.unwrap_or(s.srtt),
            rtt,
            base,
            q,
            then,
            unused,
        };
        match d {
            // While probing, hold the rate: the probe's bump and dip cancel, and the reports of
            // the next two RTTs describe the probe, not the path. (A drain of growth's
            // overshoot follows delivery up.)
            Some(d) if probing => self.during_overshoot(&step, d),
            _ if self.is_competing() => self.compete_step(now, s, (q, base_owd), rtt, d),
            Some(d) if !spare => {
                // Steer: what the path delivers (before random loss), corrected by this flow's
                // distance from holding α bytes in the queue, over the horizon T.
                // Probes judge the path against a settled queue: near the target for 2 RTTs.
                // Up to twice α even while aiming lower: a delay floor made stale by a longer
                // path reads as a queue the flow cannot remove, and only a probe finds it.
                // A buffer held full is settled too, wherever the queue stands against the
                // target: it cannot move, and only a probe can tell whose overflow it is.
                let held = d * q;
                let within = held < 2.0 * self.alpha_bits;
                let lossy = within && losing;
                let pinned = self.track_pinned(now, q, rtt, lossy);
                if pinned && self.compete_as == 0.0 {
                    self.held_full = Some((now + HELD_FULL_FOR, q));
                }
                let held_full = self
                    .held_full
                    .is_some_and(|(until, at)| now < until && q >= HELD_FULL_LEVEL * at);
                if !held_full {
                    self.held_full = None;
                }
                // (Only a flow that may not compete ever finds a buffer held full.)
                let shares_full =
                    held_full && !after_outage && self.share.is_none_or(|s| !s.alone());
                // Loss with a queue near its target is random loss: the bottleneck drained
                // more than arrived. Loss with a large queue is (also) overflow: no credit, nor
                // in a buffer held full, even one this flow found itself alone in. A flow
                // whose delay floor took in a full buffer (it started while others held it)
                // reads the buffer as empty, finds itself alone once it holds most of it, and
                // its credited overflow kept it there: 184 of 200 Mbit/s at 20 % loss, three
                // flows starved (docs/design.md, session 46).
                let path = if held_full {
                    d
                } else if d * q < CREDIT_BELOW * self.alpha() {
                    d / (1.0 - self.loss.fraction())
                } else {
                    d
                };
                // What the path delivered is all it was given when the sender left capacity
                // unused: add that back, or a sender short of CPU (or of data) would ratchet
                // its rate down to whatever it last managed to send.
                let sent = path + unused;
                let horizon = STEER_RTTS * (rtt_s + FEEDBACK_DELAY);
                let mut target = sent + (self.alpha() - d * q) / horizon;
                if shares_full {
                    // Each flow pays for its overflow (OVERFLOW_CHARGE). Before its first
                    // share sample, never below what it is delivered: a flow alone would
                    // empty the buffer for the second the loss fraction takes to forget,
                    // swing (fluid model: 38 % lost), and never settle for the probe that
                    // finds it alone.
                    let charged = target - OVERFLOW_CHARGE * self.loss.fraction() * self.rate;
                    target = if self.share.is_some() {
                        charged
                    } else {
                        charged.max(sent.min(target))
                    };
                }
                if limited {
                    // A faster pace would not be used, and a slower one would not be undone
                    // (growth waits until the sender keeps pace): hold. Only a queue above
                    // this flow's target for a whole RTT cuts: a delivery rate that dipped
                    // (the host did not schedule the sender, or held the path's packets)
                    // says nothing about the path while the queue is where it should be,
                    // and a path that held packets for a few ms lifts the queue reading for
                    // a report or two (at 250 Mbit/s every such stall read above the 2.4 ms
                    // target), where a queue this flow's pace built stays for an RTT.
                    target = if self.queue_over_rtt(now, q) > q_star {
                        target.min(self.rate)
                    } else {
                        self.rate
                    };
                }
                self.rate = target.max(sent * MIN_STEER_FRACTION);
                self.last_steered = sent;
                if self.growth > MIN_GROWTH {
                    self.drain_overshoot(&step, d, sent);
                }
                self.growth = MIN_GROWTH;
                if pinned || held_full || within && held >= 0.5 * self.alpha() {
                    let since = *self.settled_since.get_or_insert(now);
                    steady = now.saturating_since(since) >= rtt * 2;
                } else {
                    self.settled_since = None;
                }
            }
            // Spare capacity, but the sender does not use the pace it has: growing the pace
            // would only let a burst out when the sender catches up.
            _ if limited => self.unsettle(),
            _ => {
                // Grow: far less queue than this flow's share: there is spare capacity. Return
                // at once to the rate last steered to, grow beyond it.
                // Back above the rate it last steered to, growth is slow until delivery shows
                // capacity the flow has not seen: the queue may only have emptied because
                // steering undershot (see REGROWTH).
                let regrowing = self.last_steered > 0.0
                    && self.compete_as == 0.0
                    && self.held_full.is_none()
                    && self.loss.fraction() < PINNED_LOSS
                    && d.is_none_or(|d| {
                        d / (1.0 - self.loss.fraction()) <= NEW_CAPACITY * self.last_steered
                    });
                let g = if regrowing {
                    self.growth.min(REGROWTH)
                } else {
                    self.growth
                };
                self.rate = (self.rate * (g * grow_dt / loop_s).exp2()).max(self.last_steered);
                self.growth = (self.growth * (grow_dt / loop_s).exp2()).min(1.0);
                self.unsettle();
            }
        }
        self.rate = self
            .rate
            .clamp(self.floor.max(crate::pacer::MIN_RATE_BPS as f64), self.cap);
        self.sent.push(now, self.rate);
        self.probe_step(now, rtt, s.srtt, q, base_owd, d, steady, s.lost_bytes > 0);
    }

    fn mode(&self) -> super::RateMode {
        if let Mode::Competitive { law, .. } = &self.mode {
            if law.rate_based() {
                super::RateMode::FollowingBbr
            } else {
                super::RateMode::Competitive
            }
        } else {
            super::RateMode::Delay
        }
    }

    fn on_path_silent(&mut self, _now: Instant) {
        if self.saved_rate.is_none() {
            self.saved_rate = Some(self.rate);
        }
    }

    fn on_path_restored(&mut self, now: Instant) {
        self.restored_at = Some(now);
        self.lossy_since = None;
        self.held_full = None;
        if let Some(r) = self.saved_rate.take() {
            self.rate = r;
        }
        // Measurements across the outage describe nothing; give the path one report cycle.
        self.delivery.clear();
        self.sent.clear();
        self.unused.clear();
        self.wire.clear();
        self.behind_since = None;
        self.last_update = None;
        self.probe = Probe::Idle {
            next: now + PROBE_MIN_INTERVAL,
        };
        // An outage may have been a handover: the share was measured on the path before it.
        // (Before, the dips after the outage forgot it, at a moment set by how the outage's
        // queue drained: the demo's second phase, queue p95 12.0 ms when the first dip
        // forgot it, 17.8 when a recovery cancelled that dip and a later one did; 12.3
        // forgotten here.)
        self.forget_share(now);
        self.starving.clear();
    }
}

#[cfg(test)]
mod tests;
