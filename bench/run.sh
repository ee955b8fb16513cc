#!/usr/bin/env bash
# Veneer side by side with nginx, Varnish and HAProxy, in the same run, using the shared
# harness (../shared/bench/peers, or $PEERS_DIR). One event-loop thread per Veneer process
# (the peers run one worker each):
#
#   veneer-pass      upstream origin, no decorators    19080 (fast origin) / 19081 (slow origin)
#   veneer-cache     upstream origin, cache (1h TTL)   19082 (fast origin) / 19083 (slow origin)
#   veneer-prod      the production chain (below)      19084 (fast origin)
#   nginx-cache-log  the harness's nginx-cache with its access log on (a file), 19090
#
# Scenarios (--scenarios, comma-separated; default hit,pass,slow): the harness's `hit`, `pass`
# and `slow` (veneer-pass and veneer-cache against the peers), and `production`: the chain
#
#   latency_log (to a file) → block_list (static deny rules that match no benchmark request,
#   and learn) → cache (1h) → auth_refresh (a local token endpoint on 19096)
#
# (the shipped production environment's order) as veneer-prod, against nginx-cache-log, on the
# harness's hit requests (hits, warm cache, each checked by block_list) and pass requests
# (misses: unique query strings, through block_list and auth_refresh to the origin). The token endpoint (bench/production.py, started and stopped here) rotates the
# refresh token and issues 1 h access tokens; secrets, state and logs live in a temporary
# directory. Before the harness starts, a preflight runs the same chain in front of a checking
# origin and stops the run unless the token endpoint is called at start, `Authorization:
# Bearer` reaches the origin, a repeated GET is a hit (`Cache-Status`), a deny rule answers 403
# and the latency log grows; a production section after the harness's report gives the hits'
# and misses' ratios to nginx-cache-log (paired by round) and what the chain did in the run.
#
#   bench/run.sh                                  # every peer, 3 rounds x hit,pass,slow (~12 min)
#   bench/run.sh --peers nginx-pass,nginx-cache --rounds 2 --duration 5
#   bench/run.sh --scenarios production           # veneer-prod and nginx-cache-log alone
#   bench/run.sh --scenarios large                # 1 MB and 15 MB answers, and 100 clients
#                                                 # that do not read (bench/large.py)
#   bench/run.sh --peers nginx-pass,nginx-cache --scenarios hit,pass,slow,production
#   bench/run.sh --scenarios conns,cores,sizes,chain,entries   # how the cost grows, each against
#                                                 # nginx in the same run (bench/scale.py, ~12 min)
#   bench/run.sh --scenarios conns,cores,sizes,chain,entries --dry-run   # check their configurations
#
# conns, cores, sizes, chain and entries run bench/scale.py (ports 19400-19415, an origin and
# nginx peers of its own), with --duration (default 5) and --rounds (default 1) when given;
# --dry-run writes and checks their configurations (veneer check, nginx -t) and starts nothing.
#
# production is the harness's hit and pass for its two targets: listed with other scenarios,
# hit and pass run for every target; listed alone, no built-in peer runs unless --peers names
# some. Other arguments go to the harness (see its --help). Needs a release build
# (make release) and the peers' packages (sudo $PEERS_DIR/setup.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
peers="${PEERS_DIR:-$root/../shared/bench/peers}"
binary="${VENEER_BIN:-$root/.build/release/veneer}"
threads="${VENEER_BENCH_THREADS:-1}"
export PATH="$PATH:/usr/sbin:/sbin"

[[ -x "$binary" ]] || { echo "bench: no release binary at $binary (run: make release)" >&2; exit 2; }

# The options this script reads; every argument but --scenarios also goes to the harness.
scenarios="hit,pass,slow" workdir="/tmp/bench-peers" out="" cache_fs="tmpfs" peers_given=no
forward=() scale_options=() dry_run=no
while (($#)); do
  option="$1" value=""
  case "$option" in
    --dry-run) dry_run=yes; shift; continue ;;
    --*=*) value="${option#*=}" option="${option%%=*}"; shift ;;
    --scenarios|--workdir|--out|--cache-fs|--peers|--duration|--rounds)
      (($# >= 2)) || { echo "bench: $option needs a value" >&2; exit 2; }
      value="$2"; shift 2 ;;
    *) forward+=("$1"); shift; continue ;;
  esac
  case "$option" in
    --scenarios) scenarios="$value"; continue ;;
    --workdir) workdir="$value" ;;
    --out) out="$value" ;;
    --cache-fs) cache_fs="$value" ;;
    --peers) peers_given=yes ;;
    --duration|--rounds) scale_options+=("$option=$value") ;;
  esac
  forward+=("$option=$value")
