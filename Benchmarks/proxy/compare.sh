#!/usr/bin/env bash
# `strata proxy` beside nginx `proxy_cache`: same machine, same origin, same objects.
#
# Usage (from anywhere):
#   STRATA_POSTGRES_URL=postgres://… bash Benchmarks/proxy/compare.sh [path/to/strata]
#
# $1 is the strata binary (default Tools/.build/release/strata, from the repository root). When it is
# missing, or STRATA_POSTGRES_URL is not set, strata is skipped (said so) and nginx is measured alone.
#
# It starts Tools/Tests/Servers/origin_server.py on a free port, nginx (Debian's /usr/sbin/nginx, in
# the foreground, unprivileged paths, 2 workers) as a caching reverse proxy in front of it, and
# `strata proxy` in front of it too (STRATA_PROXY_ARGS below), then for each proxy:
#   cached hit   warm /items/hit?cc=max-age%3D600 once, then `wrk -t2 -c32 -d10s --latency`: req/s, p99
#   stampede     a fresh key /items/cold-PROXY-N?cc=max-age%3D600&delay_ms=500, 200 requests fired at
#                once (all connections opened first): how many reached the origin, and the wall time
#                from the first request sent to the last answer read
# and prints a Markdown table. Every process and the temporary folder go away on exit.
#
# Knobs (environment): WRK_THREADS (2), WRK_CONNECTIONS (32), WRK_DURATION (10s), STAMPEDE (200), STAMPEDE_DELAY_MS (500),
# KEEP_TMP=1 (leave the temporary folder, with every log, for a look afterwards).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

# The `strata proxy` command line. {upstream}, {port} and {postgres} are filled in at start.
STRATA_PROXY_ARGS=(proxy --upstream "{upstream}" --port "{port}" --postgres-url "{postgres}" --node bench-1)

strata="${1:-$root/Tools/.build/release/strata}"
postgres_url="${STRATA_POSTGRES_URL:-}"
nginx_bin=/usr/sbin/nginx
wrk_threads="${WRK_THREADS:-2}"
wrk_connections="${WRK_CONNECTIONS:-32}"
wrk_duration="${WRK_DURATION:-10s}"
stampede="${STAMPEDE:-200}"
stampede_delay_ms="${STAMPEDE_DELAY_MS:-500}"
hit_path='/items/hit?cc=max-age%3D600'

say() { echo "compare.sh: $*" >&2; }
die() { say "$*"; exit 2; }

[ -x "$nginx_bin" ] || die "$nginx_bin is missing (Debian: apt-get install -y --no-install-recommends nginx)"
command -v wrk >/dev/null || die "wrk is missing (Debian: apt-get install -y wrk)"
command -v curl >/dev/null || die "curl is missing"
# The interpreter itself, not a shim (pyenv's python3 is a script that keeps running as the parent,
# so its pid would not be the server's and a signal would miss the server).
python="$(python3 -c 'import sys; print(sys.executable)')" || die "python3 is missing"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/strata-proxy-compare.XXXXXX")"
pids=()

cleanup() {
    local status=$? pid i
    trap - EXIT INT TERM
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do
        for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [ "${KEEP_TMP:-0}" = 1 ]; then say "kept $tmp"; else rm -rf "$tmp"; fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
    "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# wait_ready NAME PID URL: until URL answers 200 (at most 20 s) while PID lives.
wait_ready() {
    local name="$1" pid="$2" url="$3" i
    for i in $(seq 200); do
        if ! kill -0 "$pid" 2>/dev/null; then say "$name exited before answering"; return 1; fi
        if [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$url" || true)" = 200 ]; then return 0; fi
        sleep 0.1
    done
    say "$name did not answer $url within 20 s"
    return 1
}

# ---- origin -----------------------------------------------------------------------------------------
"$python" "$root/Tools/Tests/Servers/origin_server.py" --port 0 >"$tmp/origin.out" 2>"$tmp/origin.err" &
origin_pid=$!
pids+=("$origin_pid")
for i in $(seq 100); do
    grep -q '^listening ' "$tmp/origin.out" 2>/dev/null && break
    kill -0 "$origin_pid" 2>/dev/null || { cat "$tmp/origin.err" >&2; die "the origin server exited"; }
    sleep 0.1
done
origin_port="$(awk '/^listening /{print $2; exit}' "$tmp/origin.out")"
[ -n "$origin_port" ] || die "the origin server printed no port"
origin="http://127.0.0.1:$origin_port"
say "origin on $origin"

# ---- nginx ------------------------------------------------------------------------------------------
nginx_port="$(free_port)"
mkdir -p "$tmp/nginx/cache"
user_line=""
# As root, nginx would run its workers as nobody, who cannot write the (0700) cache folder.
if [ "$(id -u)" = 0 ]; then user_line="user $(id -un) $(id -gn);"; fi
# daemon off comes from -g (nginx refuses it twice).
cat >"$tmp/nginx/nginx.conf" <<EOF
$user_line
worker_processes 2;
worker_rlimit_nofile 8192;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $tmp/nginx/client_body;
    proxy_temp_path $tmp/nginx/proxy;
    fastcgi_temp_path $tmp/nginx/fastcgi;
    uwsgi_temp_path $tmp/nginx/uwsgi;
    scgi_temp_path $tmp/nginx/scgi;
    proxy_cache_path $tmp/nginx/cache levels=1:2 keys_zone=bench:10m max_size=256m inactive=60m use_temp_path=off;
    upstream origin {
        server 127.0.0.1:$origin_port;
        keepalive 32;
    }
    server {
        listen 127.0.0.1:$nginx_port backlog=4096;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache bench;
            proxy_cache_valid 200 10m;
            proxy_cache_lock on;
            proxy_cache_lock_timeout 5s;
            proxy_cache_use_stale error timeout updating;
            add_header X-Cache \$upstream_cache_status;
        }
    }
}
EOF
"$nginx_bin" -g 'daemon off;' -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -e stderr \
    >"$tmp/nginx/stdout.log" 2>"$tmp/nginx/stderr.log" &
