#!/usr/bin/env bash
# Every run file of this directory. MAIN is a release spate-lab of main (06e57d9), SCRATCH one
# with compete-grid.patch applied; the patch's variants are switched by SPATE_* variables
# (README). About 40 minutes on two cores. Writes into OUT (default: this directory).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-$here}"
grid="$here/../s51-drain-grid/spate-grid.sh"
: "${MAIN:?a release spate-lab of main}" "${SCRATCH:?a release spate-lab with compete-grid.patch}"
aligned="SPATE_G1=1 SPATE_NOMIN=1 SPATE_AGEKEEP=1 SPATE_NOSTALE=1 SPATE_ANY=1 SPATE_WAITG=1"
declare -A variant=(
    [offgrid]="MAIN"
    [ongrid]="SCRATCH SPATE_G1=1 SPATE_LATE=1000000"
    [punctual]="SCRATCH SPATE_G1=1"
    [twice]="SCRATCH SPATE_G1=1 SPATE_DTC=2"
    [stretched]="SCRATCH SPATE_G1=1 SPATE_JS=1"
    [aligned]="SCRATCH $aligned SPATE_JS=1"
    [aligned-main-margins]="SCRATCH $aligned SPATE_KEEPM=1"
    [aligned-nocg]="SCRATCH $aligned SPATE_JS=1 SPATE_NOCG=1"
)
run() { # run VARIANT COMMAND...: the command with the variant's binary and switches
    local v=(${variant[$1]}); shift
    local bin="${!v[0]}"
    env LAB="$bin" "${v[@]:1}" "$@"
}
for v in offgrid ongrid punctual twice stretched aligned aligned-main-margins; do
    for u in 0 4; do
        run "$v" UTC=$u "$grid" > "$out/spate-$v-u$u.txt" &
    done
    wait
done
run aligned-nocg UTC=0 "$grid" > "$out/spate-aligned-nocg-u0.txt"
run offgrid SEEDS="2 3 4 5" "$here/matrix.sh" > "$out/tcp-offgrid-seeds.txt" &
run offgrid UTCS="0 4" "$here/matrix.sh" > "$out/tcp-offgrid-utc.txt"
wait
for v in offgrid punctual stretched aligned aligned-main-margins; do
    [ "$v" = offgrid ] || run "$v" UTCS="0 4" "$here/matrix.sh" > "$out/tcp-$v-utc.txt" &
    run "$v" JOINS="10.0 11.3 12.6 13.9" "$here/matrix.sh" > "$out/tcp-$v-joins.txt" &
    run "$v" TCPAT="0.0 0.7 1.4 2.1" "$here/matrix.sh" > "$out/tcp-$v-tcpat.txt"
    wait
done
run aligned-nocg JOINS="10.0 11.3 12.6 13.9" "$here/matrix.sh" > "$out/tcp-aligned-nocg-joins.txt" &
run aligned-nocg TCPAT="0.0 0.7 1.4 2.1" "$here/matrix.sh" > "$out/tcp-aligned-nocg-tcpat.txt"
wait
