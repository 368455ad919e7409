#!/usr/bin/env bash
# The data path's claims, measured with the real `spate` command on loopback (issue 18):
#  1. the first packet leaves at once, whatever the file's size, and each byte is read once:
#     `spate send` of a SIZE file (default 4G) on tmpfs to `spate serve --discard`;
#  2. a receiver whose disk is slower than the sender's rate slows the sender down instead of
#     losing its packets: a sender fixed at 1.6 Gbit/s into `spate serve --write-rate 400M`,
#     200 MiB (more than three times the 64 MiB the receiver queues).
# Prints one line per run, from the sender's --json report. Needs about SIZE + 200 MiB in
# TMPDIR (default /dev/shm); no root. Takes about 20 s.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
size="${SIZE:-4G}"
tmp="$(mktemp -d "${TMPDIR:-/dev/shm}/spate-data-path.XXXXXX")"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
cargo build -q --release -p spate --manifest-path "$here/Cargo.toml"
spate="$here/target/release/spate"
export XDG_CONFIG_HOME="$tmp/config"
"$spate" keygen --comment data-path >/dev/null 2>&1
cp "$XDG_CONFIG_HOME/spate/id_x25519.pub" "$XDG_CONFIG_HOME/spate/authorized_keys"
mkdir -p "$tmp/root"
port=$((20000 + RANDOM % 20000))

# Start `spate serve` with "$@" and wait until it listens.
serve() {
    "$spate" serve --listen "127.0.0.1:$port" --root "$tmp/root" "$@" >/dev/null 2>&1 &
    sleep 0.5
}
# One field of a JSON report on stdin.
field() { python3 -c "import json,sys; print(json.load(sys.stdin).get('$1'))"; }

head -c "$(numfmt --from=iec "$size")" /dev/zero >"$tmp/big.bin"
serve --discard
report="$("$spate" send --json --policy fixed --rate 8G "$tmp/big.bin" "127.0.0.1:$port:")"
kill %1 && wait %1 2>/dev/null || true
echo "1. $size file: first file byte $(echo "$report" | field first_data_s) s after start;" \
    "read $(echo "$report" | field file_bytes_read) bytes of $(stat -c %s "$tmp/big.bin");" \
    "$(echo "$report" | field duration_s) s in all"

rm -f "$tmp/big.bin"
head -c $((200 << 20)) /dev/urandom >"$tmp/mid.bin"
serve --write-rate 400M
report="$("$spate" send --json --policy fixed --rate 1600M "$tmp/mid.bin" "127.0.0.1:$port:")"
kill %1 && wait %1 2>/dev/null || true
cmp -s "$tmp/mid.bin" "$tmp/root/mid.bin" && same=identical || same=DIFFERENT
echo "2. 200 MiB at 1.6 Gbit/s into --write-rate 400M: $(echo "$report" | field retransmitted_packets)" \
    "of $(echo "$report" | field data_packets_sent) packets sent twice;" \
    "$(echo "$report" | field duration_s) s; waited $(echo "$report" | field receiver_disk_wait_s) s" \
    "for the receiver's disk; copy $same"
