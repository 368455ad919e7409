#!/usr/bin/env bash
# Reproduce docs/results/lab/: calibration, the head-to-head paths, the research's handover
# scenarios with every tool, and the simulator-vs-emulator comparison. Needs root and
# scripts/lab-setup.sh; takes about 90 minutes (every run is real time). OUT overrides the
# directory; TOOLS the tool list; CALIBRATE=0 keeps the calibration table as it is (it measures
# the emulator, not Spate: re-run it when crates/spate-lab/src/emu or spate-netmodel change).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
out="${OUT:-$here/docs/results/lab}"
tools="${TOOLS:-spate,cubic,bbr,gridftp,gridftp-bbr,udt}"
lab="$here/target/release/spate-lab"
cargo build --release -p spate-lab --manifest-path "$here/Cargo.toml"
mkdir -p "$out/runs"
# Against Rattan too where it is installed (scripts/lab-setup.sh installs it).
rattan=()
command -v rattan >/dev/null && rattan=(--rattan)
if [ "${CALIBRATE:-1}" != 0 ]; then
    "$lab" calibrate "${rattan[@]}" --markdown "$out/calibration.md" || echo "calibration: a check was outside its tolerance (see $out/calibration.md)"
fi
for s in emu/pipe12 emu/lossy-250; do
    "$lab" emu "$here/scenarios/$s.toml" --protocols "$tools" --out "$out/runs" -q
done
# 10 Gbit/s phases run at a tenth of their rate; paths that peak at 1 Gbit/s at full rate.
for s in fasp/scenario-1 fasp/scenario-2 rlnc/test-A1 rlnc/test-B1 rlnc/test-A2 rlnc/test-B2; do
    "$lab" emu "$here/scenarios/$s.toml" --scale 0.1 --protocols "$tools" --out "$out/runs" -q
done
for s in fasp/scenario-3 rlnc/test-C1 rlnc/test-C2; do
    "$lab" emu "$here/scenarios/$s.toml" --protocols "$tools" --out "$out/runs" -q
done
"$lab" report "$out/runs" > "$out/table.md"
: > "$out/fidelity.md"
for s in fasp/scenario-1 fasp/scenario-2; do
    "$lab" compare "$here/scenarios/$s.toml" --scale 0.1 -q --plot "$out/fidelity-$(basename "$s").svg" >> "$out/fidelity.md" || true
    echo >> "$out/fidelity.md"
done
"$lab" compare "$here/scenarios/fasp/scenario-3.toml" -q --plot "$out/fidelity-scenario-3.svg" >> "$out/fidelity.md" || true
echo "written: $out"
