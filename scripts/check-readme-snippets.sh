#!/usr/bin/env bash
# Compiles the README's Swift snippets the way an app would use them: in a throwaway package, outside
# this repository, that depends on this checkout by path and uses the `Strata` product only.
#
#   bash scripts/check-readme-snippets.sh [README]     README.md by default
#
# Each ```swift block becomes the body of a function of its own (so two blocks may use one name), in
# an executable target with the few names the README leaves to the reader (`FeedItem`,
# `cachesDirectory`, `feedURL`) and a bundled `default_feed.json`. A block that is manifest code
# (it starts with `.package(`) is checked by scripts/consumer-graph.sh instead. Exits non-zero with
# the compiler's errors when a snippet does not build.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readme="${1:-$root/README.md}"
app="$(mktemp -d)"
trap 'rm -rf "$app"' EXIT
export SWIFT_DETERMINISTIC_HASHING=1

mkdir -p "$app/Sources/Snippets/Resources"
cat > "$app/Package.swift" <<MANIFEST
// swift-tools-version: 6.2
import PackageDescription
let package = Package(
    name: "Snippets",
    platforms: [.macOS(.v13), .iOS(.v16)],
    dependencies: [.package(name: "Strata", path: "$root")],
    targets: [
        .executableTarget(
            name: "Snippets", dependencies: [.product(name: "Strata", package: "Strata")],
            resources: [.copy("Resources/default_feed.json")])
    ],
    swiftLanguageModes: [.v6]
)
MANIFEST
echo '[]' > "$app/Sources/Snippets/Resources/default_feed.json"
cat > "$app/Sources/Snippets/Prelude.swift" <<'SWIFT'
import Foundation

/// What the README's snippets leave to the reader.
struct FeedItem: Codable, Sendable, Equatable {
    var id: Int
    var title: String
}
let cachesDirectory = URL(fileURLWithPath: NSTemporaryDirectory())
let feedURL = URL(string: "https://api.example.com/feed")!
SWIFT

python3 - "$readme" "$app/Sources/Snippets/main.swift" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
blocks = [b for b in re.findall(r"```swift\n(.*?)```", text, re.S) if not b.lstrip().startswith(".package(")]
if not blocks:
    sys.exit("no Swift snippet in " + sys.argv[1])
out = ["import Foundation", "import Strata", ""]
for index, block in enumerate(blocks):
    body = [line for line in block.splitlines() if not line.startswith("import ")]
    out.append(f"func snippet{index}() async throws {{")
    out += ["    " + line if line else "" for line in body]
    out.append("}")
    out.append("")
out.append("// Compiled, not run: the snippets reach for the network and the disk.")
out.append("_ = [" + ", ".join(f"snippet{i} as () async throws -> Void" for i in range(len(blocks))) + "]")
open(sys.argv[2], "w", encoding="utf-8").write("\n".join(out) + "\n")
print(f"{len(blocks)} snippet(s) from {sys.argv[1]}")
PY

if ! swift build --package-path "$app" -debug-info-format none -Xcc -g0 > "$app/build.log" 2>&1; then
    grep -E "error:|warning:" "$app/build.log" | grep "Sources/Snippets" >&2 || tail -n 40 "$app/build.log" >&2
    echo "error: a README snippet does not compile in an outside package (above)" >&2
    exit 1
fi
echo "every README snippet compiles in an outside package"
