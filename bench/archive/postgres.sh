#!/usr/bin/env bash
# A PostgreSQL server on loopback for the benchmarks (Debian's postgresql),
# run as the postgres user in DIR on port 25432, with the same settings as
# the tests' (coordinator/tests/support/postgres.rs) but fsync on:
# `postgres.sh DIR` starts it and prints the --archive value;
# `postgres.sh DIR stop` stops it.
set -euo pipefail
dir=${1:?usage: postgres.sh DIR [stop]}
bin=$(dirname "$(ls /usr/lib/postgresql/*/bin/initdb | head -n1)")
if [[ ${2:-} == stop ]]; then
    runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -w -m fast stop >/dev/null
    exit 0
fi
mkdir -p "$dir/data"
chmod 755 "$dir"
chown postgres:postgres "$dir/data"
runuser -u postgres -- "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >/dev/null
runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -w -l "$dir/data/log" \
    -o "-c listen_addresses=127.0.0.1 -p 25432 -k $dir/data" start >/dev/null
echo "postgres://postgres@127.0.0.1:25432/postgres"
