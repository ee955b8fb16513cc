#!/usr/bin/env bash
# The floor of the stack: what SwiftNIO itself costs per request, next to Veneer and nginx in the
# same run. `bench/floor` is a separate SwiftPM package (SwiftNIO only, built with the Makefile's
# RELEASE_FLAGS) with two servers on one event loop: `canned` answers every request head
# (counted by its blank line, nothing else parsed) with the bytes of a Veneer cache hit captured
# at start; `forward` gives each client connection one upstream connection to the origin and
# copies bytes both ways, unparsed. Against them: veneer-cache (a 1 h cache) and veneer-pass (no
# decorator) with --threads 1, nginx-cache and nginx-pass of the shared harness (one worker), all
# in front of the harness's nginx origin. Each round runs every target for DURATION seconds
# (wrk, one thread, 64 connections, after a 1 s warm-up) and prints its req/s and its own user
# and system CPU per request (/proc/PID/stat). What Veneer costs above `canned` or `forward` is
# the work of Veneer's own code on that path; what `forward` costs against nginx-pass says how
# much of nginx-pass's CPU a SwiftNIO proxy spends before it parses anything.
#
#   bench/floor.sh [--rounds 2] [--duration 4] [--build-only]   (VENEER_BIN, PEERS_DIR as bench/run.sh)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
binary="${VENEER_BIN:-$root/.build/release/veneer}"
peers="${PEERS_DIR:-$root/../shared/bench/peers}"
rounds=2 duration=4 build_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;; --duration) duration=$2; shift 2 ;; --build-only) build_only=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$binary" ] || { echo "no Veneer binary at $binary (make release, or set VENEER_BIN)" >&2; exit 1; }
# The Makefile's RELEASE_FLAGS that change the code (its section flags only lay the binary out).
release_flags="-Xswiftc -cross-module-optimization -Xswiftc -enforce-exclusivity=unchecked"
(cd "$root/bench/floor" && swift build -c release $release_flags >/dev/null) || { echo "bench/floor did not build" >&2; exit 1; }
[ "$build_only" = 1 ] && exit 0
floor="$root/bench/floor/.build/release/floor"
work=$(mktemp -d); chmod 755 "$work"   # nginx workers (nobody) read the posts and write the cache
declare -A pid
nginx_dirs=()
cleanup() {
  for p in "${pid[@]}"; do kill "$p" 2>/dev/null || true; done
  for d in "${nginx_dirs[@]}"; do [ -f "$d/nginx.pid" ] && kill "$(cat "$d/nginx.pid")" 2>/dev/null || true; done
  wait 2>/dev/null || true; rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/origin" "$work/state"
python3 "$peers/origin/gen_posts.py" "$work/origin/www" 1000 >/dev/null
start_nginx() { # DIR CONF
  mkdir -p "$1/cache"; nginx_dirs+=("$1")
  (cd "$1" && exec nginx -p "$1/" -c "$2" -e error.log -g "worker_processes 1;" 3>&-) &   # the harness's files say daemon off
}
start_nginx "$work/origin" "$peers/origin/nginx.conf"
start_nginx "$work/nginx-cache" "$peers/nginx-cache/nginx.conf"
start_nginx "$work/nginx-pass" "$peers/nginx-pass/nginx.conf"
cat > "$work/veneer.yaml" <<YAML
version: 1
state_dir: $work/state
environments:
  pass:
    listen: 127.0.0.1:19180
    origin: { upstream: { url: "http://127.0.0.1:19001" } }
  cache:
    extends: pass
    listen: 127.0.0.1:19182
    chain:
      - cache: { ttl: 1h, max_entries: 100000, max_bytes: 256MB }
YAML
"$binary" run --config "$work/veneer.yaml" -e pass --threads 1 --log-level warning >/dev/null 2>"$work/pass.err" 3>&- & pid[veneer-pass]=$!
"$binary" run --config "$work/veneer.yaml" -e cache --threads 1 --log-level warning >/dev/null 2>"$work/cache.err" 3>&- & pid[veneer-cache]=$!
for _ in $(seq 1 100); do curl -sf -o /dev/null http://127.0.0.1:19182/posts/1 && break; sleep 0.1; done
python3 - "$work/answer.raw" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", 19182))
s.sendall(b"GET /posts/1 HTTP/1.1\r\nHost: 127.0.0.1:19182\r\n\r\n")   # cached by the wait above: a hit
data = b""
while b"\r\n\r\n" not in data: data += s.recv(65536)
head, _, body = data.partition(b"\r\n\r\n")
length = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0])
while len(body) < length: body += s.recv(65536)
open(sys.argv[1], "wb").write(head + b"\r\n\r\n" + body)
PY
"$floor" canned 19190 "$work/answer.raw" 3>&- & pid[floor-canned]=$!
"$floor" forward 19191 19001 3>&- & pid[floor-forward]=$!
sleep 1
pid[nginx-cache]=$(pgrep -P "$(cat "$work/nginx-cache/nginx.pid")" -f "worker process")
pid[nginx-pass]=$(pgrep -P "$(cat "$work/nginx-pass/nginx.pid")" -f "worker process")
for i in $(seq 1 100); do for port in 19182 19011; do curl -s -o /dev/null "http://127.0.0.1:$port/posts/$i"; done; done
echo "canned answer: $(wc -c < "$work/answer.raw") bytes, $(head -1 "$work/answer.raw" | tr -d '\r'), $(grep -a '^Cache-Status' "$work/answer.raw" | tr -d '\r')"
grep -aq '^Cache-Status: veneer; hit' "$work/answer.raw" || { echo "the canned answer is not a veneer-cache hit" >&2; exit 1; }
one() { # NAME PORT SCRIPT
  local p=${pid[$1]}
  wrk -t1 -c64 -d1s -s "$peers/wrk/$3" "http://127.0.0.1:$2" -- "" 12345 100 >/dev/null
  read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$p/stat")
  wrk -t1 -c64 -d"${duration}s" -s "$peers/wrk/$3" "http://127.0.0.1:$2" -- "" 12345 100 > "$work/$1.wrk"
  read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$p/stat")
  local req; req=$(grep -o '"requests":[0-9]*' "$work/$1.wrk" | cut -d: -f2)
  awk -v n="$1" -v r="$req" -v u=$((u1-u0)) -v s=$((s1-s0)) -v d="$duration" -v l="$(cut -d' ' -f1 /proc/loadavg)" -v hz="$(getconf CLK_TCK)" \
    'BEGIN{printf "%-14s %8d req/s  user %5.2f  sys %5.2f  total %5.2f µs/req  (load %s)\n", n, r/d, u*1e6/hz/r, s*1e6/hz/r, (u+s)*1e6/hz/r, l}' | tee -a "$work/rows"
}
for r in $(seq 1 "$rounds"); do
  echo "round $r"
  one floor-canned 19190 hit.lua; one veneer-cache 19182 hit.lua; one nginx-cache 19011 hit.lua
  one floor-forward 19191 pass.lua; one veneer-pass 19180 pass.lua; one nginx-pass 19012 pass.lua
done
# Medians over the rounds, and what they say: Veneer's own work is its CPU above the floor's.
python3 - "$work/rows" <<'PY'
import statistics, sys, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    rows[f[0]].append((float(f[4]), float(f[6]), float(f[8])))
med = {k: [statistics.median(x[i] for x in v) for i in range(3)] for k, v in rows.items()}
print("medians (µs per request: user, sys, total)")
for k, (u, s, t) in med.items(): print(f"  {k:<14} {u:5.2f} {s:5.2f} {t:5.2f}")
for floor, veneer, nginx in (("floor-canned", "veneer-cache", "nginx-cache"), ("floor-forward", "veneer-pass", "nginx-pass")):
    f, v, n = med[floor][2], med[veneer][2], med[nginx][2]
    print(f"{veneer}: {n / v:.2f}x {nginx}'s CPU efficiency; {floor} {n / f:.2f}x; "
          f"Veneer's own work {v - f:.2f} µs a request above the floor, "
          f"{n - f:.2f} µs left to spend for CPU equal to {nginx}'s")
PY
