#!/usr/bin/env python3
"""Copy scenario files, giving every Spate flow that may compete (`fair` or `high`, the
default policy `fair`) `compete = true`: what `--compete` by default would run.

Usage: compete-everywhere.py OUT_DIR FILE_OR_DIR...   (writes OUT_DIR/<folder>-<name>.toml)
"""
import pathlib
import sys
import tomllib

out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
files = []
for arg in sys.argv[2:]:
    p = pathlib.Path(arg)
    files += sorted(p.glob("*.toml")) if p.is_dir() else [p]
for f in files:
    text = f.read_text()
    flows = tomllib.loads(text).get("flow", [])
    lines, i = [], 0
    for line in text.splitlines():
        lines.append(line)
        if line.strip() == "[[flow]]":
            fl = flows[i]
            i += 1
            spate = fl.get("protocol", "spate") == "spate"
            if spate and fl.get("policy", "fair") in ("fair", "high") and "compete" not in fl:
                lines.append("compete = true")
    (out / f"{f.parent.name}-{f.name}").write_text("\n".join(lines) + "\n")
print(f"{len(files)} files into {out}")
