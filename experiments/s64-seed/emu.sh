#!/bin/bash
# usage: emu.sh TAG SCENARIO [env assignments...]
tag=$1; sc=$2; shift 2
out=/tmp/s64/emu/$tag; mkdir -p $out
env "$@" ${LAB:-/tmp/s64/lab-a} emu scenarios/tcp/$sc.toml -q --json --out $out > $out/$sc.json 2> $out/$sc.err
python3 -c "
import json; d=json.load(open('$out/$sc.json')); f=d['flows'][0]
print('$tag $sc', f['share'], f.get('competitive_mode_s'), f.get('following_bbr_s'), d['emulator']['lateness_mean_us'])" >> /tmp/s64/emu/results.txt
