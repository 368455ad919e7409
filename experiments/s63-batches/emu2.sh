#!/bin/bash
# usage: emu2.sh TAG SCENARIO_PATH [env...]
tag=$1; sc=$2; shift 2
out=/tmp/s63/emu/$tag; mkdir -p $out
n=$(basename $sc .toml)
env "$@" ${LAB:-/tmp/s63/lab-x} emu $sc -q --json --out $out > $out/$n.json 2> $out/$n.err
python3 -c "
import json; d=json.load(open('$out/$n.json')); 
print('$tag $n', [f['share'] for f in d['flows']], d['emulator']['lateness_mean_us'])" >> /tmp/s63/emu/results.txt
