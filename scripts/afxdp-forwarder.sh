#!/usr/bin/env bash
# Issue 17, docs/lab.md ("Why TUN without offloads"): measure an AF_XDP forwarder between two
# network namespaces, the candidate the lab's choice of forwarder had not measured.
#
# Three namespaces: sxa (10.77.0.1) and sxb (10.77.0.2) joined through sxf, where
# lab/afxdp/spate-xsk-fwd forwards every frame between veth a1 and b1 through AF_XDP sockets
# (native XDP on veth, copy mode; generic mode if native is refused). Offloads are off on every
# veth, so that each 1500-byte packet is seen, as the lab's TUN forwarder sees them. Then iperf3
# UDP at fixed rates (1448-byte datagrams) and one TCP CUBIC flow, 5 s each, print what
# arrived, the loss, and the forwarder's CPU in % of a core per Gbit/s.
# Needs root, gcc, iperf3 and libxdp (scripts/lab-setup.sh installs them). About a minute.
# Usage: sudo scripts/afxdp-forwarder.sh [RATES...]   (default: 0.5G 1G 2G 4G)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
if [ "$(id -u)" != 0 ]; then
    echo "needs root (network namespaces and XDP): run it with sudo" >&2
    exit 2
fi
for tool in gcc iperf3; do
    command -v "$tool" > /dev/null || {
        echo "$tool is missing: run scripts/lab-setup.sh first" >&2
        exit 2
    }
done
[ -f /usr/include/xdp/xsk.h ] || {
    echo "libxdp-dev is missing: run scripts/lab-setup.sh first" >&2
    exit 2
}
rates=("$@")
[ ${#rates[@]} -gt 0 ] || rates=(0.5G 1G 2G 4G)
work="$(mktemp -d)"
fwd="$work/spate-xsk-fwd"
gcc -O2 -Wall -o "$fwd" "$here/lab/afxdp/spate-xsk-fwd.c" -lxdp -lbpf

remove_namespaces() { for ns in sxa sxb sxf; do ip netns del "$ns" 2> /dev/null || true; done; }
trap 'remove_namespaces; rm -rf "$work"' EXIT
remove_namespaces
for ns in sxa sxb sxf; do
    ip netns add "$ns"
    ip -n "$ns" link set lo up
done
ip link add a0 netns sxa type veth peer name a1 netns sxf
ip link add b0 netns sxb type veth peer name b1 netns sxf
ip -n sxa addr add 10.77.0.1/24 dev a0
ip -n sxb addr add 10.77.0.2/24 dev b0
for pair in sxa:a0 sxf:a1 sxb:b0 sxf:b1; do
    ns="${pair%%:*}" dev="${pair#*:}"
    ip netns exec "$ns" ethtool -K "$dev" tso off gso off gro off tx off rx off > /dev/null 2>&1 ||
        echo "note: could not turn every offload off on $dev" >&2
    ip -n "$ns" link set "$dev" up
done

# One measurement: forwarder started, then iperf3 (client arguments in "$@"); prints a line.
measure() {
    local label="$1"
    shift
    ip netns exec sxf "$fwd" a1 b1 8 > "$work/fwd.json" 2> "$work/fwd.err" &
    local fpid=$!
    sleep 1
    ip netns exec sxb iperf3 -s -1 > /dev/null 2>&1 &
    local spid=$!
    sleep 0.5
    ip netns exec sxa timeout 20 iperf3 -c 10.77.0.2 -t 5 --json "$@" > "$work/iperf.json" || true
    wait "$spid" 2> /dev/null || true
    wait "$fpid" || { cat "$work/fwd.err" >&2; return 1; }
    python3 - "$label" "$work/iperf.json" "$work/fwd.json" << 'EOF'
import json, sys
label, ipf, fwd = sys.argv[1:]
f = json.load(open(fwd))
try:
    end = json.load(open(ipf))["end"]
except (ValueError, KeyError):
    print(f"| {label} | iperf3 did not finish | | | |")
    sys.exit()
s = end.get("sum", {})
if "lost_percent" in s:  # UDP: what the receiver got
    got = s["bits_per_second"] * (1 - s["lost_percent"] / 100) / 1e9
    loss = f'{s["lost_percent"]:.2f} %'
else:  # TCP
    got = end["sum_received"]["bits_per_second"] / 1e9
    loss = "-"
fwd_gbit = (f["a_to_b_bytes"] + f["b_to_a_bytes"]) * 8 / 1e9
cpu = f["cpu_s"] / fwd_gbit * 100 if fwd_gbit else float("nan")
print(f"| {label} | {got:.2f} | {loss} | {cpu:.1f} | {f['mode']} |")
EOF
}

echo "| test | arrived Gbit/s | loss | forwarder CPU, % of a core per Gbit/s | XDP mode |"
echo "|---|---|---|---|---|"
for r in "${rates[@]}"; do
    measure "UDP at $r (1448-byte datagrams)" -u -b "$r" -l 1448
done
measure "TCP CUBIC, one flow" -C cubic
