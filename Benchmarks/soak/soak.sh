#!/usr/bin/env bash
# Soak (issue 39): memory stays flat under hours-like traffic. Not part of CI: a run takes 10 minutes
# and more, and owns both cores.
#
#   STRATA_POSTGRES_URL=postgres://… bash Benchmarks/soak/soak.sh [OUTPUT_FOLDER]
#
# 1. `strata proxy` (release build, PostgreSQL shared tier) in front of Tools/Tests/Servers/origin_server.py,
#    under `wrk` for SOAK_SECONDS (600) with a mix (mix.lua below): hits on 50 hot keys, misses on
#    distinct query strings, 1 MB bodies, bodies past --max-body-bytes (streamed, not stored),
#    short-lived entries whose upstream is slower than the soft timeout, writes that invalidate,
#    503s, and the whole upstream failing for 5 s every 45 s. Every SOAK_SAMPLE (5) seconds it samples the
#    proxy's resident memory (/proc/PID/status VmRSS), its memory tier (strata_proxy_memory_entries and
#    _bytes from /_strata/metrics) and the table's size (pg_total_relation_size). The memory tier is
#    bounded to SOAK_MEMORY_ENTRIES (2,000) responses and 64 MiB, so it is full before warm-up ends:
#    a node's memory grows while its tier fills (by design), and the soak looks for growth past that.
# 2. `SoakQueries` (Benchmarks/Sources/SoakQueries): a QueryClient through SOAK_LOADS (1,000,000)
#    loads with observers coming and going, invalidations, network flaps, foregrounds, drops and
#    removals, on the real clock, printing its resident memory every 2% of the loads.
#
# It fails when, after warm-up (the first quarter of the samples), either memory grows past its
# budget: the largest sample after warm-up above SOAK_RSS_FACTOR (1.25) times the largest during
# warm-up, or the last quarter's mean above SOAK_DRIFT (1.10) times the second quarter's; the table
# above SOAK_TABLE_FACTOR (2.0) times --table-bytes (dead rows wait for autovacuum). It writes
# proxy.csv, queries.csv, summary.txt and soak.svg (both curves) into OUTPUT_FOLDER (a new temporary
# folder by default).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
seconds="${SOAK_SECONDS:-600}"
sample="${SOAK_SAMPLE:-5}"
loads="${SOAK_LOADS:-1000000}"
rss_factor="${SOAK_RSS_FACTOR:-1.25}"
drift="${SOAK_DRIFT:-1.10}"
table_factor="${SOAK_TABLE_FACTOR:-2.0}"
table_bytes=$((64 * 1024 * 1024))
memory_entries="${SOAK_MEMORY_ENTRIES:-2000}"
postgres_url="${STRATA_POSTGRES_URL:?set STRATA_POSTGRES_URL (scripts/postgres.sh start prints it)}"
out="${1:-$(mktemp -d "${TMPDIR:-/tmp}/strata-soak.XXXXXX")}"
mkdir -p "$out"
table="soak_$$"

say() { echo "soak.sh: $*" >&2; }
die() { say "$*"; exit 2; }
command -v wrk >/dev/null || die "wrk is missing (Debian: apt-get install -y wrk)"
command -v psql >/dev/null || die "psql is missing (Debian: apt-get install -y postgresql-client)"
python="$(python3 -c 'import sys; print(sys.executable)')"

export SWIFT_DETERMINISTIC_HASHING=1
say "building strata and SoakQueries (release)"
swift build -c release --package-path "$root/Tools" --product strata >&2
swift build -c release --package-path "$root/Benchmarks" --product SoakQueries >&2
strata="$(swift build -c release --package-path "$root/Tools" --show-bin-path)/strata"
soak_queries="$(swift build -c release --package-path "$root/Benchmarks" --show-bin-path)/SoakQueries"

pids=()
cleanup() {
    local status=$? pid
    trap - EXIT INT TERM
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    psql "$postgres_url" -qAtc "DROP TABLE IF EXISTS $table" >/dev/null 2>&1 || true
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }

# ---- origin and proxy -------------------------------------------------------------------------------
"$python" "$root/Tools/Tests/Servers/origin_server.py" --port 0 >"$out/origin.out" 2>"$out/origin.err" &
pids+=($!)
for _ in $(seq 100); do grep -q '^listening ' "$out/origin.out" 2>/dev/null && break; sleep 0.1; done
origin="http://127.0.0.1:$(awk '/^listening /{print $2; exit}' "$out/origin.out")"
port="$(free_port)"
admin_port="$(free_port)"
"$strata" proxy --upstream "$origin" --port "$port" --admin-port "$admin_port" --postgres-url "$postgres_url" --table "$table" --node soak \
    --memory-bytes 64MiB --memory-entries "$memory_entries" --max-body-bytes 2MiB --table-bytes "$table_bytes" --soft-timeout 1s --hard-timeout 10s \
    >"$out/strata.out" 2>"$out/strata.err" &
