#!/usr/bin/env python3
"""How the cost grows: the conns, cores, sizes, chain and entries scenarios of bench/run.sh.

Each scenario puts Veneer beside its nginx counterpart in the same run, one worker or one
event loop each unless the scenario varies it, in front of one local nginx origin:

    origin        nginx: /posts/{id} for any id, made by `return` (about 200 B of JSON)   19400
                  nginx: static /posts/1 (200 B), /posts/2 (64 KB), /posts/3 (1 MB)         19401
                  both with `Cache-Control: public, max-age=3600`
    nginx-pass    nginx proxy_pass, keepalive upstream (the harness's nginx-pass)   19402 / 19412 (static)
    nginx-cache   nginx proxy_cache, TTL 1h (the harness's nginx-cache)             19403 / 19413 (static)
    veneer-pass   upstream origin, no decorator                                     19404 / 19414 (static)
    veneer-cache  upstream origin, cache (1h, 64MB, max_entry_size 2MB)             19405 / 19415 (static)
    veneer-chain4, veneer-chain8  (the chain scenario)                              19406 / 19407
    veneer-big, nginx-big  (the entries scenario: 2M entries, 2 GB)                 19408 / 19409

Scenarios (each target's run: wrk after a 1 s warm-up; CPU is utime + stime of the target's
processes from /proc, per request; resident memory is VmRSS summed over them):

    conns    64, 1,000 and 10,000 keep-alive connections, hits (veneer-cache, nginx-cache, ids
             1..100, warm) and pass-through (veneer-pass, nginx-pass): req/s, p99, and resident
             memory per connection (the peak during the run less the idle figure, per connection)
    cores    one and two event loops (`veneer run --threads N`) against nginx with
             worker_processes 1 and 2, hits and pass-through, wrk with two threads
    sizes    answers of 200 B, 64 KB and 1 MB, hits and pass-through: MB/s
    chain    zero, four and eight decorators in front of the upstream, against nginx-pass:
             CPU per request, and per decorator ((CPU with n - CPU with none) / n). The
             decorators act on every request and leave the answer as it is: latency_log (one
             JSON line per request to a file), block_list (static deny rules that match no
             benchmark request), fault (abort at 0 percent), latency_log (a second label);
             eight is those four twice
    entries  10,000, 100,000 and 1,000,000 cached entries (ids 1..N through a fresh process
             each time): resident memory per entry, and the hit's req/s, p99 and CPU with ids
             drawn from 1..N; nginx-cache (its cache files on a private tmpfs when one can be
             mounted) up to --nginx-entries entries (100,000: a million files take 4 GB)

    bench/scale.py --binary .build/release/veneer --scenarios conns,cores,sizes,chain,entries
                   [--duration 5] [--rounds 1] [--dry-run]

--dry-run writes every configuration, checks Veneer's with `veneer check --all` and nginx's
with `nginx -t`, and starts nothing.
"""
import argparse
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from large import children, cpu_seconds, port_free, resident_mib  # bench/large.py, beside this file

SCENARIOS = ("conns", "cores", "sizes", "chain", "entries")
PORTS = {
    "origin": 19400, "origin-static": 19401,
    "nginx-pass": 19402, "nginx-cache": 19403, "veneer-pass": 19404, "veneer-cache": 19405,
    "nginx-pass-static": 19412, "nginx-cache-static": 19413, "veneer-pass-static": 19414, "veneer-cache-static": 19415,
    "veneer-chain4": 19406, "veneer-chain8": 19407, "veneer-big": 19408, "nginx-big": 19409,
}
SIZES = {"200 B": ("/posts/1", 200), "64 KB": ("/posts/2", 64 << 10), "1 MB": ("/posts/3", 1 << 20)}
PEER = {"veneer-pass": "nginx-pass", "veneer-cache": "nginx-cache"}
DESCRIPTORS = 65536

