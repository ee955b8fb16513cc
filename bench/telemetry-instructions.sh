#!/usr/bin/env bash
# User-space instructions per request (valgrind's callgrind) of a release binary with telemetry
# off, `sample: 0`, `0.1` and `1`, on cache hits or pass-through: counted, not timed, so the
# figure does not move with the machine's load as CPU time does (bench/telemetry-ab.sh). It
# leaves out the kernel (sockets, page faults) and weighs every instruction alike (valgrind
# counts a `rep movsb` copy once per byte), so it complements the CPU figures, never replaces
# them. One event loop; nginx is the origin and the collector (as in telemetry-ab.sh); the
# counters are zeroed after a warm-up and read after a wrk run of --duration seconds.
#
#   bench/telemetry-instructions.sh [--kind hit|pass] [--duration 8] [--modes "off 0 0.1 1"] BINARY...
set -euo pipefail
kind=hit duration=8 modes="off 0 0.1 1"
while [ $# -gt 0 ]; do
  case "$1" in
    --kind) kind=$2; shift 2 ;; --duration) duration=$2; shift 2 ;; --modes) modes=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: $0 [--kind hit|pass] [--duration S] [--modes M] BINARY..." >&2; exit 2; }
work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/logs"
cat > "$work/nginx.conf" <<NGINX
worker_processes 1; pid $work/nginx.pid; error_log $work/logs/error.log; daemon on;
events { worker_connections 4096; }
http { access_log off;
  server { listen 127.0.0.1:19501;
    location /v1/traces { client_max_body_size 16m; client_body_buffer_size 16m; return 204; }
    location / { default_type application/json; add_header Cache-Control "public, max-age=3600"; return 200 '{"id":1,"title":"t","body":"b"}'; } } }
NGINX
nginx -p "$work" -c "$work/nginx.conf"
chain="[]"; [ "$kind" = hit ] && chain="[cache]"
printf '%-24s %-6s %-6s %10s %18s\n' binary kind sample requests "instructions/request"
for mode in $modes; do
  for binary in "$@"; do
    # valgrind 3.19 cannot read the DWARF 5 of a Swift 6 build: a copy without it.
    objcopy --strip-debug "$binary" "$work/veneer"
    telemetry=""; [ "$mode" != off ] && telemetry="    telemetry: { endpoint: \"http://127.0.0.1:19501/v1/traces\", sample: $mode, queue: 65536 }"
    rm -rf "$work/state" "$work"/cg.*
    printf 'state_dir: %s/state\nenvironments:\n  development:\n    origin: { upstream: { url: "http://127.0.0.1:19501" } }\n    chain: %s\n%s\n' "$work" "$chain" "$telemetry" > "$work/veneer.yaml"
    valgrind --tool=callgrind --callgrind-out-file="$work/cg.%p" "$work/veneer" run --config "$work/veneer.yaml" --listen 127.0.0.1:19510 --threads 1 >"$work/out.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 300); do curl -s -o /dev/null http://127.0.0.1:19510/posts/1 && break; sleep 0.2; done
    wrk -t1 -c16 -d3s http://127.0.0.1:19510/posts/1 >/dev/null
    sleep 1.2   # the warm-up's partial batch leaves on the exporter's timer
    callgrind_control -z "$pid" >/dev/null 2>&1
    requests=$(wrk -t1 -c16 -d"${duration}s" http://127.0.0.1:19510/posts/1 | awk '/requests in/{print $1}')
    sleep 1.2
    callgrind_control -d "$pid" >/dev/null 2>&1
    sleep 0.5
    instructions=$(grep -h '^totals:\|^summary:' "$work"/cg."$pid".* | tail -1 | awk '{print $2}')
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
    printf '%-24s %-6s %-6s %10d %18d\n' "$(basename "$binary")" "$kind" "$mode" "$requests" $((instructions / requests))
  done
done