proxy_pid=$!
pids+=("$proxy_pid")
for _ in $(seq 200); do
    [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$port/_origin/counts" || true)" = 200 ] && break
    kill -0 "$proxy_pid" 2>/dev/null || { tail "$out/strata.err" >&2; die "strata proxy exited"; }
    sleep 0.1
done
say "strata proxy (pid $proxy_pid) on 127.0.0.1:$port, origin $origin, table $table, output in $out"

cat >"$out/mix.lua" <<'LUA'
-- The request mix, per thousand: 600 hits on 50 hot keys, 150 misses with distinct query strings,
-- 20 one-megabyte bodies (20 keys), 5 bodies past --max-body-bytes (streamed, never stored), 70
-- short-lived keys whose upstream answers after 1.5 s with stale-while-revalidate (served stale at
-- once), 10 without it (served stale at the soft timeout), 70 writes (each invalidates its key), 40
-- answers 503, 35 on keys the writes churn.
local counter = 0
request = function()
  counter = counter + 1
  local r = math.random(1000)
  local path
  local method = "GET"
  if r <= 600 then
    path = "/items/hot-" .. math.random(50) .. "?cc=max-age%3D600"
  elseif r <= 750 then
    path = "/items/miss-" .. math.random(1000000) .. "?cc=max-age%3D300&n=" .. counter
  elseif r <= 770 then
    path = "/items/big-" .. math.random(20) .. "?cc=max-age%3D600&pad=1000000"
  elseif r <= 775 then
    path = "/items/huge-" .. math.random(5) .. "?cc=max-age%3D600&pad=3000000"
  elseif r <= 845 then
    path = "/items/swr-" .. math.random(200) .. "?cc=max-age%3D1%2C%20stale-while-revalidate%3D60&delay_ms=1500"
  elseif r <= 855 then
    path = "/items/slow-" .. math.random(50) .. "?cc=max-age%3D1&delay_ms=1500"
  elseif r <= 925 then
    method = "POST"
    path = "/items/churn-" .. math.random(100) .. "?cc=max-age%3D600"
  elseif r <= 965 then
    path = "/items/err-" .. math.random(100) .. "?status=503"
  else
    path = "/items/churn-" .. math.random(100) .. "?cc=max-age%3D600&tag=churn"
  end
  return wrk.format(method, path)
end
LUA

# The upstream fails for 5 s every 45 s.
(
    while true; do
        sleep 40
        curl -s -o /dev/null -X POST "$origin/_origin/fail?on=1" || true
        sleep 5
        curl -s -o /dev/null -X POST "$origin/_origin/fail?on=0" || true
    done
) &
pids+=($!)

wrk -t2 -c64 -d"${seconds}s" --timeout 15s -s "$out/mix.lua" "http://127.0.0.1:$port" >"$out/wrk.txt" 2>&1 &
wrk_pid=$!
pids+=("$wrk_pid")

echo "seconds,rss_kib,table_bytes,memory_entries,memory_bytes" >"$out/proxy.csv"
start=$SECONDS
while kill -0 "$wrk_pid" 2>/dev/null; do
    rss=$(awk '/^VmRSS:/{print $2}' "/proc/$proxy_pid/status" 2>/dev/null || echo -1)
    size=$(psql "$postgres_url" -qAtc "SELECT pg_total_relation_size('$table')" 2>/dev/null || echo -1)
    tier=$(curl -s -m 2 "http://127.0.0.1:$admin_port/_strata/metrics" \
        | awk '/^strata_proxy_memory_entries/{e=$2} /^strata_proxy_memory_bytes/{b=$2} END{print (e==""?-1:e) "," (b==""?-1:b)}' || echo "-1,-1")
    echo "$((SECONDS - start)),$rss,$size,$tier" >>"$out/proxy.csv"
    kill -0 "$proxy_pid" 2>/dev/null || { tail "$out/strata.err" >&2; die "strata proxy died during the soak"; }
    sleep "$sample"
done
wait "$wrk_pid" || true
say "wrk: $(grep -E 'Requests/sec|requests in' "$out/wrk.txt" | tr -s ' ' | tr '\n' ' ')"

# ---- the query client -------------------------------------------------------------------------------
say "SoakQueries: $loads loads"
"$soak_queries" "$loads" >"$out/queries.csv" 2>"$out/queries.err"
say "$(cat "$out/queries.err")"

