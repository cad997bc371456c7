#!/usr/bin/env python3
"""Fails when a folder of Sources/Strata uses a type declared in a folder above it.

The layers, lowest first, are listed in LAYERS (docs/ARCHITECTURE.md explains them). A file may use
the types of its own layer and of the layers below it. The layers above them are modules of their
own (StrataOutbox, then StrataQueries), so the compiler keeps them above: a module cannot import one
that depends on it. Comments and string literals are ignored, so
a doc comment may mention a higher layer's symbol.

    python3 scripts/check-layers.py            # exit 1 and one line per use when the order is broken
    python3 scripts/check-layers.py --graph    # print which folder uses which, with counts
"""
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Sources", "Strata")
LAYERS = [
    "Support", "Provenance", "Context", "Loader", "Stores", "Freshness", "Operators",
    "Observability", "HTTP",
]

# Top-level declarations only (a nested `Storage` is its type's own).
DECLARATION = re.compile(
    r"^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|final|open|indirect)\s+)*"
    r"(?:struct|class|enum|protocol|actor|typealias)\s+([A-Z]\w*)", re.MULTILINE)
IDENTIFIER = re.compile(r"\b[A-Z]\w*\b")


def strip(source):
    """The source without comments and string literals (multi-line and raw strings included)."""
    out, i, n = [], 0, len(source)
    while i < n:
        if source.startswith("//", i):
            j = source.find("\n", i)
            i = n if j < 0 else j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif source.startswith('"""', i) or source.startswith('#"""', i):
            hashes = "#" if source[i] == "#" else ""
            start = i + len(hashes) + 3
            j = source.find('"""' + hashes, start)
            i = n if j < 0 else j + 3 + len(hashes)
        elif source[i] == '"' or source.startswith('#"', i):
            hashes = "#" if source[i] == "#" else ""
            j = i + len(hashes) + 1
            while j < n and not (source[j] == '"' and source.startswith(hashes, j + 1)) and source[j] != "\n":
                j += 2 if (source[j] == "\\" and not hashes) else 1
            i = j + 1 + len(hashes)
        else:
            out.append(source[i])
            i += 1
    return "".join(out)


def files():
    for folder, _, names in os.walk(ROOT):
        for name in names:
            if name.endswith(".swift"):
                path = os.path.join(folder, name)
                layer = os.path.relpath(path, ROOT).split(os.sep)[0]
                yield layer, path


def main():
    sources = {path: (layer, strip(open(path, encoding="utf-8").read())) for layer, path in files()}
    unknown = sorted({layer for layer, _ in sources.values()} - set(LAYERS))
    if unknown:
        print(f"error: folders not in LAYERS: {', '.join(unknown)} (add them in their place)")
        return 1
    declared = {}
    for path, (layer, text) in sources.items():
        for name in DECLARATION.findall(text):
            declared.setdefault(name, layer)
    uses = defaultdict(lambda: defaultdict(set))
    for path, (layer, text) in sources.items():
        for name in set(IDENTIFIER.findall(text)):
            owner = declared.get(name)
            if owner and owner != layer:
                uses[(layer, owner)][name].add(os.path.relpath(path, os.path.join(ROOT, "..", "..")))
    if "--graph" in sys.argv:
        for (user, owner), names in sorted(uses.items(), key=lambda kv: (LAYERS.index(kv[0][0]), LAYERS.index(kv[0][1]))):
            arrow = "UP " if LAYERS.index(owner) > LAYERS.index(user) else "   "
            print(f"{arrow}{user} -> {owner}: {', '.join(sorted(names))}")
        return 0
    broken = 0
    for (user, owner), names in sorted(uses.items()):
        if LAYERS.index(owner) > LAYERS.index(user):
            for name, paths in sorted(names.items()):
                for path in sorted(paths):
                    print(f"{path}: uses {name} from {owner}/, a layer above {user}/")
                    broken += 1
    if broken:
        print(f"error: {broken} use(s) against the layer order {' → '.join(LAYERS)}")
        return 1
    print(f"layers ok: {' → '.join(LAYERS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
