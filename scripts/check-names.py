#!/usr/bin/env python3
"""Fails when an operator's folder, type, guide, test file or suite does not carry its name, or when a
test file is not where what it tests is in Sources/ (docs/ARCHITECTURE.md, "One name per operator").

Which folders are operators. A direct subfolder of one of OPERATOR_PARENTS is an operator's when it
declares a `public func` directly inside an extension of `Loader` (any `where` clause) or of a
`…Loader` type declared outside that folder (`extension HTTPLoader` in HTTP/Revalidated/). Its name
is its method's name capitalised (`retrying(_:)` → `Retrying/`): a folder none of whose methods is
named so is reported, and so is a `public func` on `Loader` in a file directly in one of
OPERATOR_PARENTS (an operator without a folder). `store.loader(key:freshness:)` (an `extension
Store` in Sources/Strata) is checked as the operator STORE_LOADER, method `store.loader`.

What each operator `Name`, method `name`, must have:
- folder `…/Name/`, and in it `T.swift` declaring `T`, the type `name(…)` returns, whose name starts
  with `Name` (`RetryingLoader`, `StaleWhileRevalidatingSource`, `StoreLoader`);
- guide `Name.md` at the top level of its module's catalog, `Sources/<Module>/<Module>.docc/`
  (GUIDE_NAMES: the names DocC forces otherwise), its `# ` title naming the method as declared
  (`retrying(_:)`; a defaulted parameter may be left out, as in `logged()`);
- test file `NameTests.swift` anywhere under Tests/, declaring a type `NameTests` marked
  `@Suite("name(…)")`, the display name starting with the method as declared.
The top level of the catalogs in OPERATOR_CATALOGS holds the module's page and operator guides only.

Tests mirror Sources. Tests/<Module>Tests/<path> holds the tests of Sources/<Module>/<path>; StrataTests
also holds those of the modules above HTTP, in TEST_FOLDERS_OF_MODULES (Outbox/, Queries/). Every
folder of a test target must be a folder of Sources. A test file's subject comes from its name: for
`XTests.swift` or `XSomethingTests.swift`, the longest `X` (cut before a capital, 3 characters or
more) that is a source file (`X.swift`, `X+Feature.swift`) or folder of the module(s) the target
tests; a module's name (`Strata…`) is none. The test belongs in that file's folder, or in that
folder; an operator's folder is flattened into its parent (the tests of `Operators/Guarded/` and of
its files are in Tests/StrataTests/Operators/). A name that names nothing is not checked (such
files may stay at the top of their target); one found in several folders is fine in any of them.
EXCEPTIONS lists test files that may stay where they are, each with its reason.

    python3 scripts/check-names.py          # exit 1 and one line per problem
    python3 scripts/check-names.py --list   # the operators, what each test file tests, the problems; exit 0
"""
import itertools
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
OPERATOR_PARENTS = [
    "Sources/Strata/Operators", "Sources/Strata/Observability", "Sources/Strata/HTTP",
    "Sources/StrataOutbox", "Sources/StrataQueries",
]
STORE_LOADER = "StoreLoader"
# Guides that cannot be `<Name>.md`, and why.
GUIDE_NAMES = {
    "Cached": ("CachedIn", "DocC will not let an article share the name of the `Cached` type"),
    STORE_LOADER: ("StoreLoaders", "DocC will not let an article share the name of the `StoreLoader` type"),
}
# The folder of StrataTests that holds the tests of a module above Strata (those modules are layers
# of their own, docs/ARCHITECTURE.md); other test targets test the module they are named after.
TEST_FOLDERS_OF_MODULES = {"StrataOutbox": "Outbox", "StrataQueries": "Queries"}
# Catalogs whose top level lists the module's page and operator guides only (docs/ARCHITECTURE.md:
# "`ls Sources/Strata/Strata.docc` reads as the list of operators"); other articles are in Articles/.
OPERATOR_CATALOGS = ["Strata"]
# Test files (paths from the repository's root) that may stay where they are, with the reason.
EXCEPTIONS = {
    # "Tests/StrataTests/ExampleTests.swift": "why it may stay where it is",
}

