#!/usr/bin/env bash
# What telemetry costs: the same release binary, in the same run, with telemetry off, at 10%
# and at 100% sampling, on cache hits and on pass-through (no decorator, upstream origin).
# Mode 0 is telemetry on with nothing sampled (what every unsampled request pays). With
# --before BINARY, that binary (one from before telemetry) runs too, telemetry off: the
# same-run A/B of "off costs what it did". One event loop per Veneer process (--threads 1);
# nginx is both the origin (a small JSON post with Cache-Control) and the collector (it takes
# every POST /v1/traces with 204, so that nothing is dropped for a slow collector). Rounds
# alternate the processes; the figure is the Veneer process's CPU time (utime + stime, /proc)
# per request served by wrk. With --compare BINARY, a second build runs every mode too, its
# rows marked `b` (the same-run A/B of two builds' telemetry). With --rate N, each wrk
# connection waits N ms between requests (wrk's delay()): every process serves about the
# same request rate below saturation, so the CPU per request compares like for like. Each
# round starts one mode further along the list (no process always first). Printed: CPU per
# request over all rounds, then each round's ratio against the same build's `off` and their
# median, then (--compare, --before) each round's ratio between the builds in the same mode.
#
#   bench/telemetry-ab.sh [--rounds 3] [--duration 8] [--connections 32] [--before BINARY]
#                         [--compare BINARY] [--rate MS] [--kinds "hit pass"]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
binary="${VENEER_BIN:-$root/.build/release/veneer}"
rounds=3 duration=8 connections=32 before_binary="" compare_binary="" rate="" kinds="hit pass"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;; --duration) duration=$2; shift 2 ;; --connections) connections=$2; shift 2 ;;
    --before) before_binary=$2; shift 2 ;;
    --compare) compare_binary=$2; shift 2 ;; --rate) rate=$2; shift 2 ;; --kinds) kinds=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/logs"
cat > "$work/nginx.conf" <<NGINX
worker_processes 1; pid $work/nginx.pid; error_log $work/logs/error.log; daemon on;
events { worker_connections 4096; }
http { access_log off;
  server { listen 127.0.0.1:19201;
    location /v1/traces { client_max_body_size 16m; client_body_buffer_size 16m; return 204; }
    location / { default_type application/json; add_header Cache-Control "public, max-age=3600"; return 200 '{"id":1,"title":"t","body":"b"}'; } } }
NGINX
nginx -p "$work" -c "$work/nginx.conf"
port=19210
declare -A ports
modes="off 0 0.1 1"
[ -n "$compare_binary" ] && modes="off 0 0.1 1 b:off b:0 b:0.1 b:1"
[ -n "$before_binary" ] && modes="before $modes"
wrk_script=""
if [ -n "$rate" ]; then
  printf 'function delay()\n  return %s\nend\n' "$rate" > "$work/rate.lua"
  wrk_script="-s $work/rate.lua"