done

standard=() production=no large=no scale=()
IFS=, read -ra wanted <<< "$scenarios"
for scenario in "${wanted[@]}"; do
  case "$scenario" in
    hit|pass|slow) [[ " ${standard[*]} " == *" $scenario "* ]] || standard+=("$scenario") ;;
    production) production=yes ;;
    large) large=yes ;;
    conns|cores|sizes|chain|entries) scale+=("$scenario") ;;
    "") ;;
    *) echo "bench: unknown scenario $scenario; known: hit, pass, slow, production, large, conns, cores, sizes, chain, entries" >&2; exit 2 ;;
  esac
done
harness_scenarios=("${standard[@]}")
if [[ $production == yes ]]; then
  for scenario in hit pass; do
    [[ " ${harness_scenarios[*]} " == *" $scenario "* ]] || harness_scenarios+=("$scenario")
  done
fi
# conns, cores, sizes, chain, entries: bench/scale.py, on ports of its own, before the others.
if ((${#scale[@]})); then
  [[ $dry_run == yes ]] && scale_options+=(--dry-run)
  python3 -u "$here/scale.py" --binary "$binary" --scenarios "$(IFS=,; echo "${scale[*]}")" ${scale_options[@]+"${scale_options[@]}"} |
    tee -a ${out:+"$out"}
  ((${#harness_scenarios[@]})) || [[ $large == yes ]] || exit 0
fi
[[ $dry_run == no ]] || { echo "bench: --dry-run checks the configurations of conns, cores, sizes, chain and entries only" >&2; exit 2; }
# large: bench/large.py, on ports of its own (19301-19305), before the harness's scenarios.
if [[ $large == yes ]]; then
  python3 "$here/large.py" --binary "$binary" | tee -a ${out:+"$out"}
  ((${#harness_scenarios[@]})) || exit 0
fi
((${#harness_scenarios[@]})) || { echo "bench: no scenario" >&2; exit 2; }
[[ -x "$peers/run.sh" ]] || { echo "bench: no harness at $peers (set PEERS_DIR)" >&2; exit 2; }

work="$(mktemp -d /tmp/veneer-bench.XXXXXX)"
chmod 0755 "$work"  # nginx's workers (user nobody) reach their cache dir through it; secrets stay in 0700 dirs
token_pid=""
cleanup() {
  if [[ -n $token_pid ]]; then kill "$token_pid" 2>/dev/null || true; wait "$token_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Interpolated by Veneer: the origins' URLs come from the harness, the rest from here.
export BENCH_STATE="${BENCH_STATE:-$work/state}" BENCH_PRODUCTION_DIR="$work/production"
token_port=19096 token_url="http://127.0.0.1:19096/oauth/token"
cat > "$work/bench.yaml" <<YAML
# Benchmark environments.
version: 1
state_dir: \${BENCH_STATE}
environments:
  pass-fast:
    listen: 127.0.0.1:19080
    origin: { upstream: { url: "\${BENCH_ORIGIN_FAST}" } }
  pass-slow:
    extends: pass-fast
    listen: 127.0.0.1:19081
    origin: { upstream: { url: "\${BENCH_ORIGIN_SLOW}" } }
  cache-fast:
    extends: pass-fast
    listen: 127.0.0.1:19082
    chain:
      - cache: { ttl: 1h, max_entries: 100000, max_bytes: 256MB }
  cache-slow:
    extends: cache-fast
    listen: 127.0.0.1:19083
    origin: { upstream: { url: "\${BENCH_ORIGIN_SLOW}" } }
  production:
    listen: 127.0.0.1:19084
    origin: { upstream: { url: "\${BENCH_ORIGIN_FAST}" } }
    chain:
      - latency_log: { file: "\${BENCH_PRODUCTION_DIR}/latency.log", slow: 500ms }
      - block_list:
          deny:
            clients: [203.0.113.0/24, "2001:db8::/32"]
            headers: { X-Account-Id: ["4242", "4343"] }
            methods: [DELETE]
            routes: [/posts/100000]
          learn: { status: 403, json: { error: account_blocked } }
      - cache: { ttl: 1h, max_entries: 100000, max_bytes: 256MB }
      - auth_refresh:
          token_url: $token_url
          client_id: veneer-bench
          client_secret_file: \${BENCH_PRODUCTION_DIR}/client-secret
          refresh_token_file: \${BENCH_PRODUCTION_DIR}/refresh-token
YAML

start() { echo "exec '$binary' run --config '$work/bench.yaml' -e $1 --threads $threads --log-level warning > /dev/null"; }

args=(--scenarios "$(IFS=,; echo "${harness_scenarios[*]}")")
if ((${#standard[@]})); then
  args+=(--start "$(start pass-fast)" --start "$(start pass-slow)"
         --start "$(start cache-fast)" --start "$(start cache-slow)"
         --target veneer-pass=http://127.0.0.1:19080 --slow-target veneer-pass=http://127.0.0.1:19081
         --target veneer-cache=http://127.0.0.1:19082 --slow-target veneer-cache=http://127.0.0.1:19083)
elif [[ $peers_given == no ]]; then
  args+=(--peers "")
fi

# Secrets of one client of the token endpoint, readable by their owner only.
make_client() {
  (umask 077; mkdir -p "$1/state"
   python3 -c 'import secrets; print("bench-refresh-" + secrets.token_urlsafe(16))' > "$1/refresh-token"
   cp "$work/client-secret" "$1/client-secret")
}
(umask 077; python3 -c 'import secrets; print(secrets.token_urlsafe(24))' > "$work/client-secret")
make_client "$BENCH_PRODUCTION_DIR"

if [[ $production == yes ]]; then
  for port in 19084 19090 19091 $token_port 19097; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "bench: port $port is already in use; another run still up? nothing started" >&2; exit 2
    fi
  done
  make_client "$work/preflight"
  python3 "$here/production.py" token-endpoint --port $token_port --client-id veneer-bench \
    --client-secret-file "$work/client-secret" --refresh-token-file "$BENCH_PRODUCTION_DIR/refresh-token" \
    --refresh-token-file "$work/preflight/refresh-token" 2> "$work/token-endpoint.log" &
  token_pid=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$token_port") 2>/dev/null && break; sleep 0.1; done
  kill -0 "$token_pid" 2>/dev/null || { cat "$work/token-endpoint.log" >&2; exit 1; }
  python3 "$here/production.py" preflight --binary "$binary" --config "$work/bench.yaml" \
    --environment production --listen 127.0.0.1:19084 --dir "$work/preflight" --token-url "$token_url" \
    --origin-port 19097 --summary "$work/preflight.json"

  # nginx-cache-log: the harness's nginx-cache, its access log on, on 19090 (its slow server on
  # 19091, unused), its cache dir on a private tmpfs as the harness does (--cache-fs).
  nginx_dir="$work/nginx-cache-log"
  mkdir -p "$nginx_dir/cache"
  sed -e 's|^\( *\)access_log off;|\1access_log access.log;|' \
      -e 's|listen 127\.0\.0\.1:19011 |listen 127.0.0.1:19090 |' -e 's|listen 127\.0\.0\.1:19021 |listen 127.0.0.1:19091 |' \
      "$peers/nginx-cache/nginx.conf" > "$nginx_dir/nginx.conf"
  [[ $(diff "$peers/nginx-cache/nginx.conf" "$nginx_dir/nginx.conf" | grep -c '^>') == 3 ]] ||
    { echo "bench: the harness's nginx-cache/nginx.conf changed shape; update bench/run.sh" >&2; exit 2; }
  nginx -t -q -p "$nginx_dir/" -c "$nginx_dir/nginx.conf" -e error.log -g 'worker_processes 1;'
  nginx_cmd="nginx -p '$nginx_dir/' -c '$nginx_dir/nginx.conf' -e error.log -g \"worker_processes \$BENCH_WORKERS;\""
  if [[ $cache_fs == tmpfs ]] && unshare --mount --propagation private \
       sh -c 'mount -t tmpfs -o size=1m probe "$1"' sh "$nginx_dir/cache" 2>/dev/null; then
    nginx_cmd="unshare --mount --propagation private sh -c 'mount -t tmpfs -o size=1g,mode=0755 bench-peers-cache \"\$1\" && shift && exec \"\$@\"' sh '$nginx_dir/cache' $nginx_cmd"
  elif [[ $cache_fs == tmpfs ]]; then
    echo "bench: cannot mount a private tmpfs; nginx-cache-log keeps its cache on disk" >&2
  fi
  args+=(--start "$(start production)" --start "exec $nginx_cmd"
         --target veneer-prod=http://127.0.0.1:19084 --target nginx-cache-log=http://127.0.0.1:19090)
fi

status=0
"$peers/run.sh" "${args[@]}" "${forward[@]}" || status=$?
if [[ $production == yes && $status == 0 ]]; then
  python3 "$here/production.py" report --results "$workdir/results.json" --target veneer-prod \
    --baseline nginx-cache-log --token-url "$token_url" --latency-log "$BENCH_PRODUCTION_DIR/latency.log" \
    --access-log "$nginx_dir/access.log" --preflight "$work/preflight.json" | tee -a ${out:+"$out"}
fi
exit $status
