#!/usr/bin/env bash
# How much of issue 19's sharing holds by chance: the 16 scenarios of scenarios/tcp (`fair` and
# `high` with `compete = true`, next to CUBIC and BBR, 1×BDP and 4×BDP, together and TCP
# first), each run again with Spate's start shifted by every value of SHIFTS (seconds). A shift
# of a tenth of a second changes nothing a user would choose, but it moves where Spate's
# drains and start-up fall among the competitor's cycles; a result that holds only at the
# filed start is luck. Simulator only; 256 runs by default, about 3 minutes on two cores.
#
# Prints one line per run (scenario, shift, UTC start and seed ("-": as filed), Spate's share
# of the last 30 s, seconds in competitive mode, seconds following BBR), then a Markdown
# summary: per scenario the runs outside the issue's bound (`fair` 40-60 %, `high` 55-75 %)
# and the share's mean, lowest and highest; the totals next to CUBIC and next to BBR; and the
# CUBIC runs in which Spate took CUBIC for BBR.
#
#   SHIFTS="0 0.1 ..."  shifts of Spate's start, s (default 0 to 1.5 in steps of 0.1)
#   UTCS="0 3"          where the drain grid falls (`spate-lab sim --utc-start`; default the
#                       simulator's own, 0.5 s; flows with `compete` drain off the grid today)
#   SEEDS="1 2"         scenario seeds (`--seed`; they move only the BBR model; default as filed)
#   LAB=path            the spate-lab binary (default: build this tree's)
#   JOBS=N              simulations at once (default 2)
#
# Usage: [SHIFTS=...] [UTCS=...] [SEEDS=...] [LAB=path] scripts/tcp-matrix.sh
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "${LAB:-}" ]; then
    cargo build -q --release -p spate-lab --manifest-path "$here/Cargo.toml"
    LAB="$here/target/release/spate-lab"
fi
export LAB
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
shifts="${SHIFTS:-$(seq -s ' ' 0 0.1 1.5)}"

# One job per line: its number, scenario file, shift, UTC start, seed ("-": as filed).
n=0
for utc in ${UTCS:--}; do
    for seed in ${SEEDS:--}; do
        for shift in $shifts; do
            for f in "$here"/scenarios/tcp/{fair,high}-{cubic,bbr}-{1,4}bdp-{together,tcp-first}.toml; do
                n=$((n + 1))
                echo "$n $f $shift $utc $seed"
            done
        done
    done
done > "$dir/jobs"

# Runs job `n`: the scenario with its first flow (Spate's) starting `shift` seconds later;
# its line goes to $dir/line.n, so that parallel jobs cannot interleave their output.
run_one() {
    local n="$1" f="$2" shift="$3" utc="$4" seed="$5"
    local name out
    name="$(basename "$f" .toml)"
    out="$dir/run.$n"
    printf '\r%s' "run $n of $total" >&2
    awk -v s="$shift" '
        /^\[\[flow\]\]/ { flows++ }
        flows == 1 && !moved && /^start_s = / { printf "start_s = %.3f\n", $3 + s; moved = 1; next }
        { print }' "$f" > "$out.toml"
    local args=()
    [ "$utc" = - ] || args+=(--utc-start "$utc")
    [ "$seed" = - ] || args+=(--seed "$seed")
    "$LAB" sim "$out.toml" -q --json "${args[@]}" > "$out"
    python3 - "$out" "$name" "$shift" "$utc" "$seed" <<'PY'
import json, sys
path, name, shift, utc, seed = sys.argv[1:]
flow = json.load(open(path))["flows"][0]
print(f"{name} {shift} {utc} {seed} {flow['share']:.3f} "
      f"{flow['competitive_mode_s'] or 0:.1f} {flow['following_bbr_s'] or 0:.1f}")
PY
    rm -f "$out" "$out.toml"
}
export -f run_one
export dir total="$n"

xargs -P "${JOBS:-2}" -L 1 bash -c 'run_one "$@" > "$dir/line.$1"' _ < "$dir/jobs"
printf '\n' >&2
for i in $(seq 1 "$n"); do cat "$dir/line.$i"; done > "$dir/runs"
echo "scenario shift_s utc_s seed share competing_s following_bbr_s"
cat "$dir/runs"

python3 - "$dir/runs" <<'PY'
import collections, sys
runs = collections.defaultdict(list)
mistaken = 0
for line in open(sys.argv[1]):
    name, _, _, _, share, _, bbr = line.split()
    runs[name].append(float(share))
    mistaken += "-cubic-" in name and float(bbr) > 0
def bound(name):
    return (0.40, 0.60) if name.startswith("fair") else (0.55, 0.75)
def outside(name):
    lo, hi = bound(name)
    return sum(not lo <= s <= hi for s in runs[name])
print()
print("| scenario | bound | runs outside | mean | lowest | highest |")
print("|---|---|---|---|---|---|")
for name in sorted(runs):
    v = runs[name]
    lo, hi = bound(name)
    print(f"| {name} | {lo:.0%}–{hi:.0%} | {outside(name)} of {len(v)} | "
          f"{sum(v) / len(v):.3f} | {min(v):.3f} | {max(v):.3f} |")
print()
for peer in ("cubic", "bbr"):
    names = [n for n in runs if f"-{peer}-" in n]
    total = sum(len(runs[n]) for n in names)
    print(f"next to {peer.upper()}: {sum(outside(n) for n in names)} of {total} runs outside the bound")
print(f"CUBIC runs in which Spate followed BBR's law: {mistaken}")
PY