nginx_pid=$!
pids+=("$nginx_pid")

# ---- strata -----------------------------------------------------------------------------------------
strata_state=run
strata_pid=""
strata_port=""
if [ ! -x "$strata" ]; then
    strata_state="skipped: no binary at $strata (build it: swift build -c release --package-path Tools --product strata)"
elif [ -z "$postgres_url" ]; then
    strata_state="skipped: STRATA_POSTGRES_URL is not set"
else
    strata_port="$(free_port)"
    args=()
    for arg in "${STRATA_PROXY_ARGS[@]}"; do
        arg="${arg//\{upstream\}/$origin}"
        arg="${arg//\{port\}/$strata_port}"
        arg="${arg//\{postgres\}/$postgres_url}"
        args+=("$arg")
    done
    say "starting: $strata ${args[*]//"$postgres_url"/<STRATA_POSTGRES_URL>}"
    "$strata" "${args[@]}" >"$tmp/strata.out" 2>"$tmp/strata.err" &
    strata_pid=$!
    pids+=("$strata_pid")
fi

# The probe goes through the proxy to a control endpoint: no-store, not counted by the origin.
wait_ready nginx "$nginx_pid" "http://127.0.0.1:$nginx_port/_origin/counts" \
    || { cat "$tmp/nginx/stderr.log" "$tmp/nginx/error.log" >&2 2>/dev/null || true; die "nginx did not start"; }
say "nginx on 127.0.0.1:$nginx_port ($("$nginx_bin" -v 2>&1 | sed 's/.*version: //'))"
if [ "$strata_state" = run ]; then
    if wait_ready strata "$strata_pid" "http://127.0.0.1:$strata_port/_origin/counts"; then
        say "strata on 127.0.0.1:$strata_port"
    else
        say "strata's output:"; tail -n 20 "$tmp/strata.out" "$tmp/strata.err" >&2 || true
        strata_state="failed: did not answer on 127.0.0.1:$strata_port (see its output above)"
    fi
fi
[ "$strata_state" = run ] || say "strata $strata_state"

# ---- the stampede client -----------------------------------------------------------------------------
cat >"$tmp/stampede.py" <<'PY'
"""N requests at once against one URL: open every connection, then send every request, then read
every answer. Prints JSON: wall seconds (first send to last answer), statuses, X-Cache values."""
import asyncio, json, sys, time
from urllib.parse import urlsplit

