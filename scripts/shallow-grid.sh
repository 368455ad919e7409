#!/usr/bin/env bash
# Several `fair` flows in a drop-tail buffer shorter than their Σα (simulator only, about a minute
# on two cores): the known limit of docs/design.md, "A buffer shorter than α", measured
# around `scenarios/limits/four-shallow-100m.toml` instead of at that one point.
#
# 64 runs of 60 s: 10, 50, 100 and 200 Mbit/s × RTT 20 and 50 ms × buffers of 0.5 and 1 BDP ×
# 2 or 4 flows × joining 2 or 12 s apart. Each cell shows Jain's index over the time from 10 s
# after the last flow joined to the end, and the flows' mean retransmission overhead
# (retransmitted bytes / bytes offered, %); the summary counts the runs with Jain below 0.9
# and with more than 10 % retransmitted. α = 75 kB is 60 ms of queue at 10 Mbit/s and 3 ms at
# 200 Mbit/s, so the grid spans buffers from far shorter than one flow's α to longer than four.
#
# LAB=path runs another spate-lab binary (an experiment) instead of building this tree's;
# SEED=n another seed (1 by default), which also starts the k-th flow (n − 1) · 0.137 · k s
# later: these paths have no random loss for a seed to move, and the runs are chaotic enough
# that variants must be compared over several.
# Usage: [LAB=path] [SEED=n] scripts/shallow-grid.sh
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "${LAB:-}" ]; then
    cargo build -q --release -p spate-lab --manifest-path "$here/Cargo.toml"
    LAB="$here/target/release/spate-lab"
fi
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
rates=(10 50 100 200)
rtts=(20 50)
buffers=(0.5 1)
cells=("2 2" "2 12" "4 2" "4 12")
for rate in "${rates[@]}"; do
    for rtt in "${rtts[@]}"; do
        for buf in "${buffers[@]}"; do
            for cell in "${cells[@]}"; do
                read -r n gap <<< "$cell"
                f="$dir/$rate-$rtt-$buf-$n-$gap.toml"
                {
                    echo "name = \"$n fair flows $gap s apart, $rate Mbit/s, $rtt ms, $buf BDP\""
                    echo "seed = ${SEED:-1}"
                    echo "duration_s = 60.0"
                    echo "fairness_from_s = $(((n - 1) * gap + 10)).0"
                    echo
                    echo "[[path.phase]]"
                    echo "at_s = 0.0"
                    echo "rate_mbps = $rate.0"
                    echo "rtt_ms = $rtt.0"
                    echo "queue_ms = $(python3 -c "print($rtt * $buf)")"
                    for i in $(seq 0 $((n - 1))); do
                        echo
                        echo "[[flow]]"
                        echo "start_s = $(python3 -c "print($i * $gap + (${SEED:-1} - 1) * 0.137 * $i)")"
                        echo 'policy = "fair"'
                    done
                } > "$f"
            done
        done
    done
done
ls "$dir"/*.toml | xargs -P "$(nproc)" -I{} sh -c "'$LAB' sim {} -q --json > {}.json"
python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
rates, rtts, bufs = (10, 50, 100, 200), (20, 50), ("0.5", "1")
cells = (("2", "2"), ("2", "12"), ("4", "2"), ("4", "12"))
print("| Mbit/s | RTT ms | buffer | 2 flows, 2 s apart | 2, 12 s | 4, 2 s | 4, 12 s |")
print("|---|---|---|---|---|---|---|")
unfair = lossy = runs = 0
total = 0.0
for rate in rates:
    for rtt in rtts:
        for buf in bufs:
            row = f"| {rate} | {rtt} | {buf} BDP |"
            for n, gap in cells:
                report = json.load(open(f"{d}/{rate}-{rtt}-{buf}-{n}-{gap}.toml.json"))
                flows = report["flows"]
                jain = report["fairness_jain"] or 0.0
                retx = 100 * sum(f["retransmission_overhead"] for f in flows) / len(flows)
                row += f" {jain:.3f} · {retx:.1f} % |"
                runs += 1
                unfair += jain < 0.9
                lossy += retx > 10
                total += retx
            print(row)
print()
print(f"Jain below 0.9: {unfair} of {runs} runs; more than 10 % retransmitted: {lossy} of {runs}; "
      f"mean retransmitted {total / runs:.1f} %")
PY
