#!/usr/bin/env python3
"""Module cycles in a Rust crate: two modules, neither inside the other,
that each name the other (through `crate::` or `super::` paths, outside
comments and `mod tests`), directly or through their ancestors below a
common parent. A text scan, not a compiler: it sees paths, not
resolution, so a path through a re-export counts for the re-exporter.

Usage: module_cycles.py SRC_DIR...   (exit status 1 if any cycle)
"""
import os
import re
import sys
from collections import defaultdict

PATH = re.compile(r"\b((?:crate|super)(?:::(?:super|self|\w+))+)")


def modules(root):
    """Module path (tuple) -> file, for every .rs file under root."""
    found = {}
    for directory, _, files in os.walk(root):
        for name in files:
            if name.endswith(".rs"):
                path = os.path.join(directory, name)
                parts = os.path.relpath(path, root)[:-3].split(os.sep)
                if parts[-1] in ("mod", "lib", "main"):
                    parts = parts[:-1]
                found[tuple(parts)] = path
    return found


def edges(root):
    mods = modules(root)
    named = defaultdict(set)
    for module, path in mods.items():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        text = re.sub(r"^\s*//.*$", "", text, flags=re.M)
        text = re.sub(r"#\[cfg\(test\)\]\s*mod tests\s*\{.*", "", text, flags=re.S)
        for match in PATH.finditer(text):
            parts = match.group(1).split("::")
            if parts[0] == "crate":
                base, parts = [], parts[1:]
            else:
                base = list(module)
                while parts and parts[0] == "super":
                    base, parts = base[:-1], parts[1:]
            full = base + [p for p in parts if p != "self"]
            target = next(
                (tuple(full[:n]) for n in range(len(full), 0, -1) if tuple(full[:n]) in mods),
                None,
            )
            if target is None or "tests" in module or "tests" in target:
                continue
            # Below their common parent: the two siblings that contain them.
            i = 0
            while i < min(len(module), len(target)) and module[i] == target[i]:
                i += 1
            if i < len(module) and i < len(target):
                named[module[: i + 1]].add(target[: i + 1])
    return named


def main():
    cycles = []
    for root in sys.argv[1:]:
        named = edges(root)
        for a in named:
            for b in named[a]:
                if a < b and a in named.get(b, ()):
                    cycles.append(f"{root}: {'/'.join(a)} <-> {'/'.join(b)}")
    for cycle in cycles:
        print(f"module cycle: {cycle}")
    if not cycles:
        print(f"no module cycle in {', '.join(sys.argv[1:])}")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
