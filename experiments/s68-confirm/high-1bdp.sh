#!/bin/bash
# The 32 runs of tests/tcp.rs's `high_holds_its_share_next_to_cubic_in_a_shallow_buffer_at_every_start`
# (`high` joining CUBIC in 1xBDP, together and CUBIC first, Spate's start shifted by 0-1.5 s)
# with a scratch build: prints each run (share of the last 30 s, seconds competing) and how many
# lie outside 55-75 % (the test allows 2).
# Usage: experiments/s68-confirm/high-1bdp.sh LAB "SWITCHES"
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
export lab=$1 sw=${2:-} here
d=$(mktemp -d); export d
trap 'rm -rf "$d"' EXIT
for s in together tcp-first; do for i in $(seq 0 15); do echo "$s $i"; done; done | xargs -P2 -n2 bash -c '
f="$here/scenarios/tcp/high-cubic-1bdp-$0.toml"
awk -v s="$(awk -v i="$1" "BEGIN{printf \"%.1f\", i/10}")" "/^\[\[flow\]\]/{n++} n==1 && !m && /^start_s = /{printf \"start_s = %.3f\n\", \$3+s; m=1; next} {print}" "$f" > "$d/$0-$1.toml"
# shellcheck disable=SC2086
env $sw "$lab" sim "$d/$0-$1.toml" --json 2>/dev/null | python3 -c "
import json, sys; f = json.load(sys.stdin)[\"flows\"][0]
print(\"$0\", \"$1\", f[\"share\"], round(f.get(\"competitive_mode_s\") or 0, 1))"' | sort -k1,1 -k2n > "$d/out.txt"
awk '{printf "%s %s %s %s | ", $1, $2, $3, $4; if (NR % 4 == 0) print ""}' "$d/out.txt"
awk '$3 < 0.55 || $3 > 0.75 {n++} END {print "outside", n + 0, "of", NR}' "$d/out.txt"
