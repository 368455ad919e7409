#!/bin/bash
# usage: ev.sh LAB scenario shift -> prints for CUBIC-law events the intervals
f=$2; s=$3
t=$(mktemp)
awk -v s="$s" '/^\[\[flow\]\]/ { flows++ } flows == 1 && !moved && /^start_s = / { printf "start_s = %.3f\n", $3 + s; moved = 1; next } { print }' $f > $t.toml
S58_DEBUG=1 $1 sim $t.toml -q --json 2>$t.err >$t.json
share=$(python3 -c "import json; f=json.load(open('$t.json'))['flows'][0]; print(f['share'], f['following_bbr_s'])")
seen=$(grep -m1 BBR-SEEN $t.err | cut -d= -f2)
iv=$(grep EVENT $t.err | grep rb=false | awk '{split($2,a,"="); t=a[2]; if (p!="") printf "%.2f@%.0f ", t-p, t; p=t} END {print ""}')
echo "$(basename $f .toml) $s share=$share seen=$seen :: $iv"
rm -f $t $t.*
