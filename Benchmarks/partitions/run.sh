#!/usr/bin/env bash
# The fleet under partitions, checked like Jepsen, for longer than CI runs it: three `strata proxy`
# processes, a PostgreSQL cluster of their own, a fault injector on every link, and the checker on
# the recorded history (Tools/Tests/StrataIntegrationTests/PartitionTests.swift).
#
#   bash Benchmarks/partitions/run.sh [SECONDS] [SEED...]     # defaults: 120 s, seeds 1 2 3
#
# Each seed's figures (operations, faults, violations) go to standard output and to
# OUT/seed-N.txt, its history (JSON lines, one operation or fault each) to OUT/seed-N.jsonl;
# OUT is $PARTITION_OUT or .build/partitions. A seed replays the same schedule of faults and the
# same clients' choices. Exits non-zero when any run found a violation.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-120}"
shift || true
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1 2 3)
out="${PARTITION_OUT:-.build/partitions}"
mkdir -p "$out"
fast=(-debug-info-format none -Xcc -g0)

SWIFT_DETERMINISTIC_HASHING=1 swift build "${fast[@]}" --package-path Tools --scratch-path "$PWD/.build" --build-tests >&2
status=0
for seed in "${seeds[@]}"; do
    echo "== seed $seed, $seconds s" >&2
    if ! STRATA_PARTITION_SECONDS="$seconds" STRATA_PARTITION_SEED="$seed" STRATA_PARTITION_HISTORY="$PWD/$out/seed-$seed.jsonl" \
        swift test "${fast[@]}" --package-path Tools --scratch-path "$PWD/.build" --skip-build \
        --filter 'PartitionTests' > "$out/seed-$seed.log" 2>&1; then
        status=1
        grep -E "✘|violation" "$out/seed-$seed.log" | head -20 >&2 || true
    fi
    # The figures' line (the first line with the seed only says how to replay it).
    grep -aE "^partitions: seed $seed, [0-9.]+ s, " "$out/seed-$seed.log" | tee "$out/seed-$seed.txt" || status=1
done
exit $status
