#!/usr/bin/env bash
# Writes the sharing-with-TCP matrix of issue 19: one Spate flow (policy fair, high or low;
# fair and high with `compete = true`) and one kernel TCP flow (CUBIC or BBR) on 100 Mbit/s,
# 50 ms RTT, a drop-tail buffer of 1 or 4 BDP (50 or 200 ms), started together or with TCP
# first and Spate 10 s later; 60 s, shares measured over the last 30 s. All run in both the
# simulator (its TCP models) and the emulator (kernel TCP through iperf3). Then the issue's
# random-loss check: `fair` next to CUBIC with 0.1, 1 and 2 % random loss must not get less
# than half (random loss is not congestion; CUBIC is the one it slows).
# Usage: scenarios/tcp/generate.sh
set -euo pipefail
cd "$(dirname "$0")"

# scenario FILE COMMENT BOUND NAME QUEUE_MS PATH_EXTRA SPATE_START POLICY COMPETE TCP
scenario() {
  cat > "$1" <<TOML
# Issue 19: $2
# Bound: $3
name = "$4"
seed = 1
duration_s = 60.0
fairness_from_s = 30.0

[[path.phase]]
at_s = 0.0
rate_mbps = 100.0
rtt_ms = 50.0
queue_ms = $5.0$6

[[flow]]
start_s = $7
protocol = "spate"
policy = "$8"$9

[[flow]]
start_s = 0.0
protocol = "${10}"
TOML
}

for policy in fair high low; do
  for tcp in cubic bbr; do
    for bdp in 1 4; do
      for start in together tcp-first; do
        spate_start=0.0
        [ "$start" = tcp-first ] && spate_start=10.0
        compete=""
        [ "$policy" != low ] && compete=$'\ncompete = true'
        scenario "${policy}-${tcp}-${bdp}bdp-${start}.toml" \
          "Spate ${policy} and kernel ${tcp} share 100 Mbit/s, 50 ms, ${bdp}xBDP buffer; ${start}." \
          "Spate's share of the last 30 s within 40-60 % (fair), 55-75 % (high), at most 10 % (low)." \
          "${policy} vs ${tcp}, ${bdp}xBDP, ${start}" $(( bdp * 50 )) "" \
          "$spate_start" "$policy" "$compete" "$tcp"
      done
    done
  done
done
for loss in 0.1 1 2; do
  scenario "fair-cubic-1bdp-loss${loss}.toml" \
    "Spate fair and kernel cubic share 100 Mbit/s, 50 ms, 1xBDP buffer, ${loss} % random loss; together." \
    "random loss does not slow Spate below its share: at least 50 % of the last 30 s." \
    "fair vs cubic, 1xBDP, loss ${loss} pct" 50 $'\n'"loss = $(awk "BEGIN { print ${loss} / 100 }")" \
    0.0 fair $'\ncompete = true' cubic
done