EXTENSION = re.compile(r"^[ \t]*(?:public[ \t]+)?extension[ \t]+([A-Z]\w*)\b[^{]*\{", re.MULTILINE)
PUBLIC_FUNC = re.compile(r"\bpublic\s+(?:(?:nonisolated(?:\(\w+\))?|mutating|consuming|borrowing)\s+)*func\s+(\w+)")
SUITE = re.compile(
    r"@Suite\b\s*(\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\))?\s*"
    r"(?:@\w+(?:\([^)]*\))?\s*)*(?:(?:public|internal|package|fileprivate|private|final)\s+)*"
    r"(?:struct|class|enum|actor)\s+(\w+)")
TOP_LEVEL_TYPE = re.compile(
    r"^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private|final|open)\s+)*"
    r"(?:struct|class|enum|protocol|actor)\s+([A-Z]\w*)", re.MULTILINE)


def _load_check_layers():
    """check-layers.py as a module (its name has a hyphen): its `strip` is the one comment and
    string stripper of both checks."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "check_layers", os.path.join(os.path.dirname(os.path.abspath(__file__)), "check-layers.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


strip = _load_check_layers().strip


def rel(path):
    return os.path.relpath(path, ROOT)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def swift_files(folder):
    for parent, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.endswith(".docc"))
        for name in sorted(names):
            if name.endswith(".swift"):
                yield os.path.join(parent, name)


def declared_types(folder):
    return {name for path in swift_files(folder) for name in TOP_LEVEL_TYPE.findall(strip(read(path)))}


def extension_methods(text):
    """(extended type, method name, declaration) for each `public func` directly inside an extension;
    the declaration is (forms the method may be named by, the type it returns)."""
    for match in EXTENSION.finditer(text):
        depth, start, i = 1, match.end(), match.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        body = text[start:i - 1]
        for func in PUBLIC_FUNC.finditer(body):
            if body.count("{", 0, func.start()) == body.count("}", 0, func.start()):
                yield match.group(1), func.group(1), declaration(func.group(1), body, func.end())


def split_top_level(text):
    """`text` cut at the commas outside brackets (`->` is not a bracket)."""
    parts, depth, current = [], 0, []
    for c in text.replace("->", "\u2192"):
        depth += 1 if c in "([<" else -1 if c in ")]>" else 0
        if c == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
    if "".join(current).strip():
        parts.append("".join(current))
    return parts


def declaration(name, body, i):
    """The forms `name(a:b:)` a declaration may be named by (a defaulted parameter may be left
    out, as in `logged()`), and the name of the type it returns."""
    while i < len(body) and body[i].isspace():
        i += 1
    if body.startswith("<", i):
        depth = 0
        while i < len(body):
            depth += {"<": 1, ">": -1}.get(body[i], 0)
            i += 1
            if depth == 0:
                break
    open_paren = body.find("(", i)
    depth, j = 0, open_paren
    while j < len(body):
        depth += {"(": 1, ")": -1}.get(body[j], 0)
        j += 1
        if depth == 0:
            break
    parameters = []
    for parameter in split_top_level(body[open_paren + 1:j - 1]):
        head = split_top_level(parameter)[0].split(":")[0].split()
        parameters.append((head[0] if head else "_", "=" in parameter))
    forms = set()
    for keep in itertools.product(*[(True, False) if d else (True,) for _, d in parameters]):
        forms.add(name + "(" + "".join(label + ":" for (label, _), k in zip(parameters, keep) if k) + ")")
    rest = body[j:body.find("{", j) if body.find("{", j) >= 0 else len(body)]
    returned = re.search(r"->\s*([A-Z]\w*)", rest)
    return forms, returned.group(1) if returned else None


def capitalised(name):
    return name[:1].upper() + name[1:]


def module_of(path):
    """`Strata` for Sources/Strata/…"""
    return rel(path).split(os.sep)[1]


def catalog(module):
    return os.path.join(ROOT, "Sources", module, module + ".docc")


def find_operators(problems):
    operators = []
    for parent in OPERATOR_PARENTS:
        parent_path = os.path.join(ROOT, parent)
        for name in sorted(os.listdir(parent_path)):
            folder = os.path.join(parent_path, name)
            if name.endswith(".swift"):
                for extended, method, _ in extension_methods(strip(read(folder))):
                    if extended == "Loader":
                        problems.append(("folder", f"{rel(folder)}: declares {method}(…) on Loader outside a folder; "
                                         f"an operator goes in {parent}/{capitalised(method)}/"))
            if not os.path.isdir(folder) or name.endswith(".docc"):
                continue
            own_types = declared_types(folder)
            methods = {}
            for path in swift_files(folder):
                for extended, method, (forms, returned) in extension_methods(strip(read(path))):
                    if extended == "Loader" or (extended.endswith("Loader") and extended not in own_types):
                        entry = methods.setdefault(method, (set(), set()))
                        entry[0].update(forms)
                        entry[1].add(returned)
            if not methods:
                continue
            method = name[:1].lower() + name[1:]
            if method not in methods:
                problems.append(("folder", f"{rel(folder)}/: declares {', '.join(m + '(…)' for m in methods)} on "
                                 f"Loader, none named {method}(…) after the folder"))
                continue
            operators.append({
                "name": name, "method": method, "folder": folder, "actual_folder": folder,
                "module": module_of(folder), "forms": methods[method][0], "returns": methods[method][1],
                "others": [m for m in methods if m != method],
            })
    # store.loader(key:freshness:), checked as an operator named STORE_LOADER.
    for path in swift_files(os.path.join(ROOT, "Sources", "Strata")):
        found = [decl for extended, method, decl in extension_methods(strip(read(path)))
                 if extended == "Store" and method == "loader"]
        if not any("loader(key:freshness:)" in forms for forms, _ in found):
            continue
        folder = os.path.dirname(path)
        expected = folder if os.path.basename(folder) == STORE_LOADER else os.path.join(folder, STORE_LOADER)
        if expected != folder:
            problems.append(("folder", f"{rel(path)}: store.loader(key:freshness:) is declared here; it belongs in "
                             f"a folder of its own, {rel(expected)}/"))
        operators.append({
            "name": STORE_LOADER, "method": "store.loader", "folder": expected, "actual_folder": folder,
            "module": "Strata", "forms": {"store." + form for forms, _ in found for form in forms},
            "returns": {returned for _, returned in found}, "others": [],
        })
        break
    else:
        problems.append(("folder", "Sources/Strata: no `extension Store` declares `public func loader(key:freshness:)`"))
    return operators


def test_files():
    """{test target: [paths]} for every Tests/<Target>Tests/."""
    targets = {}
    tests = os.path.join(ROOT, "Tests")
    for target in sorted(os.listdir(tests)):
        if target.endswith("Tests") and os.path.isdir(os.path.join(tests, target)):
            targets[target] = list(swift_files(os.path.join(tests, target)))
    return targets


def suites(path):
    """[(type name, display name or None)] for each `@Suite` type of a test file."""
    found = []
    for match in SUITE.finditer(read(path)):
        arguments = match.group(1) or ""
        display = re.match(r'\(\s*"((?:[^"\\]|\\.)*)"', arguments)
        found.append((match.group(2), display.group(1) if display else None))
    return found


def named_form(text, method):
    """The first `method(a:b:)` in `text`, or None."""
    match = re.search(r"(?<![\w.])" + re.escape(method) + r"\([\w:]*\)", text)
    return match.group(0) if match else None


def check_operators(operators, all_tests, problems):
    by_file = {}
    for path in all_tests:
        by_file.setdefault(os.path.basename(path), []).append(path)
    every_suite = [(path, t, d) for path in all_tests for t, d in suites(path)]
    rows = []
    for op in operators:
        name, method, forms = op["name"], op["method"], op["forms"]
        folder = op["actual_folder"]
        guide_name = GUIDE_NAMES.get(name, (name, None))[0]
        docc = catalog(op["module"])
        guide = os.path.join(docc, guide_name + ".md")
        title = next((line for line in read(guide).splitlines() if line.startswith("# ")), "") \
            if os.path.isfile(guide) else ""
        titled = named_form(title, method)
        example = titled if titled in forms else max(sorted(forms), key=len)
        row = {"method": example, "folder": rel(op["folder"]) + "/",
               "others": ", ".join(m + "(…)" for m in op["others"])}
        # The type it returns: named after it, in a file of its own name in its folder.
        for returned in sorted(r or "?" for r in op["returns"]):
            type_file = os.path.join(folder, returned + ".swift")
            if not returned.startswith(name):
                problems.append(("folder", f"{rel(folder)}/: {method}(…) returns {returned}; its type's name "
                                 f"should start with {name} ({name}Loader)"))
            elif not os.path.isfile(type_file) or returned not in TOP_LEVEL_TYPE.findall(strip(read(type_file))):
                problems.append(("folder", f"{rel(type_file)}: missing, or declares no {returned} (the type "
                                 f"{method}(…) returns)"))
        # Guide.
        if os.path.isfile(guide):
            row["guide"] = rel(guide)
            if titled not in forms:
                problems.append(("guide", f"{rel(guide)}: its title {title.strip()!r} does not name "
                                 f"{method}(…) as declared (e.g. {example})"))
        else:
            row["guide"] = "-"
            elsewhere = [os.path.join(p, f) for p, _, fs in os.walk(docc) for f in fs if f == guide_name + ".md"]
            where = (f"; it is {rel(elsewhere[0])}, move it to the catalog's top level" if elsewhere
                     else "")
            problems.append(("guide", f"{rel(guide)}: missing, the guide of {example}{where}"))
        # Test file and its suite.
        test_file, suite_name = name + "Tests.swift", name + "Tests"
        paths = by_file.get(test_file, [])
        row["test"], row["suite"] = "-", "-"
        if not paths:
            hints = [f"{rel(p)} ({t} \"{d}\")" for p, t, d in every_suite
                     if t == suite_name or named_form((d or "").split(" ")[0], method)]
            where = f"; suites testing it: {', '.join(hints)}" if hints else "; no suite is named after it"
            problems.append(("test", f"Tests/: no {test_file} for {example}{where}"))
        for path in paths:
            row["test"] = rel(path)
            declared = dict(suites(path))
            if suite_name not in declared:
                plain = suite_name in TOP_LEVEL_TYPE.findall(strip(read(path)))
                why = (f"{suite_name} has no @Suite" if plain else
                       f"its suites: {', '.join(declared)}" if declared else "it has no @Suite")
                problems.append(("suite", f"{rel(path)}: no @Suite type {suite_name} ({why})"))
                continue
            display = declared[suite_name]
            row["suite"] = f'{suite_name} "{display}"' if display is not None else suite_name
            form = named_form((display or "").split(" ")[0], method) if display else None
            if not display or not display.startswith(method + "("):
                problems.append(("suite", f"{rel(path)}: @Suite {suite_name} is named {display!r}; its name "
                                 f"should start with {method}(…) (e.g. \"{example}\")"))
            elif form not in forms:
                problems.append(("suite", f"{rel(path)}: @Suite {suite_name} is named {display!r}; {form} is not "
                                 f"how {method}(…) is declared ({', '.join(sorted(forms, key=len)[-3:])})"))
        rows.append(row)
    return rows


def check_catalog_top_levels(operators, problems):
    guides = {GUIDE_NAMES.get(op["name"], (op["name"], None))[0] + ".md" for op in operators}
    for module in OPERATOR_CATALOGS:
        docc = catalog(module)
        for name in sorted(os.listdir(docc) if os.path.isdir(docc) else []):
            if name.endswith(".md") and name != module + ".md" and name not in guides:
                problems.append(("article", f"{rel(os.path.join(docc, name))}: not an operator's guide; "
                                 f"move it to {rel(os.path.join(docc, 'Articles'))}/"))


def subject_index(modules, operator_folders):
    """{name: [(the test folder, relative to the test target, of what it names; what it names)]}."""
    index = {}
    module_names = set(os.listdir(os.path.join(ROOT, "Sources")))
    for module, prefix in modules:
        base = os.path.join(ROOT, "Sources", module)

        def tests_folder(source_folder):
            while source_folder in operator_folders:
                source_folder = os.path.dirname(source_folder)
            inside = os.path.relpath(source_folder, base)
            return os.path.normpath(os.path.join(prefix, "" if inside == "." else inside)).lstrip(".")

        for parent, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if not d.endswith(".docc"))
            for d in dirs:
                index.setdefault(d, []).append((tests_folder(os.path.join(parent, d)),
                                                rel(os.path.join(parent, d)) + "/"))
            for f in sorted(files):
                if f.endswith(".swift"):
                    stem = f[:-len(".swift")]
                    for name in {stem.replace("+", ""), stem.split("+")[0]} - module_names:
                        index.setdefault(name, []).append((tests_folder(parent), rel(os.path.join(parent, f))))
    return index


def subject(stem, index):
    """The longest prefix of `stem` (cut before a capital, 3 characters or more) the index knows."""
    cuts = [i for i in range(3, len(stem)) if stem[i].isupper()] + [len(stem)]
    for cut in reversed(cuts):
        if stem[:cut] in index:
            return stem[:cut], index[stem[:cut]]
    return None, []


def describe(name, candidates):
    """What a subject names, shortly: its own file or folder first."""
    whats = sorted({w for _, w in candidates},
                   key=lambda w: (os.path.basename(w.rstrip("/")).split(".")[0] != name, w))
    return whats[0] + (f" and {len(whats) - 1} more" if len(whats) > 1 else "")


def check_mirror(targets, operators, problems):
    operator_folders = {op["folder"] for op in operators} | {op["actual_folder"] for op in operators}
    operator_folders -= {os.path.join(ROOT, "Sources", "Strata", "Freshness")}
    sources = os.path.join(ROOT, "Sources")
    rows = []
    for target, paths in targets.items():
        module = target[:-len("Tests")]
        if not os.path.isdir(os.path.join(sources, module)):
            continue
        modules = [(module, "")]
        if module == "Strata":
            modules += list(TEST_FOLDERS_OF_MODULES.items())
        target_path = os.path.join(ROOT, "Tests", target)
        # Every folder of the test target names a folder of Sources.
        for parent, dirs, _ in os.walk(target_path):
            for d in sorted(dirs):
                inside = os.path.relpath(os.path.join(parent, d), target_path)
                top = inside.split(os.sep)[0]
                owner = next((m for m, folder in modules if folder and folder == top), None)
                source = (os.path.normpath(os.path.join(sources, owner, os.path.relpath(inside, top))) if owner
                          else os.path.join(sources, module, inside))
                if not os.path.isdir(source):
                    problems.append(("mirror", f"{rel(os.path.join(parent, d))}/: no folder {rel(source)}/ in Sources"))
        index = subject_index(modules, operator_folders)
        for path in paths:
            file = os.path.basename(path)
            if not file.endswith("Tests.swift"):
                continue
            stem = file[:-len("Tests.swift")]
            actual = os.path.relpath(os.path.dirname(path), target_path)
            actual = "" if actual == "." else actual
            name, candidates = subject(stem, index)
            folders = sorted({folder for folder, _ in candidates})
            ok = not candidates or actual in folders
            what = describe(name, candidates) if candidates else "-"
            rows.append((rel(path), name or "-", what, ok))
            if ok or rel(path) in EXCEPTIONS:
                continue
            where = " or ".join(os.path.join("Tests", target, f) + "/" for f in folders)
            problems.append(("mirror", f"{rel(path)}: tests {name} ({what}); move it to {where}"))
    for path in sorted(EXCEPTIONS):
        if not os.path.isfile(os.path.join(ROOT, path)):
            problems.append(("mirror", f"scripts/check-names.py: EXCEPTIONS names {path}, which does not exist"))
    return rows


KINDS = [
    ("folder", "operator folders and the types they return"),
    ("guide", "guides"),
    ("article", "catalog top levels"),
    ("test", "test files"),
    ("suite", "suites"),
    ("mirror", "Tests/ mirroring Sources/"),
]


def main():
    problems = []
    operators = find_operators(problems)
    targets = test_files()
    all_tests = [p for paths in targets.values() for p in paths]
    rows = check_operators(operators, all_tests, problems)
    check_catalog_top_levels(operators, problems)
    mirror = check_mirror(targets, operators, problems)
    if "--list" in sys.argv:
        columns = ["method", "folder", "guide", "test", "suite"]
        widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}
        print("  ".join(c.ljust(widths[c]) for c in columns).rstrip())
        for row in rows:
            line = "  ".join(row[c].ljust(widths[c]) for c in columns).rstrip()
            print(line + (f"  (its folder also declares {row['others']})" if row["others"] else ""))
        print()
        print("test files and what their names name (!: should move, x: should move but is an exception):")
        for path, name, what, ok in mirror:
            mark = " " if ok else ("x" if path in EXCEPTIONS else "!")
            print(f"{mark} {path}: {name} ({what})")
        print()
        for kind, title in KINDS:
            lines = [message for k, message in problems if k == kind]
            print(f"{title}: {len(lines)} problem(s)")
            for message in lines:
                print(f"  {message}")
        return 0
    for kind, _ in KINDS:
        for k, message in problems:
            if k == kind:
                print(message)
    if problems:
        print(f"error: {len(problems)} name(s) or place(s) against one name per operator and Tests/ mirroring "
              f"Sources/ (docs/ARCHITECTURE.md)")
        return 1
    print(f"names ok: {len(operators)} operators (folder, type, guide, test file, suite); "
          f"{sum(1 for row in mirror if row[1] != '-')} test files beside what they test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
