#!/usr/bin/env bash
# Runs the Tools/ test suite (integration: real servers, the CLI, examples, kill loops) many times to
# catch a rare stall, and leaves what is needed to find one.
#
#     scripts/tools-suite-loop.sh [RUNS]          # RUNS defaults to 50
#
# Builds the Tools tests once, then runs `swift test --package-path Tools --skip-build` RUNS times.
# Each run has a wall limit (LIMIT seconds, default 600; a full run takes about a minute). A run still
# going at its limit has stalled: every thread of its test process is dumped with gdb, the tests that
# had started and not ended are listed from Swift Testing's event stream, and the run is killed.
# Every run leaves in LOG_DIR (default a new temporary directory):
#   run-N.log           swift test's output
#   run-N.events.jsonl  Swift Testing's event stream (JSON lines, version 0)
#   run-N.stacks.txt    (a stall) `thread apply all bt` of each test process
#   run-N.unfinished    (a stall or a failure) the tests that started and did not end
# Ends with "N runs, S stalls, F failures" and exits non-zero on any stall or failure.
#
# Environment:
#   LIMIT=600          wall limit of one run, seconds
#   LOG_DIR=dir        where the logs go
#   FILTER=regex       passed to `swift test --filter` (a suspicious suite alone)
#   SKIP_BUILD=1       do not build first (the tests are built already)
#   NICE=10            niceness of the build and the runs (other work shares the cores)
#   TASKSET=0          run each test process on these CPUs only (`taskset -c`), to shake out races
#   STOP_ON_STALL=1    stop after the first stall
set -uo pipefail
cd "$(dirname "$0")/.."

runs=${1:-50}
limit=${LIMIT:-600}
nice_level=${NICE:-10}
log_dir=${LOG_DIR:-$(mktemp -d -t strata-tools-loop.XXXXXX)}
mkdir -p "$log_dir"
echo "logs in $log_dir"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    echo "== build: Tools/ tests"
    if ! nice -n "$nice_level" swift build --package-path Tools --build-tests > "$log_dir/build.log" 2>&1; then
        tail -50 "$log_dir/build.log"
        echo "error: the Tools tests did not build (log: $log_dir/build.log)" >&2
        exit 2
    fi
fi

test_args=(--package-path Tools --skip-build)
[ -n "${FILTER:-}" ] && test_args+=(--filter "$FILTER")
launcher=(nice -n "$nice_level")
[ -n "${TASKSET:-}" ] && launcher+=(taskset -c "$TASKSET")

# Every process below $1 (children first listed after their parent), not including $1.
descendants() {
    local child
    for child in $(pgrep -P "$1" 2>/dev/null); do
        echo "$child"
        descendants "$child"
    done
}

# The tests that started and did not end, from an event stream (JSON lines, version 0).
unfinished_tests() {
    python3 - "$1" <<'PY'
import json, sys
started, ended, names = {}, set(), {}
try:
    lines = open(sys.argv[1], encoding="utf-8", errors="replace").read().splitlines()
except OSError:
    sys.exit(0)
for line in lines:
    try:
        record = json.loads(line)
    except ValueError:
        continue  # a line cut short by the kill
    payload = record.get("payload", {})
    if record.get("kind") == "test":
        names[payload.get("id")] = payload.get("displayName") or payload.get("name")
    elif record.get("kind") == "event":
        test_id, kind = payload.get("testID"), payload.get("kind")
        if kind == "testStarted":
            started[test_id] = payload.get("instant", {}).get("since1970")
        elif kind in ("testEnded", "testSkipped"):
            ended.add(test_id)
for test_id, at in started.items():
    if test_id not in ended:
        print(f"{test_id}  ({names.get(test_id, '?')}, started at {at})")
PY
}

stalls=0
failures=0
done_runs=0
for ((run = 1; run <= runs; run++)); do
    log="$log_dir/run-$run.log"
    events="$log_dir/run-$run.events.jsonl"
    rm -f "$events"
    started=$(date +%s)
    "${launcher[@]}" swift test "${test_args[@]}" \
        --event-stream-output-path "$events" --event-stream-version 0 > "$log" 2>&1 &
    runner=$!
    stalled=0
    while kill -0 "$runner" 2>/dev/null; do
        sleep 2
        if [ $(( $(date +%s) - started )) -ge "$limit" ]; then
            stalled=1
            break
        fi
    done
    if [ "$stalled" = 1 ]; then
        stalls=$((stalls + 1))
        echo "!! run $run: STALL, no end after ${limit}s"
        unfinished_tests "$events" > "$log_dir/run-$run.unfinished"
        echo "   started, not ended:"
        sed 's/^/     /' "$log_dir/run-$run.unfinished"
        # Only this run's processes: other runs (another checkout, another agent) may be testing too.
        pids=$(descendants "$runner")
        : > "$log_dir/run-$run.stacks.txt"
        for pid in $pids; do
            # The test process (…PackageTests.xctest) and what it started (the strata CLI, servers).
            case "$({ tr '\0' ' ' < "/proc/$pid/cmdline"; } 2>/dev/null)" in
                *PackageTests.xctest*|*/strata\ *|*/strata|*crash-writer*) ;;
                *) continue ;;
            esac
            {
                echo "=== pid $pid: $({ tr '\0' ' ' < "/proc/$pid/cmdline"; } 2>/dev/null)"
                gdb -p "$pid" -batch -ex "thread apply all bt 12" 2>&1 | grep -E "^(Thread|#)"
            } >> "$log_dir/run-$run.stacks.txt"
        done
        echo "   stacks: $log_dir/run-$run.stacks.txt ($(grep -c '^Thread' "$log_dir/run-$run.stacks.txt") threads)"
        for pid in $pids; do kill -KILL "$pid" 2>/dev/null; done
        kill -KILL "$runner" 2>/dev/null
        wait "$runner" 2>/dev/null
    else
        wait "$runner"
        status=$?
        elapsed=$(( $(date +%s) - started ))
        if [ "$status" -ne 0 ]; then
            failures=$((failures + 1))
            unfinished_tests "$events" > "$log_dir/run-$run.unfinished"
            echo "!! run $run: FAILED (exit $status) after ${elapsed}s; log: $log"
            grep -E "✘|error:|Fatal error" "$log" | grep -v "known issue" | head -20 | sed 's/^/     /'
        else
            echo "run $run: passed in ${elapsed}s ($(grep -E "Test run with" "$log" | tail -1 | sed 's/^[^T]*//'))"
        fi
    fi
    done_runs=$run
    if [ "$stalled" = 1 ] && [ "${STOP_ON_STALL:-0}" = 1 ]; then break; fi
done

echo "$done_runs runs, $stalls stalls, $failures failures"
[ "$stalls" -eq 0 ] && [ "$failures" -eq 0 ]
