#!/usr/bin/env bash
# Install what spate-lab bench-io compares Spate with — iperf3 (kernel TCP), iproute2 (veth
# pairs between network namespaces) — and what the tests that need root use: OpenSSH's sshd and
# ssh (tests/e2e_ssh.rs starts a private sshd on loopback) and nftables (a blocked UDP port).
# Debian/Ubuntu; run as root. Idempotent.
set -euo pipefail
missing=()
command -v iperf3 >/dev/null || missing+=(iperf3)
command -v ip >/dev/null || missing+=(iproute2)
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v ssh >/dev/null || missing+=(openssh-client)
command -v nft >/dev/null || missing+=(nftables)
if ((${#missing[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}"
fi
echo "ready: $(iperf3 --version | head -1); $(ip -V); $(ssh -V 2>&1); $(nft --version)"