NGINX_COMMON = """daemon off;
worker_rlimit_nofile {descriptors};
events {{ worker_connections {connections}; }}
http {{
    access_log off;
    server_tokens off;
    default_type application/json;
    client_body_temp_path client_body_temp;
    proxy_temp_path proxy_temp;
    fastcgi_temp_path fastcgi_temp;
    uwsgi_temp_path uwsgi_temp;
    scgi_temp_path scgi_temp;
    keepalive_requests 10000000;
    keepalive_timeout 120s;
    tcp_nodelay on;
{body}
}}
"""
UPSTREAMS = """
    upstream origin {{ server 127.0.0.1:{origin}; keepalive 128; keepalive_requests 10000000; keepalive_timeout 120s; }}
    upstream origin_static {{ server 127.0.0.1:{static}; keepalive 128; keepalive_requests 10000000; keepalive_timeout 120s; }}
    proxy_http_version 1.1;
    proxy_set_header Connection "";
"""
BODY = '{"id":$1,"title":"Post number $1","body":"' + "x" * 120 + '","userId":7}'

LUA = r"""
-- hits and pass-through: GET /posts/{id}, id uniform in 1..N (args: N, or PATH for one URL).
local reqs, n = {}, 1
function init(args)
  local count = tonumber(args[1])
  math.randomseed(1234 + (tid or 0))
  if count then
    n = count
    if n <= 200000 then for i = 1, n do reqs[i] = wrk.format("GET", "/posts/" .. i) end end
  else
    reqs[1] = wrk.format("GET", args[1])
  end
end
local next_tid = 1
function setup(thread) thread:set("tid", next_tid); next_tid = next_tid + 1 end
function request()
  if n > 200000 then return wrk.format("GET", "/posts/" .. math.random(n)) end
  return reqs[math.random(n)]
end
function done(s, lat, _)
  local e = s.errors
  io.write(string.format('BENCH_JSON {"requests":%d,"duration_us":%d,"bytes":%d,"errors":%d,"non2xx":%d,'
    .. '"p50_us":%d,"p99_us":%d}\n', s.requests, s.duration, s.bytes, e.connect + e.read + e.write + e.timeout,
    e.status, lat:percentile(50), lat:percentile(99)))
end
"""
FILL_LUA = r"""
-- fills a cache: GET /posts/1 .. /posts/N in order, then stops and writes a marker file
-- (wrk itself runs for its whole duration; bench/scale.py interrupts it) (args: N MARKER).
local n, sent, seen, marker = 0, 0, 0, nil
function init(args) n = tonumber(args[1]); marker = args[2] end
function request()
  sent = sent + 1
  return wrk.format("GET", "/posts/" .. ((sent - 1) % n + 1))
end
function response(status, headers, body)
  seen = seen + 1
  if seen == n then
    io.open(marker, "w"):close()
    wrk.thread:stop()
  end
end
"""


def resident_kib(pids):
    return resident_mib(pids) * 1024


def load_average():
    with open("/proc/loadavg") as handle:
        return handle.read().split()[0]


