#!/usr/bin/env bash
# Install what the lab compares Spate with and what the tests that need root use. Debian/Ubuntu;
# run as root. Idempotent.
#
#   iperf3                  kernel TCP (CUBIC, BBR, Reno) in spate-lab bench-io and emu
#   iproute2                network namespaces, veth pairs, TUN devices
#   globus-gass-copy-progs  GridFTP client (globus-url-copy -p 8) for spate-lab emu
#   globus-gridftp-server-progs   GridFTP server
#   libudt-dev, g++         UDT4; this script builds lab/udt/spate-udt.cpp into /usr/local/bin
#   gcc                     lab/tcpcc/spate-tcp-cc.c into /usr/local/lib: sets BBR on GridFTP's
#                           sockets for spate-lab emu's gridftp-bbr (GridFTP has no option)
#   openssh-server/client   tests/e2e_ssh.rs starts a private sshd on loopback
#   nftables                a blocked UDP port in the ssh tests
#   libxdp-dev, libbpf-dev, gcc, ethtool   scripts/afxdp-forwarder.sh builds an AF_XDP
#                           forwarder (lab/afxdp) to compare with the lab's TUN forwarder
#   rattan 0.1.1            an emulator nobody here wrote: spate-lab calibrate --rattan
#                           compares the lab's emulator with it (a cargo build, 5-15 min once)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
missing=()
command -v iperf3 >/dev/null || missing+=(iperf3)
command -v ip >/dev/null || missing+=(iproute2)
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v ssh >/dev/null || missing+=(openssh-client)
command -v nft >/dev/null || missing+=(nftables)
command -v globus-url-copy >/dev/null || missing+=(globus-gass-copy-progs)
[ -x /usr/sbin/globus-gridftp-server ] || missing+=(globus-gridftp-server-progs)
[ -e /usr/include/udt/udt.h ] || missing+=(libudt-dev)
command -v g++ >/dev/null || missing+=(g++)
command -v gcc >/dev/null || missing+=(gcc)
command -v ethtool >/dev/null || missing+=(ethtool)
[ -e /usr/include/xdp/xsk.h ] || missing+=(libxdp-dev)
[ -e /usr/include/bpf/libbpf.h ] || missing+=(libbpf-dev)
if ((${#missing[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}"
fi
udt=/usr/local/bin/spate-udt
if [ ! -x "$udt" ] || [ "$here/lab/udt/spate-udt.cpp" -nt "$udt" ]; then
    g++ -O2 -o "$udt" "$here/lab/udt/spate-udt.cpp" -ludt -lpthread
fi
tcpcc=/usr/local/lib/spate-tcp-cc.so
if [ ! -f "$tcpcc" ] || [ "$here/lab/tcpcc/spate-tcp-cc.c" -nt "$tcpcc" ]; then
    gcc -O2 -Wall -shared -fPIC -o "$tcpcc" "$here/lab/tcpcc/spate-tcp-cc.c" -ldl
fi
modprobe tcp_bbr 2>/dev/null || true
if ! command -v rattan >/dev/null; then
    # Under sudo, root's PATH may not hold the invoking user's rustup cargo.
    cargo="$(command -v cargo || true)"
    if [ -z "$cargo" ] && [ -n "${SUDO_USER:-}" ]; then
        home="$(getent passwd "$SUDO_USER" | cut -d: -f6)"
        [ -x "$home/.cargo/bin/cargo" ] && cargo="$home/.cargo/bin/cargo"
    fi
    if [ -n "$cargo" ]; then
        "$cargo" install --locked rattan --version 0.1.1 --root /usr/local
    else
        echo "note: Rattan not installed (no cargo for root); spate-lab calibrate --rattan needs it:" >&2
        echo "      cargo install --locked rattan --version 0.1.1 --root /usr/local" >&2
    fi
fi
modprobe tun 2>/dev/null || true
echo "ready: $(iperf3 --version | head -1); $(ip -V); $(ssh -V 2>&1); $(nft --version);" \
    "$(globus-url-copy -version 2>&1 | head -1); spate-udt at $udt; spate-tcp-cc at $tcpcc; $(rattan --version 2>/dev/null | head -1 || echo 'no rattan')"