async def main(url, n):
    split = urlsplit(url)
    target = split.path + ("?" + split.query if split.query else "")
    request = ("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (target, split.netloc)).encode()
    connections = await asyncio.gather(*(asyncio.open_connection(split.hostname, split.port) for _ in range(n)))

    async def one(reader, writer):
        writer.write(request)
        await writer.drain()
        data = await reader.read()
        writer.close()
        head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        status = head[0].split(" ")[1] if head and len(head[0].split(" ")) > 1 else "none"
        cache = next((line.split(":", 1)[1].strip() for line in head[1:] if line.lower().startswith("x-cache:")), "-")
        return status, cache

    start = time.perf_counter()
    answers = await asyncio.gather(*(one(r, w) for r, w in connections), return_exceptions=True)
    wall = time.perf_counter() - start
    statuses, caches = {}, {}
    for answer in answers:
        status, cache = ("error", "-") if isinstance(answer, BaseException) else answer
        statuses[status] = statuses.get(status, 0) + 1
        caches[cache] = caches.get(cache, 0) + 1
    print(json.dumps({"wall": wall, "statuses": statuses, "x_cache": caches}))

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
PY

upstream_calls() {  # upstream_calls PATH (no query): the origin's count of GET PATH
    curl -s "$origin/_origin/counts" | "$python" -c 'import json, sys; print(json.load(sys.stdin).get("GET " + sys.argv[1], 0))' "$1"
}

# ---- measure ---------------------------------------------------------------------------------------
declare -A rps p99 calls wall
run_id="$(date +%s%N)"

measure() {  # measure NAME PORT
    local name="$1" port="$2" base="http://127.0.0.1:$2" before after out
    say "$name: warming $hit_path"
    curl -s -o /dev/null "$base$hit_path"
    curl -s -D "$tmp/$name.hit-headers" -o /dev/null "$base$hit_path"
    say "$name: second warm-up answer: $(head -1 "$tmp/$name.hit-headers" | tr -d '\r'), X-Cache: $(awk 'tolower($1)=="x-cache:"{print $2}' "$tmp/$name.hit-headers" | tr -d '\r')"
    before="$(upstream_calls /items/hit)"
    say "$name: wrk -t$wrk_threads -c$wrk_connections -d$wrk_duration --latency"
    # In the background and waited for, so that a signal to this script is acted on at once.
    wrk -t"$wrk_threads" -c"$wrk_connections" -d"$wrk_duration" --latency "$base$hit_path" >"$tmp/$name.wrk" &
    pids+=("$!")
    wait "$!" || die "$name: wrk failed: $(cat "$tmp/$name.wrk")"
    after="$(upstream_calls /items/hit)"
    rps[$name]="$(awk '/^Requests\/sec:/{printf "%.0f", $2}' "$tmp/$name.wrk")"
    p99[$name]="$(awk '/Latency Distribution/{d=1} d && $1=="99%"{print $2; exit}' "$tmp/$name.wrk")"
    say "$name: ${rps[$name]} req/s, p99 ${p99[$name]}, $(awk '/requests in/{print $1}' "$tmp/$name.wrk") requests, upstream GETs during the run: $((after - before))"
    if grep -qE 'Socket errors|Non-2xx' "$tmp/$name.wrk"; then say "$name: wrk saw errors: $(grep -E 'Socket errors|Non-2xx' "$tmp/$name.wrk" | tr -s ' ' | tr '\n' ';')"; fi

    local cold="/items/cold-$name-$run_id"
    say "$name: stampede of $stampede on $cold"
    out="$("$python" "$tmp/stampede.py" "$base$cold?cc=max-age%3D600&delay_ms=$stampede_delay_ms" "$stampede")"
    calls[$name]="$(upstream_calls "$cold")"
    wall[$name]="$("$python" -c 'import json, sys; print("%.0f ms" % (json.loads(sys.argv[1])["wall"] * 1000))' "$out")"
    say "$name: stampede: ${calls[$name]} upstream call(s), ${wall[$name]}, answers $out"
}

measure nginx "$nginx_port"
if [ "$strata_state" = run ]; then measure strata "$strata_port"; fi

# ---- table ----------------------------------------------------------------------------------------
echo
echo "$(nproc) cores, $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME" || uname -s); origin: origin_server.py; wrk -t$wrk_threads -c$wrk_connections -d$wrk_duration; stampede: $stampede requests, origin delay $stampede_delay_ms ms"
echo
echo "| proxy | hit req/s | hit p99 | ratio strata/nginx | stampede upstream calls | stampede time |"
echo "|---|---:|---:|---:|---:|---:|"
echo "| nginx $("$nginx_bin" -v 2>&1 | sed 's/.*nginx\///') proxy_cache | ${rps[nginx]} | ${p99[nginx]} | 1.00 | ${calls[nginx]} | ${wall[nginx]} |"
if [ "$strata_state" = run ]; then
    ratio="$(awk -v s="${rps[strata]}" -v n="${rps[nginx]}" 'BEGIN{ if (n > 0) printf "%.2f", s / n; else print "n/a" }')"
    echo "| strata proxy | ${rps[strata]} | ${p99[strata]} | $ratio | ${calls[strata]} | ${wall[strata]} |"
else
    echo "| strata proxy | — | — | — | — | — ($strata_state) |"
fi