class Bench:
    def __init__(self, options):
        self.options = options
        self.binary = options.binary
        self.work = tempfile.mkdtemp(prefix="veneer-scale.")
        os.chmod(self.work, 0o755)
        self.processes = {}
        self.loads = []

    # -- files ------------------------------------------------------------------------------

    def nginx_conf(self, name, body, connections=None):
        directory = f"{self.work}/{name}"
        os.makedirs(directory, exist_ok=True)
        with open(f"{directory}/nginx.conf", "w") as conf:
            conf.write(f"# {name}: written by bench/scale.py\npid nginx.pid;\nerror_log error.log warn;\n")
            # Each client connection and each upstream one takes a descriptor of the worker.
            connections = connections or min(20000, DESCRIPTORS - 64)
            conf.write(NGINX_COMMON.format(descriptors=DESCRIPTORS, connections=connections, body=body))
        return directory

    def write_files(self):
        work = self.work
        static = f"{work}/static/posts"
        os.makedirs(static)
        chunk = b'{"id":1,"body":"' + b"x" * 1000 + b'"}\n'
        for path, size in SIZES.values():
            with open(f"{work}/static{path}", "wb") as handle:
                handle.write((chunk * (size // len(chunk) + 1))[:size])
        for dirpath, dirnames, filenames in os.walk(f"{work}/static"):
            os.chmod(dirpath, 0o755)
            for name in filenames:
                os.chmod(f"{dirpath}/{name}", 0o644)
        self.nginx_conf("origin", f"""
    sendfile on;
    server {{
        listen 127.0.0.1:{PORTS['origin']} backlog=4096;
        location ~ ^/posts/([0-9]+)$ {{ add_header Cache-Control "public, max-age=3600"; return 200 '{BODY}'; }}
    }}
    server {{
        listen 127.0.0.1:{PORTS['origin-static']} backlog=4096;
        root {work}/static;
        add_header Cache-Control "public, max-age=3600";
    }}""")
        upstreams = UPSTREAMS.format(origin=PORTS["origin"], static=PORTS["origin-static"])
        self.nginx_conf("nginx-pass", upstreams + f"""
    server {{ listen 127.0.0.1:{PORTS['nginx-pass']} backlog=4096; location / {{ proxy_pass http://origin; }} }}
    server {{ listen 127.0.0.1:{PORTS['nginx-pass-static']} backlog=4096; location / {{ proxy_pass http://origin_static; }} }}""")
        cache = """
    proxy_cache_path cache levels=1:2 keys_zone=posts:{zone} max_size={size} inactive=2h use_temp_path=off;
    proxy_cache posts;
    proxy_cache_valid 200 1h;
    proxy_cache_lock on;
    add_header X-Cache $upstream_cache_status;"""
        self.nginx_conf("nginx-cache", upstreams + cache.format(zone="32m", size="512m") + f"""
    server {{ listen 127.0.0.1:{PORTS['nginx-cache']} backlog=4096; location / {{ proxy_pass http://origin; }} }}
    server {{ listen 127.0.0.1:{PORTS['nginx-cache-static']} backlog=4096; location / {{ proxy_pass http://origin_static; }} }}""")
        self.nginx_conf("nginx-big", upstreams + cache.format(zone="256m", size="8g") + f"""
    server {{ listen 127.0.0.1:{PORTS['nginx-big']} backlog=4096; location / {{ proxy_pass http://origin; }} }}""")
        deny = "{ clients: [203.0.113.0/24], headers: { X-Account-Id: [\"4242\"] }, methods: [DELETE], routes: [/posts/0] }"
        four = [f'      - latency_log: {{ file: "{work}/chain/outer-%d.log" }}',
                f"      - block_list: {{ deny: {deny} }}",
                "      - fault: { abort: { status: 503, percent: 0 } }",
                f'      - latency_log: {{ file: "{work}/chain/inner-%d.log", label: inner }}']
        os.makedirs(f"{work}/chain")
        chain4 = "\n".join(line.replace("%d", "1") for line in four)
        chain8 = chain4 + "\n" + "\n".join(line.replace("%d", "2") for line in four)
        with open(f"{work}/veneer.yaml", "w") as conf:
            conf.write(f"""# bench/scale.py: Veneer's side of the scaling scenarios.
version: 1
state_dir: {work}/state
environments:
  pass:
    listen: 127.0.0.1:{PORTS['veneer-pass']}
    origin: {{ upstream: {{ url: "http://127.0.0.1:{PORTS['origin']}" }} }}
    limits: {{ connections: 20000 }}
  cache:
    extends: pass
    listen: 127.0.0.1:{PORTS['veneer-cache']}
    chain:
      - cache: {{ ttl: 1h, max_entries: 100000, max_bytes: 64MB, max_entry_size: 2MB }}
  pass-static:
    extends: pass
    listen: 127.0.0.1:{PORTS['veneer-pass-static']}
    origin: {{ upstream: {{ url: "http://127.0.0.1:{PORTS['origin-static']}" }} }}
  cache-static:
    extends: cache
    listen: 127.0.0.1:{PORTS['veneer-cache-static']}
    origin: {{ upstream: {{ url: "http://127.0.0.1:{PORTS['origin-static']}" }} }}
  chain4:
    extends: pass
    listen: 127.0.0.1:{PORTS['veneer-chain4']}
    chain:
{chain4}
  chain8:
    extends: pass
    listen: 127.0.0.1:{PORTS['veneer-chain8']}
    chain:
{chain8}
  big:
    extends: pass
    listen: 127.0.0.1:{PORTS['veneer-big']}
    chain:
      - cache: {{ ttl: 1h, max_entries: 2000000, max_bytes: 2GB }}
""")
        with open(f"{work}/posts.lua", "w") as script:
            script.write(LUA)
        with open(f"{work}/fill.lua", "w") as script:
            script.write(FILL_LUA)

    def check(self):
        """veneer check on Veneer's file, nginx -t on each of nginx's; False on any failure."""
        good = True
        out = subprocess.run([self.binary, "check", "--config", f"{self.work}/veneer.yaml", "--all"],
                             capture_output=True, text=True)
        print(f"veneer check: {(out.stdout + out.stderr).strip()}")
        good &= out.returncode == 0
        if shutil.which("nginx") is None:
            print("nginx -t: skipped (no nginx; sudo ../shared/bench/peers/setup.sh)")
            return good
        for name in ("origin", "nginx-pass", "nginx-cache", "nginx-big"):
            directory = f"{self.work}/{name}"
            os.makedirs(f"{directory}/cache", exist_ok=True)
            out = subprocess.run(["nginx", "-t", "-q", "-p", f"{directory}/", "-c", f"{directory}/nginx.conf",
                                  "-e", f"{directory}/error.log", "-g", "worker_processes 1;"], capture_output=True, text=True)
            print(f"nginx -t {name}: {'ok' if out.returncode == 0 else out.stderr.strip()}")
            good &= out.returncode == 0
        return good

    # -- processes --------------------------------------------------------------------------

    def start_nginx(self, name, workers=1, tmpfs=False):
        directory = f"{self.work}/{name}"
        shutil.rmtree(f"{directory}/cache", ignore_errors=True)
        os.makedirs(f"{directory}/cache", mode=0o777)
        os.chmod(f"{directory}/cache", 0o777)
        command = ["nginx", "-p", f"{directory}/", "-c", f"{directory}/nginx.conf", "-e", "error.log",
                   "-g", f"worker_processes {workers};"]
        if tmpfs and self.tmpfs_works():
            command = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                       'mount -t tmpfs -o size=6g,mode=0777 bench-scale-cache "$1" && shift && exec "$@"', "sh",
                       f"{directory}/cache"] + command
        self.processes[name] = subprocess.Popen(command)
        return name

    def tmpfs_works(self):
        if not hasattr(self, "_tmpfs"):
            probe = f"{self.work}/tmpfs-probe"
            os.makedirs(probe, exist_ok=True)
            self._tmpfs = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                                          'mount -t tmpfs -o size=1m probe "$1"', "sh", probe],
                                         capture_output=True).returncode == 0
            if not self._tmpfs:
                print("bench scale: cannot mount a private tmpfs; nginx-big keeps its cache on disk", file=sys.stderr)
        return self._tmpfs

    def start_veneer(self, name, environment, threads=1):
        self.processes[name] = subprocess.Popen(
            [self.binary, "run", "--config", f"{self.work}/veneer.yaml", "-e", environment, "--threads", str(threads),
             "--log-level", "warning"], stdout=subprocess.DEVNULL, stderr=open(f"{self.work}/{name}.log", "a"))
        return name

    def wait_ports(self, *names, seconds=15.0):
        deadline = time.monotonic() + seconds
        for name in names:
            while port_free(PORTS[name]):
                for process_name, process in self.processes.items():
                    if process.poll() is not None:
                        raise SystemExit(f"bench scale: {process_name} exited ({process.returncode})")
                if time.monotonic() > deadline:
                    raise SystemExit(f"bench scale: nothing listens on {PORTS[name]} ({name})")
                time.sleep(0.05)

    def stop(self, *names):
        # The origin last: proxies that outlive it log every request they could not forward.
        for name in names or reversed(list(self.processes)):
            process = self.processes.pop(name, None)
            if process is None:
                continue
            # nginx (or unshare exec'd into it) quits on SIGQUIT after its connections; Veneer on SIGTERM.
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def pids(self, name):
        return children(self.processes[name].pid)

    # -- load -------------------------------------------------------------------------------

    def wrk(self, port, connections, duration, threads=1, args=("100",), script="posts.lua"):
        command = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration}s", "--timeout", "10s", "-s",
                   f"{self.work}/{script}", f"http://127.0.0.1:{port}", "--"] + list(args)
        out = subprocess.run(command, capture_output=True, text=True)
        found = re.search(r"BENCH_JSON (\{.*\})", out.stdout)
        if not found:
            raise SystemExit(f"bench scale: wrk gave no result: {out.stdout}{out.stderr}")
        result = json.loads(found.group(1))
        seconds = result["duration_us"] / 1e6
        result["rps"] = result["requests"] / seconds if seconds else 0
        result["mbps"] = result["bytes"] / seconds / (1 << 20) if seconds else 0
        return result

    def measure(self, name, port, connections, threads=1, args=("100",)):
        """One run after a warm-up: wrk's figures, CPU µs per request, idle and peak resident KiB."""
        duration = self.options.duration
        if connections >= 5000:
            # wrk opens every connection at its start, more at once than a listen backlog holds:
            # the first seconds go to connecting, so a run that many takes twice as long.
            duration *= 2
        self.wrk(port, connections, 2 if connections >= 5000 else 1, threads, args)
        time.sleep(0.5)
        pids = self.pids(name)
        idle = resident_kib(pids)
        peak = [idle]
        running = threading.Event()
        running.set()

        def sample():
            while running.is_set():
                peak[0] = max(peak[0], resident_kib(pids))
                time.sleep(0.1)

        sampler = threading.Thread(target=sample)
        sampler.start()
        before = cpu_seconds(pids)
        try:
            result = self.wrk(port, connections, duration, threads, args)
        finally:
            running.clear()
            sampler.join()
        cpu = cpu_seconds(pids) - before
        self.loads.append(float(load_average()))
        result.update(cpu_us=cpu / result["requests"] * 1e6 if result["requests"] else 0, idle_kib=idle, peak_kib=peak[0])
        print(f"  {name} c={connections} t={threads} {' '.join(args)}: {result['rps']:.0f} req/s, {result['mbps']:.1f} MB/s, "
              f"p99 {result['p99_us'] / 1000:.2f} ms, {result['cpu_us']:.1f} µs CPU/req, RSS {idle / 1024:.1f} → "
              f"{peak[0] / 1024:.1f} MiB, errors {result['errors'] + result['non2xx']}", flush=True)
        return result

    def warm(self, port, paths):
        for path in paths:
            for _ in range(2):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
                    answer.read()

    def paired(self, rows, key="rps"):
        """Median over rounds of Veneer's figure over nginx's in the same round."""
        ratios = [mine[key] / theirs[key] for mine, theirs in rows if theirs[key]]
        return statistics.median(ratios) if ratios else float("nan")

    def rounds(self, order, run):
        """run(target) for every target, rounds alternating the order: {target: [result per round]}."""
        results = {}
        for round_index in range(self.options.rounds):
            turn = order if round_index % 2 == 0 else list(reversed(order))
            for target in turn:
                results.setdefault(target, []).append(run(target))
        return results

    def base(self, *names):
        self.start_nginx("origin")
        self.wait_ports("origin", "origin-static")
        for name in names:
            if name.startswith("nginx"):
                self.start_nginx(name)
            else:
                self.start_veneer(name, name.removeprefix("veneer-"))
        self.wait_ports(*names)

    # -- scenarios --------------------------------------------------------------------------

    def conns(self):
        names = ["nginx-pass", "nginx-cache", "veneer-pass", "veneer-cache"]
        self.base(*names)
        for name in names:
            self.warm(PORTS[name], [f"/posts/{i}" for i in range(1, 101)])
        # What a connection costs is measured against the process before any run: a run leaves
        # its memory with the allocator, and the next one's idle figure would hide it.
        time.sleep(0.5)
        started = {name: resident_kib(self.pids(name)) for name in names}
        table = []
        for connections in self.options.connections:
            for kind, (mine, theirs) in (("hits", ("veneer-cache", "nginx-cache")), ("pass", ("veneer-pass", "nginx-pass"))):
                results = self.rounds([theirs, mine], lambda target: self.measure(target, PORTS[target], connections))
                table.append((connections, kind, mine, theirs, results))
        self.stop()
        print(f"\n### conns: concurrent keep-alive connections (one event loop / one worker; {self.summary()})\n")
        print("| connections | requests | Veneer req/s | vs nginx | p99 Veneer / nginx ms | CPU µs/req Veneer / nginx "
              "| KiB per connection Veneer / nginx | errors |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|")
        for connections, kind, mine, theirs, results in table:
            a, b = results[mine], results[theirs]
            per = lambda name, rows: statistics.median(max(0, r["peak_kib"] - started[name]) / connections for r in rows)
            print(f"| {connections:,} | {kind} | {med(a, 'rps'):.0f} | **{self.paired(zip(a, b)):.2f}×** | "
                  f"{med(a, 'p99_us') / 1000:.2f} / {med(b, 'p99_us') / 1000:.2f} | {med(a, 'cpu_us'):.1f} / {med(b, 'cpu_us'):.1f} | "
                  f"{per(mine, a):.1f} / {per(theirs, b):.1f} | {errors(a)} / {errors(b)} |")

    def cores(self):
        table = []
        for count in (1, 2):
            self.start_nginx("origin", workers=2)
            self.wait_ports("origin")
            for name in ("nginx-pass", "nginx-cache"):
                self.start_nginx(name, workers=count)
            for name in ("veneer-pass", "veneer-cache"):
                self.start_veneer(name, name.removeprefix("veneer-"), threads=count)
            self.wait_ports("nginx-pass", "nginx-cache", "veneer-pass", "veneer-cache")
            for name in ("nginx-cache", "veneer-cache"):
                self.warm(PORTS[name], [f"/posts/{i}" for i in range(1, 101)])
            for kind, (mine, theirs) in (("hits", ("veneer-cache", "nginx-cache")), ("pass", ("veneer-pass", "nginx-pass"))):
                results = self.rounds([theirs, mine], lambda target: self.measure(target, PORTS[target], 64, threads=2))
                table.append((count, kind, mine, theirs, results))
            self.stop()
        print(f"\n### cores: event loops / nginx workers (wrk: 2 threads, 64 connections; {self.summary()})\n")
        print("| loops / workers | requests | Veneer req/s | nginx req/s | vs nginx | CPU µs/req Veneer / nginx | p99 Veneer / nginx ms |")
        print("|---:|---|---:|---:|---:|---:|---:|")
        for count, kind, mine, theirs, results in table:
            a, b = results[mine], results[theirs]
            print(f"| {count} | {kind} | {med(a, 'rps'):.0f} | {med(b, 'rps'):.0f} | **{self.paired(zip(a, b)):.2f}×** | "
                  f"{med(a, 'cpu_us'):.1f} / {med(b, 'cpu_us'):.1f} | {med(a, 'p99_us') / 1000:.2f} / {med(b, 'p99_us') / 1000:.2f} |")

    def sizes(self):
        names = ["nginx-pass", "nginx-cache", "veneer-pass", "veneer-cache"]
        self.start_nginx("origin")
        for name in names:
            self.start_nginx(name) if name.startswith("nginx") else self.start_veneer(name, name.removeprefix("veneer-") + "-static")
        self.wait_ports("origin-static", *(f"{name}-static" for name in names))
        for name in names:
            for path, size in SIZES.values():
                for _ in range(2):
                    with urllib.request.urlopen(f"http://127.0.0.1:{PORTS[name + '-static']}{path}", timeout=10) as answer:
                        if len(answer.read()) != size:
                            raise SystemExit(f"bench scale: {name}{path} is not {size} bytes long")
        table = []
        for label, (path, _) in SIZES.items():
            for kind, (mine, theirs) in (("hits", ("veneer-cache", "nginx-cache")), ("pass", ("veneer-pass", "nginx-pass"))):
                results = self.rounds([theirs, mine], lambda target: self.measure(
                    target, PORTS[target + "-static"], self.options.size_connections, args=(path,)))
                table.append((label, kind, mine, theirs, results))
        self.stop()
        print(f"\n### sizes: answer sizes ({self.options.size_connections} connections; {self.summary()})\n")
        print("| size | requests | Veneer MB/s | nginx MB/s | vs nginx | CPU µs/req Veneer / nginx | p99 Veneer / nginx ms |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for label, kind, mine, theirs, results in table:
            a, b = results[mine], results[theirs]
            print(f"| {label} | {kind} | {med(a, 'mbps'):.1f} | {med(b, 'mbps'):.1f} | **{self.paired(zip(a, b), 'mbps'):.2f}×** | "
                  f"{med(a, 'cpu_us'):.1f} / {med(b, 'cpu_us'):.1f} | {med(a, 'p99_us') / 1000:.2f} / {med(b, 'p99_us') / 1000:.2f} |")

    def chain(self):
        names = ["nginx-pass", "veneer-pass", "veneer-chain4", "veneer-chain8"]
        self.base(*names)
        results = self.rounds(names, lambda target: self.measure(target, PORTS[target], 64))
        self.stop()
        zero = med(results["veneer-pass"], "cpu_us")
        print(f"\n### chain: decorators in front of the upstream (pass-through, 64 connections; {self.summary()})\n")
        print("| decorators | req/s | vs nginx-pass | CPU µs/req | CPU µs per decorator | p99 ms |")
        print("|---:|---:|---:|---:|---:|---:|")
        for count, name in ((0, "veneer-pass"), (4, "veneer-chain4"), (8, "veneer-chain8")):
            rows = results[name]
            cpu = med(rows, "cpu_us")
            per = f"{(cpu - zero) / count:.2f}" if count else "—"
            print(f"| {count} | {med(rows, 'rps'):.0f} | **{self.paired(zip(rows, results['nginx-pass'])):.2f}×** | {cpu:.1f} | "
                  f"{per} | {med(rows, 'p99_us') / 1000:.2f} |")
        print(f"| nginx-pass | {med(results['nginx-pass'], 'rps'):.0f} | 1.00× | {med(results['nginx-pass'], 'cpu_us'):.1f} | | "
              f"{med(results['nginx-pass'], 'p99_us') / 1000:.2f} |")

    def fill(self, name, count):
        """Fetches ids 1..count through the target once each (wrk, 16 connections, in order)."""
        started = time.monotonic()
        marker = f"{self.work}/filled"
        if os.path.exists(marker):
            os.remove(marker)
        fill = subprocess.Popen(["wrk", "-t1", "-c16", "-d600s", "--timeout", "10s", "-s", f"{self.work}/fill.lua",
                                 f"http://127.0.0.1:{PORTS[name]}", "--", str(count), marker], stdout=subprocess.DEVNULL)
        while not os.path.exists(marker) and fill.poll() is None:
            time.sleep(0.1)
        fill.send_signal(signal.SIGINT)
        fill.wait()
        return time.monotonic() - started

    def entries(self):
        self.start_nginx("origin")
        self.wait_ports("origin")
        table = []
        for count in self.options.entries:
            targets = ["veneer-big"] + (["nginx-big"] if count <= self.options.nginx_entries else [])
            figures = {}
            for target in targets:
                self.start_nginx(target, tmpfs=True) if target.startswith("nginx") else self.start_veneer(target, "big")
                self.wait_ports(target)
                self.warm(PORTS[target], ["/posts/1"])
                time.sleep(0.5)
                before = resident_kib(self.pids(target))
                seconds = self.fill(target, count)
                time.sleep(1)
                after = resident_kib(self.pids(target))
                stored, cache_bytes = None, 0
                if target.startswith("veneer"):
                    with urllib.request.urlopen(f"http://127.0.0.1:{PORTS[target]}/-/metrics", timeout=10) as answer:
                        metrics = answer.read().decode()
                    stored = int(float(re.search(r"^veneer_cache_entries(?:\{[^}]*\})? (\S+)", metrics, re.M).group(1)))
                else:
                    # The cache files live on a tmpfs only nginx's mount namespace sees.
                    counted = subprocess.run(["nsenter", "-t", str(self.processes[target].pid), "-m", "sh", "-c",
                                              'find "$1" -type f | wc -l; du -sk "$1" | cut -f1', "sh",
                                              f"{self.work}/{target}/cache"], capture_output=True, text=True).stdout.split()
                    stored, cache_bytes = (int(counted[0]), int(counted[1])) if len(counted) == 2 else (0, 0)
                print(f"  {target}: {count:,} fetched in {seconds:.0f} s, {stored:,} stored, RSS {before / 1024:.1f} → "
                      f"{after / 1024:.1f} MiB" + (f", cache files {cache_bytes / 1024:.0f} MiB" if cache_bytes else ""), flush=True)
                result = self.measure(target, PORTS[target], 64, args=(str(count),))
                per_entry = (after - before) * 1024 / stored if stored else float("nan")
                figures[target] = (result, per_entry, stored, cache_bytes * 1024 / stored if stored and cache_bytes else 0)
                self.stop(target)
            table.append((count, figures))
        self.stop()
        print(f"\n### entries: cached entries, hits on ids drawn from all of them (64 connections; {self.summary()})\n")
        print("| entries | Veneer req/s | vs nginx-cache | CPU µs/req Veneer / nginx | p99 Veneer / nginx ms "
              "| resident B per entry Veneer / nginx | nginx cache files B per entry |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for count, figures in table:
            mine, per_entry, _, _ = figures["veneer-big"]
            theirs = figures.get("nginx-big")
            if theirs:
                print(f"| {count:,} | {mine['rps']:.0f} | **{mine['rps'] / theirs[0]['rps']:.2f}×** | {mine['cpu_us']:.1f} / "
                      f"{theirs[0]['cpu_us']:.1f} | {mine['p99_us'] / 1000:.2f} / {theirs[0]['p99_us'] / 1000:.2f} | "
                      f"{per_entry:.0f} / {theirs[1]:.0f} | {theirs[3]:.0f} |")
            else:
                print(f"| {count:,} | {mine['rps']:.0f} | — | {mine['cpu_us']:.1f} / — | {mine['p99_us'] / 1000:.2f} / — | "
                      f"{per_entry:.0f} / — | — |")

    def summary(self):
        loads = self.loads or [float(load_average())]
        text = f"1-minute load {min(loads):.1f} to {max(loads):.1f}, {self.options.rounds} round(s) of {self.options.duration} s"
        self.loads = []
        return text


def med(rows, key):
    return statistics.median(row[key] for row in rows)


def errors(rows):
    return sum(row["errors"] + row["non2xx"] for row in rows)


def numbers(text):
    return [int(item.replace("_", "")) for item in text.split(",") if item]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--connections", type=numbers, default=[64, 1000, 10000], help="conns: the counts")
    parser.add_argument("--size-connections", type=int, default=16, help="sizes: connections")
    parser.add_argument("--entries", type=numbers, default=[10000, 100000, 1000000], help="entries: the counts")
    parser.add_argument("--nginx-entries", type=int, default=100000, help="entries: nginx-cache up to this count")
    parser.add_argument("--dry-run", action="store_true", help="write and check every configuration, start nothing")
    options = parser.parse_args()
    wanted = [name for name in options.scenarios.split(",") if name]
    unknown = [name for name in wanted if name not in SCENARIOS]
    if unknown:
        raise SystemExit(f"bench scale: unknown scenario {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")

    # wrk, nginx and Veneer inherit it: 10,000 connections take a descriptor each on both sides
    # of a proxy, and its upstream connections more.
    global DESCRIPTORS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, DESCRIPTORS), max(hard, DESCRIPTORS)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        DESCRIPTORS = hard
        if not options.dry_run:
            print(f"bench scale: descriptors limited to {hard} (no raising the hard limit here)", file=sys.stderr)
    bench = Bench(options)
    try:
        bench.write_files()
        if not bench.check():
            return 1
        if options.dry_run:
            print(f"bench scale: configurations of {', '.join(wanted)} checked; nothing started (--dry-run)")
            return 0
        busy = [name for name, port in PORTS.items() if not port_free(port)]
        if busy:
            raise SystemExit(f"bench scale: ports in use ({', '.join(busy)}); another run still up? nothing started")
        for name in wanted:
            print(f"\n## {name}", flush=True)
            getattr(bench, name)()
    finally:
        bench.stop()
        shutil.rmtree(bench.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
