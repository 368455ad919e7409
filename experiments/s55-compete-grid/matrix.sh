#!/usr/bin/env bash
# The simulator's TCP matrix (scenarios/tcp: fair/high next to CUBIC/BBR, 1×BDP and 4×BDP,
# together and TCP first), Spate's share and its seconds in competitive mode per run, one
# line each. Perturbed four ways, each a space-separated list:
#   UTCS="0 2 4 6"   where the drain grid falls (`spate-lab sim --utc-start`); default 0, not
#                    the scenarios' own 0.5 s (the JOINS and TCPAT run files are at 0)
#   SEEDS="2 3 4 5"  the scenario's seed (`--seed`; moves only the BBR model); default as filed
#   JOINS="10.0 11.3 12.6 13.9"  the tcp-first runs only, Spate joining at these seconds
#                    instead of 10 (CUBIC/BBR from 0; the share is still read over 30–60 s)
#   TCPAT="0.0 0.7 1.4 2.1"  the tcp-first runs only, CUBIC/BBR starting at these seconds
#                    instead of 0 (Spate still at 10 s): moves the competitor's epochs alone
# LAB names the spate-lab binary (default: this checkout's release build). Summarise the
# output with `matrix.py`.
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
lab="${LAB:-$here/target/release/spate-lab}"
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
files=("$here"/scenarios/tcp/{fair,high}-{cubic,bbr}-*{together,first}.toml)
for u in ${UTCS:-0}; do
for seed in ${SEEDS:--}; do
for join in ${JOINS:--}; do
for tcp in ${TCPAT:--}; do
for f in "${files[@]}"; do
    name="$(basename "$f" .toml)"
    if [ "$join" != - ] || [ "$tcp" != - ]; then
        case "$name" in *tcp-first) ;; *) continue ;; esac
        sed -e "s/^start_s = 10.0$/start_s = ${join/-/10.0}/" \
            -e "s/^start_s = 0.0$/start_s = ${tcp/-/0.0}/" "$f" > "$dir/s.toml"
        f="$dir/s.toml"
    fi
    args=(--utc-start "$u"); [ "$seed" = - ] || args+=(--seed "$seed")
    "$lab" sim "$f" -q --json "${args[@]}" | python3 -c '
import json, sys
f = json.load(sys.stdin)["flows"][0]
share, comp = f["share"], f["competitive_mode_s"]
print(f"{sys.argv[1]:28} u{sys.argv[2]} s{sys.argv[3]} j/t{sys.argv[4]} share {share:.3f} comp {comp:.1f}")
' "$name" "$u" "$seed" "$join$tcp"
done; done; done; done; done
