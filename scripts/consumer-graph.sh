#!/usr/bin/env bash
# Counts the packages an app checks out when it depends on Strata and uses only the `Strata` product:
# a throwaway package in a temporary directory depends on this checkout by path and resolves.
#
#   bash scripts/consumer-graph.sh                    the Strata product alone (the figure in the README)
#   bash scripts/consumer-graph.sh SQLite Postgres    with those traits enabled on the .package line
#
# Prints the checked-out packages and their count; exits 1 when the plain product needs more than 5.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
app="$(mktemp -d)"
trap 'rm -rf "$app"' EXIT

traits=""
products='.product(name: "Strata", package: "Strata")'
if [ $# -gt 0 ]; then
    traits=", traits: [$(printf '"%s", ' "$@" | sed 's/, $//')]"
    for trait in "$@"; do products+=", .product(name: \"Strata$trait\", package: \"Strata\")"; done
fi

mkdir -p "$app/Sources/App"
cat > "$app/Package.swift" <<MANIFEST
// swift-tools-version: 6.2
import PackageDescription
let package = Package(
    name: "App",
    dependencies: [.package(name: "Strata", path: "$root"$traits)],
    targets: [.executableTarget(name: "App", dependencies: [$products])]
)
MANIFEST
echo 'import Strata' > "$app/Sources/App/main.swift"

if ! swift package --package-path "$app" resolve > "$app/resolve.log" 2>&1; then
    cat "$app/resolve.log" >&2
    exit 2
fi
checkouts=$(ls "$app/.build/checkouts")
count=$(echo "$checkouts" | grep -c . || true)
echo "$checkouts" | sed 's/^/  /'
echo "packages checked out besides Strata: $count${traits:+ (traits: $*)}"
if [ $# -eq 0 ] && [ "$count" -gt 5 ]; then
    echo "error: an app using only the Strata product checks out $count packages (at most 5)" >&2
    exit 1
fi
