#!/usr/bin/env bash
# Install what spate-lab bench-io compares Spate with: iperf3 (kernel TCP) and iproute2 (veth
# pairs between network namespaces). Debian/Ubuntu; run as root. Idempotent.
set -euo pipefail
missing=()
command -v iperf3 >/dev/null || missing+=(iperf3)
command -v ip >/dev/null || missing+=(iproute2)
if ((${#missing[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}"
fi
echo "ready: $(iperf3 --version | head -1); $(ip -V)"
