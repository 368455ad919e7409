#!/usr/bin/env bash
# Coding (issue 18, spec §6.9) in the simulator: each scenario of scenarios/coding/ run with
# fec = "auto" (what the file says) and with coding off, as one Markdown table. "data s" is the
# completion less the handshake's round trip (no data can leave before it); "ideal" is
# size / rate + outages + one RTT; overshoot is (retransmitted + repair bytes) / file bytes.
# Deterministic (same numbers on every machine); about 15 s.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cargo build -q --release -p spate-lab --manifest-path "$here/Cargo.toml"
lab="$here/target/release/spate-lab"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "| scenario | fec | done s | data s | ideal s | overshoot % | repair | rebuilt | useless | retransmitted | tail RTTs | verified |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for f in "$here"/scenarios/coding/*.toml; do
    for fec in auto off; do
        sed "s/^fec = .*/fec = \"$fec\"/" "$f" >"$tmp/s.toml"
        "$lab" sim --json "$tmp/s.toml" | python3 -c '
import json, sys, tomllib
r = json.load(sys.stdin)
s = tomllib.load(open(sys.argv[1], "rb"))
f, phases = r["flows"][0], s["path"]["phase"]
rtt = phases[0]["rtt_ms"] / 1e3
rate = s["flow"][0]["rate_mbps"] * 1e6
outage = sum(p.get("outage_ms", 0) for p in phases) / 1e3
ideal = f["bytes_offered"] * 8 / rate + outage + rtt
done = f["completion_s"]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {done:.3f} | {done - rtt:.3f} | {ideal:.3f} | "
      f"{100 * f['"'"'overshoot'"'"']:.2f} | {f['"'"'repair_packets'"'"']} | {f['"'"'recovered_by_repair'"'"']} | "
      f"{f['"'"'useless_repairs'"'"']} | {f['"'"'retransmitted_packets'"'"']} | {f['"'"'tail_round_trips'"'"']} | {f['"'"'verified'"'"']} |")
' "$tmp/s.toml" "$(basename "$f" .toml)" "$fec"
    done
done
