#!/usr/bin/env bash
# How much of issue 19's sharing holds by chance: the 16 scenarios of scenarios/tcp (`fair` and
# `high` with `compete = true`, next to CUBIC and BBR, 1×BDP and 4×BDP, together and TCP
# first), each run again with Spate's start shifted by every value of SHIFTS (seconds). A shift
# of a tenth of a second changes nothing a user would choose, but it moves where Spate's
# drains and start-up fall among the competitor's cycles; a result that holds only at the
# filed start is luck. Simulator only; 256 runs by default, about 1.5 minutes on two cores.
#
# Prints one line per run (scenario, shift, UTC start and seed ("-": as filed), Spate's share
# of the last 30 s, seconds in competitive mode, seconds following BBR), then a Markdown
# summary: per scenario the runs outside the issue's bound (`fair` 40-60 %, `high` 55-75 %)
# and the share's mean, lowest and highest; the totals next to CUBIC and next to BBR, with how
# many lie above the bound and how many below; and the CUBIC runs in which Spate took CUBIC
# for BBR.
#
#   SHIFTS="0 0.1 ..."  shifts of Spate's start, s (default 0 to 1.5 in steps of 0.1)
#   UTCS="0 3"          where the drain grid falls (`spate-lab sim --utc-start`; default the
#                       simulator's own, 0.5 s; flows with `compete` confirm a competitor
#                       at the grid, so their results move with it)
#   SEEDS="1 2"         scenario seeds (`--seed`; they move only the BBR model; default as filed)
#   BATCH=N             Spate sends N datagrams at once, as the real driver's UDP GSO does
#                       (the scenario key `batch`; default 1, each paced on its own)
#   POINTS="a b"        only these scenarios of scenarios/tcp, by name (default all 16; e.g.
#                       "high-cubic-1bdp-together high-cubic-1bdp-tcp-first": the 32 runs of
#                       tests/tcp.rs's `high_holds_its_share_..._at_every_start`)
#   LAB=path            the spate-lab binary (default: build this tree's)
#   JOBS=N              simulations at once (default 2)
#
# Usage: [SHIFTS=...] [UTCS=...] [SEEDS=...] [POINTS=...] [LAB=path] scripts/tcp-matrix.sh
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
                case " ${POINTS:-$(basename "$f" .toml)} " in
                *" $(basename "$f" .toml) "*) ;;
                *) continue ;;
                esac
                n=$((n + 1))
                echo "$n $f $shift $utc $seed"
            done
        done
    done
done > "$dir/jobs"

# Runs job `n`: the scenario with its first flow (Spate's) starting `shift` seconds later;
# its report goes to $dir/run.n.json.
run_one() {
    local n="$1" f="$2" shift="$3" utc="$4" seed="$5"
    printf '\r%s' "run $n of $total" >&2
    awk -v s="$shift" -v b="${BATCH:-1}" '
        /^\[\[flow\]\]/ { flows++ }
        flows == 1 && !moved && /^start_s = / { printf "start_s = %.3f\n", $3 + s; moved = 1; next }
        flows == 1 && b > 1 && /^protocol = "spate"/ { print; printf "batch = %d\n", b; next }
        { print }' "$f" > "$dir/run.$n.toml"
    local args=()
    [ "$utc" = - ] || args+=(--utc-start "$utc")
    [ "$seed" = - ] || args+=(--seed "$seed")
    "$LAB" sim "$dir/run.$n.toml" -q --json "${args[@]}" > "$dir/run.$n.json"
}
export -f run_one
export dir total="$n"

xargs -P "${JOBS:-2}" -L 1 bash -c 'run_one "$@"' _ < "$dir/jobs"
printf '\n' >&2

python3 - "$dir" <<'PY'
import collections, json, os, sys
d = sys.argv[1]
runs = collections.defaultdict(list)
mistaken = 0
print("scenario shift_s utc_s seed share competing_s following_bbr_s")
for job in open(os.path.join(d, "jobs")):
    n, path, shift, utc, seed = job.split()
    flow = json.load(open(os.path.join(d, f"run.{n}.json")))["flows"][0]
    name = os.path.basename(path)[: -len(".toml")]
    share, bbr = flow["share"], flow["following_bbr_s"] or 0
    print(f"{name} {shift} {utc} {seed} {share:.3f} "
          f"{flow['competitive_mode_s'] or 0:.1f} {bbr:.1f}")
    runs[name].append(float(f"{share:.3f}"))  # as printed
    mistaken += "-cubic-" in name and bbr > 0
def bound(name):
    return (0.40, 0.60) if name.startswith("fair") else (0.55, 0.75)
def outside(name):
    lo, hi = bound(name)
    return sum(not lo <= s <= hi for s in runs[name])
def above(name):
    return sum(s > bound(name)[1] for s in runs[name])
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
    out, up = sum(outside(n) for n in names), sum(above(n) for n in names)
    print(f"next to {peer.upper()}: {out} of {total} runs outside the bound "
          f"({up} above it, {out - up} below)")
print(f"CUBIC runs in which Spate followed BBR's law: {mistaken}")
PY