fi
for mode in $modes; do
  for kind in $kinds; do
    chain="[]"; [ "$kind" = hit ] && chain="[cache]"
    sample=${mode#b:}
    telemetry=""; [ "$sample" != off ] && [ "$mode" != before ] && telemetry="    telemetry: { endpoint: \"http://127.0.0.1:19201/v1/traces\", sample: $sample, queue: 65536 }"
    dir="$work/${mode/:/-}-$kind"; mkdir -p "$dir"
    printf 'state_dir: %s/state\nenvironments:\n  development:\n    origin: { upstream: { url: "http://127.0.0.1:19201" } }\n    chain: %s\n%s\n' "$dir" "$chain" "$telemetry" > "$dir/veneer.yaml"
    run="$binary"; [ "$mode" = before ] && run="$before_binary"; [ "$mode" != "$sample" ] && run="$compare_binary"
    "$run" run --config "$dir/veneer.yaml" --listen 127.0.0.1:$port --threads 1 2>"$dir/stderr.log" &
    pids+=($!); ports[$mode-$kind]="$port:$!"; port=$((port + 1))
  done
done
sleep 2
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
declare -A total_cpu total_requests
read -r -a mode_list <<<"$modes"
for round in $(seq 1 "$rounds"); do
  # Each round starts one mode further along, so that no process is always first after a
  # warm-up of another (an order effect of several points was seen with a fixed order).
  shift_by=$(( (round - 1) % ${#mode_list[@]} ))
  order="${mode_list[*]:$shift_by} ${mode_list[*]:0:$shift_by}"
  for kind in $kinds; do
    for mode in $order; do
      IFS=: read -r p pid <<<"${ports[$mode-$kind]}"
      wrk -t1 -c"$connections" -d1s "http://127.0.0.1:$p/posts/1" >/dev/null   # warm (and fill the cache)
      before=$(cpu "$pid")
      requests=$(wrk -t1 -c"$connections" -d"${duration}s" $wrk_script "http://127.0.0.1:$p/posts/1" | awk '/requests in/{print $1}')
      after=$(cpu "$pid")
      total_cpu[$mode-$kind]=$(( ${total_cpu[$mode-$kind]:-0} + after - before ))
      echo "$round $kind $mode $requests $((after - before))" >> "$work/rounds"
      total_requests[$mode-$kind]=$(( ${total_requests[$mode-$kind]:-0} + requests ))
    done
  done
done
ticks=$(getconf CLK_TCK)
printf '%-6s %-10s %12s %14s\n' kind telemetry requests "CPU µs/request"
for kind in $kinds; do
  for mode in $modes; do
    printf '%-6s %-10s %12d %14.2f\n' "$kind" "$mode" "${total_requests[$mode-$kind]}" \
      "$(echo "${total_cpu[$mode-$kind]} * 1000000 / $ticks / ${total_requests[$mode-$kind]}" | bc -l)"
  done
done
# Each round's CPU per request against the same binary's `off` in that round (measured
# minutes apart at most), and the median of those ratios over the rounds: steadier than the
# totals above on a machine whose load changes while the rounds run.
python3 - "$work/rounds" <<'PY'
import sys, statistics, collections
rows = [line.split() for line in open(sys.argv[1])]
cost = {(r, k, m): int(c) / int(q) for r, k, m, q, c in rows if int(q) > 0}
ratios = collections.defaultdict(list)
for (r, k, m), value in cost.items():
    off = cost.get((r, k, "b:off" if m.startswith("b:") else "off"))
    if off and m not in ("off", "b:off", "before"):
        ratios[(k, m)].append(value / off - 1)
for (k, m), values in sorted(ratios.items()):
    print(f"{k:6s} {m:10s} median {100 * statistics.median(values):+6.1f}% against off, rounds: " + " ".join(f"{100 * v:+.0f}%" for v in values))
# The two builds mode for mode (--compare), and off against the build before telemetry (--before).
pairs = collections.defaultdict(list)
for (r, k, m), value in cost.items():
    other = cost.get((r, k, "b:" + m)) if not m.startswith("b:") and m != "before" else None
    if other:
        pairs[(k, m, "the --compare build")].append(value / other - 1)
    if m == "off" and (r, k, "before") in cost:
        pairs[(k, m, "--before")].append(value / cost[(r, k, "before")] - 1)
for (k, m, against), values in sorted(pairs.items()):
    print(f"{k:6s} {m:10s} median {100 * statistics.median(values):+6.1f}% against {against} in the same mode, rounds: "
          + " ".join(f"{100 * v:+.0f}%" for v in values))
PY
for mode in $modes; do
  [ "${mode#b:}" = off ] || [ "$mode" = before ] && continue
  for kind in $kinds; do
    IFS=: read -r p pid <<<"${ports[$mode-$kind]}"
    echo "$mode-$kind: $(curl -s "http://127.0.0.1:$p/-/metrics" | grep -E '^veneer_telemetry_spans_(exported|dropped)_total' | tr '\n' ' ')"
  done
done
