#!/usr/bin/env bash
# Spate next to one CUBIC flow on small bandwidth-delay products, where Spate's queue target
# (α = 75 000 bytes: 60 ms at 10 Mbit/s, 30 ms at 20, 12 ms at 50) is as deep as the buffer
# or deeper. Simulator; prints one line per path: Spate's share of the last 30 s for `fair`
# (delay mode), `fair` with `compete = true`, `low`, and two CUBIC flows as the reference.
#   LAB=path   the spate-lab binary (default: this tree's release build)
# Usage: [LAB=path] experiments/s58-rhythm/small-bdp/run.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
LAB="${LAB:-$here/../../../target/release/spate-lab}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
share() { "$LAB" sim "$1" -q --json | python3 -c "import json,sys; print('%.3f' % json.load(sys.stdin)['flows'][0]['share'])"; }
echo "| Mbit/s | RTT ms | buffer | fair | fair, compete | low | CUBIC + CUBIC |"
echo "|---|---|---|---|---|---|---|"
for rate in 10 20 50; do
    for rtt in 10 20 40; do
        for b in 1 4; do
            fair="$here/fair-cubic-$rate-$rtt-${b}bdp.toml"
            low="$here/low-cubic-$rate-$rtt-${b}bdp.toml"
            sed 's/^policy = "fair"/policy = "fair"\ncompete = true/' "$fair" > "$tmp/compete.toml"
            sed 's/^protocol = "spate"/protocol = "cubic"/; /^policy/d' "$fair" > "$tmp/cubic.toml"
            echo "| $rate | $rtt | ${b}×BDP | $(share "$fair") | $(share "$tmp/compete.toml") | $(share "$low") | $(share "$tmp/cubic.toml") |"
        done
    done
done
