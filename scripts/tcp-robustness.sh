#!/usr/bin/env bash
# How far the issue-19 shares hold beyond the eight points of scenarios/tcp (simulator only,
# about a minute): one flow of KIND (fair, high or low, with `compete = true` for fair and high;
# or cubic or bbr, the references: two TCP flows) joins one CUBIC flow (AGAINST=bbr: one BBR
# flow) on 100 Mbit/s with RTTs of
# 40, 45, 50, 60, 70 and 80 ms, drop-tail buffers of 1 and 4 BDP, starting 0, 3, 10 or 15 s
# after it; 60 s, shares over the last 30 s, as in scenarios/tcp. Prints a Markdown table of
# the joining flow's share (%), and how many of the 48 fall within BOUND (default 40-60).
# DURATION=S runs S seconds instead, shares over the second half; RTTS="40 50 70" other RTTs
# (sessions 17 and 18 used those three: 24 runs). LAB=path runs another spate-lab binary (an
# experiment) instead of building this tree's. UTC=S places the drain grid (`spate-lab sim
# --utc-start`; default the simulator's own, 0.5 s): flows that drain on the grid meet the
# competitor's cycles elsewhere at each placement.
# Usage: [DURATION=S] [AGAINST=cubic|bbr] [RTTS=...] [UTC=S] [LAB=path] scripts/tcp-robustness.sh [KIND] [BOUND_LOW BOUND_HIGH]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
kind="${1:-fair}"
lo="${2:-40}"
hi="${3:-60}"
duration="${DURATION:-60}"
against="${AGAINST:-cubic}"
case "$against" in
cubic | bbr) ;;
*)
    echo "AGAINST must be cubic or bbr" >&2
    exit 2
    ;;
esac
case "$kind" in
fair | high) flow=$'protocol = "spate"\npolicy = "'"$kind"$'"\ncompete = true' ;;
low) flow=$'protocol = "spate"\npolicy = "low"' ;;
cubic | bbr) flow="protocol = \"$kind\"" ;;
*)
    echo "usage: $0 [fair|high|low|cubic|bbr] [BOUND_LOW BOUND_HIGH]" >&2
    exit 2
    ;;
esac
if [ -z "${LAB:-}" ]; then
    cargo build -q --release -p spate-lab --manifest-path "$here/Cargo.toml"
    LAB="$here/target/release/spate-lab"
fi
lab="$LAB"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
starts=(0 3 10 15)
read -r -a rtts <<< "${RTTS:-40 45 50 60 70 80}"
inside=0
runs=0
echo "| buffer | RTT ms | joins at 0 s | 3 s | 10 s | 15 s |"
echo "|---|---|---|---|---|---|"
for bdp in 1 4; do
    for rtt in "${rtts[@]}"; do
        row="| ${bdp}×BDP | $rtt |"
        for start in "${starts[@]}"; do
            f="$dir/$kind-$bdp-$rtt-$start.toml"
            cat > "$f" <<TOML
name = "$kind joins $against, ${bdp}xBDP, $rtt ms, $start s"
seed = 1
duration_s = $duration.0
fairness_from_s = $((duration / 2)).0

[[path.phase]]
at_s = 0.0
rate_mbps = 100.0
rtt_ms = $rtt.0
queue_ms = $((bdp * rtt)).0

[[flow]]
start_s = $start.0
$flow

[[flow]]
start_s = 0.0
protocol = "$against"
TOML
            share=$("$lab" sim "$f" -q --json ${UTC:+--utc-start "$UTC"} | python3 -c \
                'import json,sys; print(round(100 * json.load(sys.stdin)["flows"][0]["share"], 1))')
            row="$row $share |"
            runs=$((runs + 1))
            if python3 -c "import sys; sys.exit(0 if $lo <= $share <= $hi else 1)"; then
                inside=$((inside + 1))
            fi
        done
        echo "$row"
    done
done
echo
echo "$inside of $runs within $lo-$hi %"
