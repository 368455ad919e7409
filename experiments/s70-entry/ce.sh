#!/bin/bash
# Queue p95 (ms) and utilization after adapting of four lone flows with `compete = true`
# (the WAN grid at 400 ms without and with 1 % loss, at 200 ms with 1 %, and
# checks/lossy-long-fair): what `--compete` by default costs a flow alone.
# Usage: experiments/s70-entry/ce.sh LAB "SWITCHES"   (e.g. ce.sh /tmp/lab "S69_OVS=1 S70_HF=1")
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"; root="$here/../.."
dir="$(mktemp -d)"; trap 'rm -rf "$dir"' EXIT
python3 "$root/experiments/s69-land/compete-everywhere.py" "$dir" \
    "$root"/scenarios/wan-grid/rtt400-loss{0,1}.toml "$root/scenarios/wan-grid/rtt200-loss1.toml" \
    "$root/scenarios/checks/lossy-long-fair.toml" > /dev/null
for f in "$dir"/*.toml; do
    # shellcheck disable=SC2086
    env ${2:-X=1} "$1" sim "$f" --json 2>/dev/null | python3 -c "
import json, sys
p = json.load(sys.stdin)['phases'][0]
print('$(basename "$f" .toml)', p['queue_delay_ms']['p95'], p['utilization_after_adapt'])"
done
