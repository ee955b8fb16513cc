#!/usr/bin/env bash
# Memory per cached entry: two Veneer processes in the same run, both with the same mock origin
# seeded with N posts, one with a memory cache in front and one without. Every post is fetched
# once through each; the difference of their resident memory, divided by N, is what one cached
# entry costs (key, headers, body, LRU bookkeeping, allocator overhead).
#
#   bench/cache-memory.sh            # N = 20000
#   N=50000 bench/cache-memory.sh
#   HEADS=nginx bench/cache-memory.sh   # origin: a local nginx answering as bench/scale.py's does
#                                       # (Server, Date, Content-Type, Cache-Control: ~120 B of
#                                       # field lines) instead of the mock (ETag, Content-Type: ~46 B)
#   THREADS=2 CONNS=16 ...              # event loops of each Veneer [1]; connections filling [1]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
binary="${VENEER_BIN:-$root/.build/release/veneer}"
count="${N:-20000}"
heads="${HEADS:-mock}"
threads="${THREADS:-1}"
conns="${CONNS:-1}"
[[ -x "$binary" ]] || { echo "cache-memory: no release binary at $binary (run: make release)" >&2; exit 2; }

work="$(mktemp -d /tmp/veneer-cache-memory.XXXXXX)"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

python3 - "$count" > "$work/posts.json" <<'PY'
import json, sys
n = int(sys.argv[1])
print(json.dumps([{"id": i, "title": f"Post number {i}", "body": "x" * 120, "userId": i % 10} for i in range(1, n + 1)]))
PY
origin="{ mock: { seed: $work/posts.json } }"
if [[ "$heads" == nginx ]]; then
    mkdir -p "$work/nginx"
    cat > "$work/nginx/nginx.conf" <<NGINX
daemon off;
pid nginx.pid;
error_log error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    server_tokens off;
    default_type application/json;
    client_body_temp_path client_body_temp;
    proxy_temp_path proxy_temp;
    fastcgi_temp_path fastcgi_temp;
    uwsgi_temp_path uwsgi_temp;
    scgi_temp_path scgi_temp;
    keepalive_requests 10000000;
    server {
        listen 127.0.0.1:19182;
        location ~ ^/posts/([0-9]+)\$ { add_header Cache-Control "public, max-age=3600"; return 200 '{"id":\$1,"title":"Post number \$1","body":"$(printf 'x%.0s' $(seq 120))","userId":7}'; }
    }
}
NGINX
    nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" 3>&- &
    pids+=("$!")
    origin="{ upstream: { url: http://127.0.0.1:19182 } }"
fi
cat > "$work/veneer.yaml" <<YAML
version: 1
state_dir: $work/state
environments:
  without:
    listen: 127.0.0.1:19180
    origin: $origin
  with:
    extends: without
    listen: 127.0.0.1:19181
    chain:
      - cache: { ttl: 1h, max_entries: 1000000, max_bytes: 1GB }
YAML

for environment in without with; do
    VENEER_THREADS=$threads "$binary" run --config "$work/veneer.yaml" -e "$environment" >/dev/null 2>"$work/$environment.log" &
    pids+=("$!")
done
# Seeding N posts takes a while on a busy machine: wait for both listeners (30 s at most).
for port in 19180 19181 $([[ "$heads" == nginx ]] && echo 19182); do
    for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
done

python3 - "$count" "$conns" <<'PY'
import http.client, sys, threading
n, conns = int(sys.argv[1]), int(sys.argv[2])
def fill(port, first):
    connection = http.client.HTTPConnection("127.0.0.1", port)
    for i in range(first, n + 1, conns):
        connection.request("GET", f"/posts/{i}")
        response = connection.getresponse()
        response.read()
        assert response.status == 200, response.status
for port in (19180, 19181):
    workers = [threading.Thread(target=fill, args=(port, first)) for first in range(1, conns + 1)]
    for worker in workers: worker.start()
    for worker in workers: worker.join()
PY

rss() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
without=$(rss "${pids[-2]}")
with=$(rss "${pids[-1]}")
entries=$(curl -s http://127.0.0.1:19181/-/metrics | awk '/^veneer_cache_entries/ { print int($2) }')
bytes=$(curl -s http://127.0.0.1:19181/-/metrics | awk '/^veneer_cache_bytes/ { print int($2) }')
echo "origin: $heads; event loops: $threads; filled by $conns connection(s)"
echo "posts: $count; cached entries: $entries; bytes the cache accounts for: $bytes"
echo "RSS without cache: $((without / 1024)) MB; with cache: $((with / 1024)) MB"
echo "memory per cached entry: $(( (with - without) * 1024 / entries )) bytes (accounted: $(( bytes / entries )) bytes)"
