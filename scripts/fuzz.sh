#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser of outside bytes (issue 39), with libFuzzer and
# AddressSanitizer from the Swift toolchain.
#
#   scripts/fuzz.sh [SECONDS] [TARGET…]     fuzz each target for SECONDS (default 60), all by default
#   scripts/fuzz.sh --merge [TARGET…]       fold what runs found into the committed corpora (only
#                                           inputs that add coverage), to commit
#   scripts/fuzz.sh --list                  the targets and what each checks
#   STRATA_FUZZ_SEED=N scripts/fuzz.sh …     libFuzzer's seed (0, the default: a new one each run;
#                                           CI fixes one, so its verdict does not depend on luck)
#
# Builds `strata-fuzz` (Tools/Fuzz) into .build-asan with AddressSanitizer and libFuzzer's coverage,
# the same build as CI's AddressSanitizer run of the library (CI shares it). Each target
# starts from its committed corpus (Tools/Fuzz/Corpus/TARGET, read only) and keeps what it finds in
# .build-asan/fuzz/TARGET/corpus; an input that crashes or breaks a property is written to
# .build-asan/fuzz/TARGET/ (crash-…) and the script fails. Copy such an input into the committed
# corpus once fixed: the corpus test (Tools/Tests/StrataFuzzTargetsTests) replays every one of them.
# Prints, per target, the executions, the coverage and the findings.
set -euo pipefail
cd "$(dirname "$0")/.."
export SWIFT_DETERMINISTIC_HASHING=1

mode=fuzz
seconds=60
case "${1:-}" in
    --merge) mode=merge; shift ;;
    --list) mode=list; shift ;;
    ''|-*) ;;
    *[!0-9]*) ;;
    *) seconds=$1; shift ;;
esac

