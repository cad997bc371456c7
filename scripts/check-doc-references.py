#!/usr/bin/env python3
"""Fails when a document names a source file or a test that does not exist.

Reads README.md, CHANGELOG-free docs (docs/*.md, Tools/Examples/*/README.md) and the DocC catalog.
Every `Name.swift` or `Folder/Name.swift` in backticks must be a file of the repository (a path with
a folder must match the end of a real path), and every `SuiteName.testName` / `SuiteName/testName`
in docs/GUARANTEES.md must name a test function of that suite. CHANGELOG.md is history and is not read.

    python3 scripts/check-doc-references.py
"""
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def tracked_files():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line]


def main():
    files = tracked_files()
    swift_files = [f for f in files if f.endswith(".swift")]
    names = {os.path.basename(f) for f in swift_files}
    documents = [f for f in files if f.endswith(".md") and f != "CHANGELOG.md"
                 and (f == "README.md" or f.startswith("docs/") or f.startswith("Sources/")
                      or f.startswith("Tools/Examples/"))]
    reference = re.compile(r"`([A-Za-z0-9_+./-]*[A-Za-z0-9_+-]+\.swift)`")
    problems = []
    for document in documents:
        text = open(os.path.join(ROOT, document), encoding="utf-8").read()
        for match in reference.finditer(text):
            path = match.group(1).lstrip("./")
            if "/" in path:
                if not any(f == path or f.endswith("/" + path) for f in swift_files):
                    problems.append(f"{document}: `{path}` is not a file of the repository")
            elif path not in names:
                problems.append(f"{document}: `{path}` is not a file of the repository")
    # Tests named in GUARANTEES.md as Suite.test: the suite must exist and contain the function.
    guarantees = os.path.join(ROOT, "docs", "GUARANTEES.md")
    if os.path.exists(guarantees):
        sources = {f: open(os.path.join(ROOT, f), encoding="utf-8").read() for f in swift_files if "Tests" in f}
        suites = {}
        for path, text in sources.items():
            for suite in re.findall(r"^(?:@\w+[^\n]*\n)*\s*(?:final class|struct|enum)\s+(\w+)", text, re.MULTILINE):
                suites.setdefault(suite, []).append(text)
        text = open(guarantees, encoding="utf-8").read()
        for suite, test in re.findall(r"`([A-Z]\w*Tests)[./]([a-z]\w*)`", text):
            if test == "swift":  # a file name, `SomethingTests.swift`
                continue
            bodies = suites.get(suite)
            if not bodies:
                problems.append(f"docs/GUARANTEES.md: suite `{suite}` does not exist")
            elif not any(re.search(r"func\s+" + re.escape(test) + r"\b", body) for body in bodies):
                problems.append(f"docs/GUARANTEES.md: `{suite}` has no test `{test}`")
    for problem in problems:
        print(problem)
    if problems:
        print(f"error: {len(problems)} dead reference(s) in the documents")
        return 1
    print(f"doc references ok ({len(documents)} documents)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
