#!/usr/bin/env bash
# One `low` flow (POLICY=fair or high: one of that policy) alone, 40 s, on 120 paths: 2, 5,
# 10, 20, 50 Mbit/s × 10, 40, 100, 200 ms RTT × 0, 1, 2 % random loss × the default buffer
# and one BDP. Compares two builds of spate-lab run
# by run (utilization, queue p50/p95, retransmission) and prints the runs that moved and the
# means. Simulator, about 10 s on two cores.
#   A, B   the two spate-lab binaries (B defaults to this tree's release build)
# Usage: A=path [B=path] [POLICY=low|fair|high] experiments/s60-scavenger/lone.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
A="${A:?A=path of the spate-lab to compare against}"
B="${B:-$here/../../target/release/spate-lab}"
policy="${POLICY:-low}"
out="$(mktemp -d)"; trap 'rm -rf "$out"' EXIT
mkdir -p "$out/toml" "$out/a" "$out/b"
for r in 2 5 10 20 50; do for t in 10 40 100 200; do for l in 0 1 2; do for b in d 1; do
  f="$out/toml/lone-$r-$t-$l-$b.toml"
  {
    echo "name = \"$policy alone, $r Mbit/s, $t ms, $l % loss, buffer $b\""
    echo "seed = 1"; echo "duration_s = 40.0"; echo
    echo "[[path.phase]]"; echo "at_s = 0.0"; echo "rate_mbps = $r.0"; echo "rtt_ms = $t.0"
    echo "loss = 0.0$l"
    if [ "$b" = 1 ]; then echo "queue_ms = $t.0"; fi
    echo; echo "[[flow]]"; echo "start_s = 0.0"; echo "policy = \"$policy\""
  } > "$f"
done; done; done; done
for side in a b; do
  lab="$A"; [ "$side" = b ] && lab="$B"
  ls "$out"/toml/*.toml | xargs -P2 -I{} sh -c \
    'f={}; "$0" sim "$f" -q --json 2>/dev/null > "$1/$(basename "$f" .toml).json"' "$lab" "$out/$side"
done
python3 - "$out/a" "$out/b" <<'PY'
import json, os, sys
a, b = sys.argv[1], sys.argv[2]
def get(d, n):
    j = json.load(open(f"{d}/{n}"))
    p, f = j['phases'][0], j['flows'][0]
    return p['utilization'], p['queue_delay_ms']['p50'], p['queue_delay_ms']['p95'], f['retransmission_overhead']
tot = [[0.0] * 4, [0.0] * 4]; n = moved = 0
for fn in sorted(os.listdir(a)):
    x, y = get(a, fn), get(b, fn); n += 1
    for i in range(4):
        tot[0][i] += x[i]; tot[1][i] += y[i]
    if abs(x[0] - y[0]) > 0.01 or abs(x[1] - y[1]) > 1 or abs(x[3] - y[3]) > 0.01:
        moved += 1
        print(f"{fn[:-5]:18} util {x[0]:.3f} -> {y[0]:.3f}  queue p50 {x[1]:5.1f} -> {y[1]:5.1f}"
              f"  p95 {x[2]:5.1f} -> {y[2]:5.1f}  retx {x[3]:.3f} -> {y[3]:.3f}")
print(f"{n} runs, {moved} moved (utilization by > 0.01, queue p50 by > 1 ms or retransmission by > 0.01)")
m = [v / n for pair in zip(tot[0], tot[1]) for v in pair]
print("means: utilization %.4f -> %.4f, queue p50 %.2f -> %.2f ms, p95 %.2f -> %.2f ms, retransmitted %.4f -> %.4f" % tuple(m))
PY