swiftc_path=$(readlink -f "$(command -v swiftc)")
toolchain=$(dirname "$(dirname "$swiftc_path")")
archive=$(ls "$toolchain"/lib/clang/*/lib/linux/libclang_rt.fuzzer_no_main-"$(uname -m)".a 2>/dev/null | head -n 1 || true)
[ -n "$archive" ] || { echo "error: no libclang_rt.fuzzer_no_main in $toolchain/lib/clang (a Swift toolchain for Linux has it)" >&2; exit 1; }
export STRATA_FUZZER_NO_MAIN=$archive

# The AddressSanitizer build, as CI's: Strata's and Tools' own modules instrumented (with libFuzzer's
# coverage), dependencies as a plain build makes them (Package.swift, STRATA_SANITIZER). Its own build
# folder by default; CI passes its main one (STRATA_FUZZ_SCRATCH), where its ASan run left this build.
export STRATA_SANITIZER=address
build_flags=(-debug-info-format none -Xcc -g0)  # .ci/run's, so CI's build is reused
scratch="${STRATA_FUZZ_SCRATCH:-$PWD/.build-asan}"
build_log="$(mktemp)"
if ! swift build "${build_flags[@]}" --package-path Tools --scratch-path "$scratch" --product strata-fuzz > "$build_log" 2>&1; then
    grep -v -E "Cannot export local symbol|unhandled; explicitly declare|CMakeLists.txt" "$build_log" >&2
    echo "error: strata-fuzz did not build" >&2
    exit 1
fi
fuzzer="$(swift build "${build_flags[@]}" --package-path Tools --scratch-path "$scratch" --show-bin-path)/strata-fuzz"
[ -x "$fuzzer" ] || { echo "error: $fuzzer was not built" >&2; exit 1; }
[ "$("$fuzzer" --driver)" = libFuzzer ] || { echo "error: $fuzzer was linked without libFuzzer (STRATA_FUZZER_NO_MAIN)" >&2; exit 1; }

if [ "$mode" = list ]; then
    "$fuzzer" --list
    exit 0
fi

targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
    mapfile -t targets < <("$fuzzer" --list | cut -f1)
fi

# Leaks are checked by libFuzzer after each input that allocated more than it freed (LeakSanitizer):
# a leak is a finding like a crash. Not for the targets whose servers or stores go on working after an
# input returns (a response still on its way, a write behind): memory they hold mid-flight sits in an
# async task's frame or an enum payload whose pointer carries tag bits, which LeakSanitizer takes for
# a leak, after an input as at the process's exit. Their leaks are checked where nothing runs on: the
# library's suite under LeakSanitizer at exit (.ci/run). Swift's own crash backtracer is off: ASan reports the crash, and the backtracer's
# helper process reads memory ASan forbids.
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:symbolize=1}"
export SWIFT_BACKTRACE=enable=no

# One target: its libFuzzer run (or merge), a summary line in $work/summary, and on a finding the
# log's telling lines in $work/report; returns libFuzzer's status.
run_target() {
    local target=$1 committed work dictionary leaks log status runs coverage corpus findings started
    committed="Tools/Fuzz/Corpus/$target"
    work="$scratch/fuzz/$target"
    mkdir -p "$work/corpus" "$committed"
    rm -f "$work/summary" "$work/report"
    dictionary=()
    [ -f "Tools/Fuzz/Dictionaries/$target.dict" ] && dictionary=(-dict="Tools/Fuzz/Dictionaries/$target.dict")
    leaks=1
    case "$target" in proxy-request|web-demo-actions|inspector-actions) leaks=0 ;; esac
    if [ "$mode" = merge ]; then
        ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=$leaks" "$fuzzer" "$target" -merge=1 -detect_leaks="$leaks" "${dictionary[@]}" "$committed" "$work/corpus" > "$work/merge.log" 2>&1
        status=$?
        echo "$target: $(tail -n 1 "$work/merge.log")" > "$work/summary"
        return "$status"
    fi
    log="$work/log"
    started=$SECONDS
    ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=$leaks" "$fuzzer" "$target" -seed="${STRATA_FUZZ_SEED:-0}" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 -detect_leaks="$leaks" \
        -artifact_prefix="$work/" "${dictionary[@]}" "$work/corpus" "$committed" > "$log" 2>&1
    status=$?
    runs=$(grep -E "^stat::number_of_executed_units:" "$log" | awk '{print $2}' | tail -n 1 || true)
    coverage=$(grep -oE "cov: [0-9]+" "$log" | tail -n 1 | awk '{print $2}' || true)
    corpus=$(find "$work/corpus" -type f | wc -l)
    findings=$(ls "$work" | grep -cE "^(crash|leak|timeout|oom)-" || true)
    printf '%-18s %10s runs  cov %6s  corpus %5s  findings %s  (%s s with the corpus replay)\n' \
        "$target" "${runs:-?}" "${coverage:-?}" "$corpus" "$findings" "$((SECONDS - started))" > "$work/summary"
    if [ "$status" -ne 0 ]; then
        {
            echo "!! $target found a defect (exit $status); its input is in $work/; the log's end:"
            grep -E "property violated|ERROR: |SUMMARY|Test unit written" "$log" | head -n 12 || tail -n 30 "$log"
        } > "$work/report"
    fi
    return "$status"
}

# The parsers' targets run STRATA_FUZZ_JOBS at a time (default: one per core); each is one
# single-threaded libFuzzer process, so lanes side by side divide the wall time. The targets that
# start servers run one at a time after them: each input's check that the server still answers
# waits 10 s, and two instrumented servers side by side on two cores came near it.
lanes="${STRATA_FUZZ_JOBS:-$(nproc)}"
parsers=()
servers=()
for target in "${targets[@]}"; do
    case "$target" in proxy-request|web-demo-actions|inspector-actions) servers+=("$target") ;; *) parsers+=("$target") ;; esac
done
[ "$mode" = fuzz ] && echo "== ${#targets[@]} targets, ${seconds} s each: ${#parsers[@]} parsers ${lanes} at a time, then ${#servers[@]} with servers one at a time"
failed=0
running=0
set +e
for target in "${parsers[@]}"; do
    if [ "$running" -ge "$lanes" ]; then
        wait -n || failed=1
        running=$((running - 1))
    fi
    run_target "$target" &
    running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
    wait -n || failed=1
    running=$((running - 1))
done
for target in "${servers[@]}"; do
    run_target "$target" || failed=1
done
set -e

if [ "$mode" = fuzz ]; then
    echo "== fuzzing, ${seconds} s per target"
fi
for target in "${targets[@]}"; do
    work="$scratch/fuzz/$target"
    cat "$work/summary" 2>/dev/null | sed 's/^/   /' || echo "   $target: no summary (the run did not finish)"
done
for target in "${targets[@]}"; do
    cat "$scratch/fuzz/$target/report" 2>/dev/null || true
done
exit "$failed"
