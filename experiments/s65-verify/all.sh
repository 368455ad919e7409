#!/bin/bash
# The three simulator measurements of a scratch build: the Spate-only grid (every flow with
# compete), tcp-robustness.sh for fair and high next to CUBIC and BBR, and tcp-matrix.sh.
# Usage: experiments/s65-verify/all.sh TAG LAB "SWITCHES"  (writes TAG-*.txt into OUT, default .)
# e.g.   all.sh vn2 /tmp/lab "S65_VN=2 S65_VCAP=1 S65_CAPMEM=1 S65_VERIFY=1 S65_G2=1 S61_G1=1 S61_ANY=1"
set -euo pipefail
tag=$1; lab=$2; v=${3:-}
here="$(cd "$(dirname "$0")" && pwd)"; root="$here/../.."
out="${OUT:-.}"
# shellcheck disable=SC2086
env $v UTC=0 LAB="$lab" "$root/experiments/s51-drain-grid/spate-grid.sh" > "$out/$tag-grid.txt" 2>&1 &
for a in cubic bbr; do for k in "fair 40 60" "high 55 75"; do
    # shellcheck disable=SC2086
    echo "$a $k: $(env $v AGAINST=$a LAB="$lab" "$root/scripts/tcp-robustness.sh" $k 2>&1 | tail -1)"
done; done > "$out/$tag-rob.txt"
# shellcheck disable=SC2086
env $v LAB="$lab" "$root/scripts/tcp-matrix.sh" 2>/dev/null > "$out/$tag-m.txt"
wait
{
    python3 "$here/gsum.py" "$out/$tag-grid.txt"
    cat "$out/$tag-rob.txt"
    tail -3 "$out/$tag-m.txt"
    grep "^| fair\|^| high" "$out/$tag-m.txt" | awk -F'|' '{split($4,a," "); if ($2 ~ /fair/) f+=a[1]; else h+=a[1]}
        END {print "matrix fair outside", f, "high outside", h}'
} > "$out/$tag-sum.txt"
cat "$out/$tag-sum.txt"
