#!/usr/bin/env bash
# Spate `fair` joining CUBIC at five start times (10.0-11.2 s) on the 10 and 20 Mbit/s paths of
# ../s58-rhythm/small-bdp (12 paths, 60 runs): Spate's share of the last 30 s per run, and how
# many runs fall above 70 % and below 30 %. Simulator, about 5 s on two cores.
#   LAB=path   the spate-lab binary (default: this tree's release build)
# Usage: [LAB=path] experiments/s59-small-bdp/starts.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
LAB="${LAB:-$here/../../target/release/spate-lab}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
for r in 10 20; do
    for t in 10 20 40; do
        for b in 1 4; do
            for s in 10.0 10.3 10.6 10.9 11.2; do
                sed "0,/start_s = 10.0/s//start_s = $s/" \
                    "$here/../s58-rhythm/small-bdp/fair-cubic-$r-$t-${b}bdp.toml" > "$dir/$r-$t-$b-$s.toml"
            done
        done
    done
done
ls "$dir"/*.toml | xargs -P2 -I{} sh -c '"$0" sim {} -q --json > {}.json' "$LAB"
python3 - "$dir" <<'PY'
import glob, json, os, sys
rows = {}
for f in sorted(glob.glob(sys.argv[1] + "/*.toml")):
    r, t, b, _ = os.path.basename(f)[:-5].split("-")
    rows.setdefault((int(r), int(t), b), []).append(json.load(open(f + ".json"))["flows"][0]["share"])
above = below = 0
for (r, t, b), v in sorted(rows.items()):
    print(f"{r} Mbit/s, {t} ms, {b}xBDP: " + " ".join(f"{x:.2f}" for x in v))
    above += sum(x > 0.7 for x in v)
    below += sum(x < 0.3 for x in v)
print(f"above 70 %: {above} of {5 * len(rows)}; below 30 %: {below}")
PY
