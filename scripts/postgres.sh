#!/usr/bin/env bash
# A throwaway PostgreSQL server for StrataPostgres' tests, on 127.0.0.1 only.
#
#   eval "$(scripts/postgres.sh start)"   # installs (Debian) if needed, starts, prints the export line
#   swift test
#   scripts/postgres.sh stop
#   scripts/postgres.sh restart           # a fast restart (the partition checker's fault)
#
# `start` is idempotent: it reuses a running cluster and prints the same URL again. Only the
# `export STRATA_POSTGRES_URL=...` line goes to stdout (so `eval` is safe); progress goes to stderr.
#
# Settings (environment): STRATA_PG_PORT (55432), STRATA_PG_DATA (/tmp/strata-pg).
set -euo pipefail

port="${STRATA_PG_PORT:-55432}"
data="${STRATA_PG_DATA:-/tmp/strata-pg}"
log="$data.log"
url="postgres://strata:strata@127.0.0.1:$port/strata"

say() { echo "postgres.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }

pg_bin() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    [ -n "$dir" ] && [ -x "$dir/pg_ctl" ] && echo "$dir"
}

# Runs a command as the cluster's owner: postgres refuses to run as root.
as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

install_if_missing() {
    if pg_bin > /dev/null; then return; fi
    [ "$(id -u)" = 0 ] || die "PostgreSQL is not installed; run as root or 'sudo apt-get install -y postgresql'"
    say "installing the Debian postgresql package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
    pg_bin > /dev/null || die "postgresql installed, but no /usr/lib/postgresql/*/bin/pg_ctl"
}

is_running() {
    local bin="$1"
    [ -f "$data/PG_VERSION" ] && as_owner "$bin/pg_ctl" -D "$data" status > /dev/null 2>&1
}

start() {
    install_if_missing
    local bin
    bin=$(pg_bin)

    if [ ! -f "$data/PG_VERSION" ]; then
        say "creating a cluster in $data"
        rm -rf "$data"
        mkdir -p "$data"
        [ "$(id -u)" = 0 ] && chown postgres:postgres "$data"
        chmod 700 "$data"
        local pwfile
        pwfile=$(mktemp)
        echo "postgres" > "$pwfile"
        [ "$(id -u)" = 0 ] && chown postgres "$pwfile"
        as_owner "$bin/initdb" -D "$data" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
            --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 > /dev/null
        rm -f "$pwfile"
    fi

    if ! is_running "$bin"; then
        say "starting PostgreSQL on 127.0.0.1:$port"
        touch "$log"
        [ "$(id -u)" = 0 ] && chown postgres "$log"
        # The socket directory is the data directory: /var/run/postgresql may not exist or be ours.
        # 400 connections: the library's Postgres suites run their cases in parallel, each with a
        # pool of its own, and at 200 a case once got "too many connections" (53300) for its probe.
        as_owner "$bin/pg_ctl" -D "$data" -l "$log" -w -t 60 \
            -o "-c listen_addresses=127.0.0.1 -p $port -k $data -c max_connections=400 -c fsync=off" \
            start > /dev/null || { tail -n 20 "$log" >&2; die "PostgreSQL did not start (log: $log)"; }
    fi

    # The role and database, created once (both steps are no-ops when they exist).
    local psql=("$bin/psql" -h "$data" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -qAt)
    as_owner "${psql[@]}" -c "DO \$\$ BEGIN
            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'strata') THEN
                CREATE ROLE strata LOGIN PASSWORD 'strata';
            END IF;
        END \$\$;" > /dev/null
    if [ "$(as_owner "${psql[@]}" -c "SELECT 1 FROM pg_database WHERE datname = 'strata'")" != 1 ]; then
        as_owner "${psql[@]}" -c "CREATE DATABASE strata OWNER strata" > /dev/null
    fi

    say "ready: $url"
    echo "export STRATA_POSTGRES_URL=$url"
}

stop() {
    local bin
    if ! bin=$(pg_bin); then say "PostgreSQL is not installed; nothing to stop"; return; fi
    if is_running "$bin"; then
        as_owner "$bin/pg_ctl" -D "$data" -m fast -w stop > /dev/null
        say "stopped"
    else
        say "not running"
    fi
}

# A fast restart (every connection cut, the server away for a moment), as the partition checker's
# fault: only of a cluster of its own (STRATA_PG_DATA), never the one the other tests share.
restart() {
    local bin
    bin=$(pg_bin) || die "PostgreSQL is not installed"
    is_running "$bin" || die "not running"
    as_owner "$bin/pg_ctl" -D "$data" -l "$log" -m fast -w -t 60 restart > /dev/null
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    restart) restart ;;
    *) echo "usage: $0 start|stop|restart" >&2; exit 2 ;;
esac