# ---- verdict and plot -------------------------------------------------------------------------------
"$python" - "$out" "$rss_factor" "$drift" "$table_factor" "$table_bytes" <<'PY'
import csv, sys, os
out, rss_factor, drift, table_factor, table_bytes = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])

def series(path, x, y):
    rows = [r for r in csv.DictReader(open(os.path.join(out, path))) if float(r[y]) >= 0]
    return [float(r[x]) for r in rows], [float(r[y]) for r in rows]

def judge(name, values, unit):
    n = len(values)
    if n < 8:
        return False, f"{name}: only {n} samples"
    q = n // 4
    warm, after = values[:q], values[q:]
    second, last = values[q:2 * q], values[-q:]
    peak_warm, peak_after = max(warm), max(after)
    mean2, mean4 = sum(second) / len(second), sum(last) / len(last)
    ok = peak_after <= rss_factor * peak_warm and mean4 <= drift * mean2
    return ok, (f"{name}: warm-up peak {peak_warm:.0f} {unit}, peak after {peak_after:.0f} {unit} "
                f"({peak_after / peak_warm:.2f}x, budget {rss_factor}x); second-quarter mean {mean2:.0f}, "
                f"last-quarter mean {mean4:.0f} ({mean4 / mean2:.2f}x, budget {drift}x)")

lines, ok = [], True
t, rss = series("proxy.csv", "seconds", "rss_kib")
good, line = judge("strata proxy RSS", [v / 1024 for v in rss], "MiB"); ok &= good; lines.append(line)
_, entries = series("proxy.csv", "seconds", "memory_entries")
_, tier_bytes = series("proxy.csv", "seconds", "memory_bytes")
if entries:
    full_at = next((x for x, e in zip(t, entries) if e >= 0.95 * max(entries)), None)
    lines.append(f"memory tier: {max(entries):.0f} entries at most, {max(tier_bytes) / 1048576:.1f} MiB at most (as its budget counts), "
                 f"95% of its most entries from {full_at:.0f} s")
_, size = series("proxy.csv", "seconds", "table_bytes")
peak_table = max(size) if size else 0
good = peak_table <= table_factor * table_bytes; ok &= good
lines.append(f"PostgreSQL table: peak {peak_table / 1048576:.1f} MiB (budget {table_factor}x {table_bytes / 1048576:.0f} MiB)")
qx, qrss = series("queries.csv", "loads", "rss_kib")
good, line = judge("QueryClient RSS", [v / 1024 for v in qrss], "MiB"); ok &= good; lines.append(line)
lines.append("verdict: " + ("flat" if ok else "GREW PAST ITS BUDGET"))
open(os.path.join(out, "summary.txt"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))

# A small SVG: the two memory curves, each on its own axis.
def polyline(xs, ys, x0, y0, w, h, ymax):
    xmax = max(xs) or 1
    return " ".join(f"{x0 + w * x / xmax:.1f},{y0 + h - h * y / ymax:.1f}" for x, y in zip(xs, ys))
svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="720" height="260" font-family="sans-serif" font-size="12">',
       '<rect width="720" height="260" fill="white"/>']
tier_series = [v / 1048576 for v in tier_bytes] if len(tier_bytes) == len(t) else []
for i, (title, xs, ys, xlabel, extra) in enumerate([
        ("strata proxy, resident MiB (orange: its memory tier)", t, [v / 1024 for v in rss], "seconds", tier_series),
        ("QueryClient, resident MiB", qx, [v / 1024 for v in qrss], "loads", [])]):
    x0, y0, w, h = 50 + i * 360, 30, 290, 180
    ymax = max(ys) * 1.2 if ys else 1
    svg.append(f'<text x="{x0}" y="20">{title}</text>')
    svg.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#999"/>')
    svg.append(f'<text x="{x0 - 5}" y="{y0 + 10}" text-anchor="end">{ymax:.0f}</text><text x="{x0 - 5}" y="{y0 + h}" text-anchor="end">0</text>')
    svg.append(f'<text x="{x0 + w}" y="{y0 + h + 16}" text-anchor="end">{max(xs) if xs else 0:.0f} {xlabel}</text>')
    if xs:
        svg.append(f'<polyline fill="none" stroke="#2563eb" stroke-width="1.5" points="{polyline(xs, ys, x0, y0, w, h, ymax)}"/>')
    if xs and extra:
        svg.append(f'<polyline fill="none" stroke="#ea580c" stroke-width="1.5" points="{polyline(xs, extra, x0, y0, w, h, ymax)}"/>')
svg.append('</svg>')
open(os.path.join(out, "soak.svg"), "w").write("\n".join(svg))
sys.exit(0 if ok else 1)
PY
