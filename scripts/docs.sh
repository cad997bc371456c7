#!/usr/bin/env bash
# Converts each product's DocC catalog with its module's symbol graphs, warnings as errors, in
# parallel: Strata, StrataOutbox and StrataQueries. Run after `swift package dump-symbol-graph`
# (with every trait) has written the graphs; .ci/run does both.
#
#   bash scripts/docs.sh SYMBOL_GRAPH_DIR [OUTPUT_DIR]
set -euo pipefail
all_graphs=$1
output=${2:-$(mktemp -d)}
mkdir -p "$output"
cd "$(dirname "${BASH_SOURCE[0]}")/.."

pids=() logs=() modules=(Strata StrataOutbox StrataQueries)
for module in "${modules[@]}"; do
    # Only the module's own graphs (with its extensions of other modules' types: Module@Other):
    # dependencies' doc comments are not ours to check.
    graphs=$(mktemp -d)
    cp "$all_graphs/$module.symbols.json" "$graphs"/
    cp "$all_graphs/$module"@*.symbols.json "$graphs"/ 2>/dev/null || true
    log=$(mktemp)
    docc convert "Sources/$module/$module.docc" --additional-symbol-graph-dir "$graphs" \
        --fallback-display-name "$module" --fallback-bundle-identifier "$(tr '[:upper:]' '[:lower:]' <<< "$module")" \
        --output-path "$output/$module.doccarchive" --analyze --warnings-as-errors > "$log" 2>&1 &
    pids+=($!) logs+=("$log")
done
failed=0
for index in "${!modules[@]}"; do
    if ! wait "${pids[$index]}"; then
        echo "error: the ${modules[$index]} catalog has warnings or errors:" >&2
        cat "${logs[$index]}" >&2
        failed=1
    else
        cat "${logs[$index]}"
    fi
done
exit "$failed"
