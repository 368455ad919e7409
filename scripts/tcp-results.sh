#!/usr/bin/env bash
# Reproduce docs/results/tcp/ (issue 19): Spate sharing 100 Mbit/s, 50 ms with kernel CUBIC
# and BBR in the real-time emulator (the scenarios/tcp matrix, 24 runs of 60 s, and 3 runs
# next to CUBIC with random loss), the TCP models' validation paths in the emulator (kernel)
# and the simulator (model), and the matrix in the simulator. Needs root and
# scripts/lab-setup.sh; about 35 minutes.
# OUT overrides the directory; ONLY=pattern limits the emulator runs (e.g. ONLY=fair-cubic).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
out="${OUT:-$here/docs/results/tcp}"
lab="$here/target/release/spate-lab"
cargo build --release -p spate-lab --manifest-path "$here/Cargo.toml"
mkdir -p "$out/emu" "$out/sim"
# The simulator first (seconds): the models' validation paths and the matrix.
: > "$out/sim.md"
for f in "$here"/scenarios/tcp/validate-*.toml "$here"/scenarios/tcp/{fair,high,low}-{cubic,bbr}-*.toml; do
    name="$(basename "$f" .toml)"
    "$lab" sim "$f" -q --json > "$out/sim/$name.json"
    case "$name" in fair-*|high-*) "$lab" sim "$f" -q --plot "$out/sim/$name.svg" > /dev/null ;; esac
    { echo "### $name"; echo; echo '```'; "$lab" sim "$f" -q; echo '```'; echo; } >> "$out/sim.md"
done
for f in "$here"/scenarios/tcp/validate-*.toml "$here"/scenarios/tcp/{fair,high,low}-{cubic,bbr}-*.toml; do
    name="$(basename "$f" .toml)"
    case "$name" in *"${ONLY:-}"*) ;; *) continue ;; esac
    "$lab" emu "$f" -q --out "$out/emu"
done
"$lab" report "$out/emu" > "$out/emu.md"
echo "written: $out"
