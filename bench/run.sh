#!/usr/bin/env bash
# Veneer side by side with nginx, Varnish and HAProxy, in the same run, using the shared
# harness (../shared/bench/peers, or $PEERS_DIR). Four Veneer processes, one event-loop
# thread each (the peers run one worker each):
#
#   veneer-pass   upstream origin, no decorators    19080 (fast origin) / 19081 (slow origin)
#   veneer-cache  upstream origin, cache (1h TTL)   19082 (fast origin) / 19083 (slow origin)
#
#   bench/run.sh                                  # all peers, 3 rounds x 3 scenarios (~15 min)
#   bench/run.sh --peers nginx-pass,nginx-cache --rounds 2 --duration 5
#
# Extra arguments go to the harness (see its --help). Needs a release build
# (make release) and the peers' packages (sudo $PEERS_DIR/setup.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
peers="${PEERS_DIR:-$root/../shared/bench/peers}"
binary="${VENEER_BIN:-$root/.build/release/veneer}"
threads="${VENEER_BENCH_THREADS:-1}"

[[ -x "$peers/run.sh" ]] || { echo "bench: no harness at $peers (set PEERS_DIR)" >&2; exit 2; }
[[ -x "$binary" ]] || { echo "bench: no release binary at $binary (run: make release)" >&2; exit 2; }

config="$(mktemp -d /tmp/veneer-bench.XXXXXX)"
trap 'rm -rf "$config"' EXIT
cat > "$config/bench.yaml" <<'YAML'
# Benchmark environments: the origins' URLs come from the harness.
version: 1
state_dir: ${BENCH_STATE:-/tmp/veneer-bench-state}
environments:
  pass-fast:
    listen: 127.0.0.1:19080
    origin: { upstream: { url: "${BENCH_ORIGIN_FAST}" } }
  pass-slow:
    extends: pass-fast
    listen: 127.0.0.1:19081
    origin: { upstream: { url: "${BENCH_ORIGIN_SLOW}" } }
  cache-fast:
    extends: pass-fast
    listen: 127.0.0.1:19082
    chain:
      - cache: { ttl: 1h, max_entries: 100000, max_bytes: 256MB }
  cache-slow:
    extends: cache-fast
    listen: 127.0.0.1:19083
    origin: { upstream: { url: "${BENCH_ORIGIN_SLOW}" } }
YAML

start() { echo "exec '$binary' run --config '$config/bench.yaml' -e $1 --threads $threads --log-level warning > /dev/null"; }

exec "$peers/run.sh" \
  --start "$(start pass-fast)" --start "$(start pass-slow)" \
  --start "$(start cache-fast)" --start "$(start cache-slow)" \
  --target veneer-pass=http://127.0.0.1:19080 --slow-target veneer-pass=http://127.0.0.1:19081 \
  --target veneer-cache=http://127.0.0.1:19082 --slow-target veneer-cache=http://127.0.0.1:19083 \
  "$@"
