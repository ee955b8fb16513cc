#!/usr/bin/env python3
"""The `large` scenario of bench/run.sh: large answers through Veneer and nginx, side by side.

One nginx origin serves two posts, /posts/1 (1 MB) and /posts/2 (15 MB), with
`Cache-Control: public, max-age=3600`. In front of it, each with one worker or one event loop:

    nginx-pass    nginx proxy_pass, keepalive upstream, nginx's default buffering   19302
    nginx-cache   nginx proxy_cache (TTL 1h, cache on disk under the work dir)      19303
    veneer-pass   upstream origin, no decorator                                     19304
    veneer-cache  upstream origin, cache (memory, max_entry_size 16MB)              19305

For each size and each target, rounds alternate the targets' order; each run is wrk (1 thread,
--connections, --duration s) after a 1 s warm-up: MB/s is what wrk received, CPU per MB is the
target's own CPU time (utime + stime of its processes, /proc) per MB served. Medians over rounds,
and the ratio to the nginx peer of the same kind (pass to nginx-pass, cache to nginx-cache).

Then the slow clients: 100 connections each ask for the 15 MB post and do not read. Resident
memory (VmRSS summed over the target's processes) is read after 3 s (peak), and again 10 s
after the clients have left (what the process gave back), for veneer-pass and nginx-pass.

    bench/large.py --binary .build/release/veneer [--rounds 3] [--duration 5] [--connections 8]
"""
import argparse
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

PORTS = {"origin": 19301, "nginx-pass": 19302, "nginx-cache": 19303, "veneer-pass": 19304, "veneer-cache": 19305}
SIZES = {"1MB": ("/posts/1", 1 << 20), "15MB": ("/posts/2", 15 << 20)}
PEER = {"veneer-pass": "nginx-pass", "veneer-cache": "nginx-cache"}


def port_free(port):
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def wait_port(port, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not port_free(port):
            return
        time.sleep(0.05)
    raise SystemExit(f"bench large: nothing listens on {port} after {seconds} s")


def children(pid):
    """pid and its descendants (nginx's master and workers)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        try:
            with open(f"/proc/{current}/task/{current}/children") as handle:
                queue += [int(child) for child in handle.read().split()]
        except OSError:
            pass
    return found


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


def resident_mib(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as handle:
                for line in handle:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


UNITS = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}


def wrk(url, connections, duration):
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--timeout", "30s", url],
                         capture_output=True, text=True, check=True).stdout
    transfer = re.search(r"Transfer/sec:\s+([\d.]+)(B|KB|MB|GB)", out)
    requests = re.search(r"Requests/sec:\s+([\d.]+)", out)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    bad = (int(errors.group(1)) if errors else 0) + (sum(map(int, socket_errors.groups())) if socket_errors else 0)
    return float(transfer.group(1)) * UNITS[transfer.group(2)] / (1 << 20), float(requests.group(1)), bad


def slow_clients(port, path, count=100):
    held = []
    for _ in range(count):
        client = socket.create_connection(("127.0.0.1", port))
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        held.append(client)
    return held


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--connections", type=int, default=8)
    options = parser.parse_args()
    for port in PORTS.values():
        if not port_free(port):
            raise SystemExit(f"bench large: port {port} is already in use; nothing started")

    work = tempfile.mkdtemp(prefix="veneer-large.")
    os.chmod(work, 0o755)
    os.makedirs(f"{work}/posts")
    for path, size in SIZES.values():
        chunk = (b'{"id":1,"body":"' + b"x" * 1000 + b'"}\n')
        with open(f"{work}{path}", "wb") as handle:
            handle.write((chunk * (size // len(chunk) + 1))[:size])
    os.chmod(f"{work}/posts", 0o755)
    for name in os.listdir(f"{work}/posts"):
        os.chmod(f"{work}/posts/{name}", 0o644)
    os.makedirs(f"{work}/cache")
    os.chmod(f"{work}/cache", 0o777)
    with open(f"{work}/nginx.conf", "w") as conf:
        conf.write(f"""
worker_processes 1; daemon off; error_log {work}/error.log; pid {work}/nginx-%s.pid;
events {{ worker_connections 4096; }}
http {{
  access_log off; sendfile on; tcp_nopush on; keepalive_requests 1000000;
  default_type application/json;
  proxy_temp_path {work}/proxy-temp; client_body_temp_path {work}/body-temp;
  fastcgi_temp_path {work}/fastcgi-temp; uwsgi_temp_path {work}/uwsgi-temp; scgi_temp_path {work}/scgi-temp;
  upstream origin {{ server 127.0.0.1:{PORTS['origin']}; keepalive 32; }}
  proxy_cache_path {work}/cache levels=1:2 keys_zone=large:10m max_size=1g inactive=1h use_temp_path=off;
  %s
}}
""")
    servers = {
        "origin": f"server {{ listen 127.0.0.1:{PORTS['origin']}; root {work}; add_header Cache-Control \"public, max-age=3600\"; }}",
        "nginx-pass": f"server {{ listen 127.0.0.1:{PORTS['nginx-pass']}; location / {{ proxy_pass http://origin; proxy_http_version 1.1; proxy_set_header Connection \"\"; }} }}",
        "nginx-cache": f"server {{ listen 127.0.0.1:{PORTS['nginx-cache']}; location / {{ proxy_pass http://origin; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_cache large; proxy_cache_valid 200 1h; }} }}",
    }
    template = open(f"{work}/nginx.conf").read()
    processes = {}
    try:
        for name, server in servers.items():
            with open(f"{work}/{name}.conf", "w") as conf:
                conf.write(template.replace("nginx-%s.pid", f"nginx-{name}.pid").replace("%s", server, 1))
            processes[name] = subprocess.Popen(["nginx", "-p", work, "-c", f"{work}/{name}.conf"])
        with open(f"{work}/veneer.yaml", "w") as conf:
            conf.write(f"""version: 1
state_dir: {work}/state
environments:
  pass:
    listen: 127.0.0.1:{PORTS['veneer-pass']}
    origin: {{ upstream: {{ url: "http://127.0.0.1:{PORTS['origin']}" }} }}
  cache:
    extends: pass
    listen: 127.0.0.1:{PORTS['veneer-cache']}
    chain:
      - cache: {{ ttl: 1h, max_entry_size: 16MB, max_bytes: 64MB }}
""")
        for environment in ("pass", "cache"):
            processes[f"veneer-{environment}"] = subprocess.Popen(
                [options.binary, "run", "--config", f"{work}/veneer.yaml", "-e", environment, "--threads", "1",
                 "--log-level", "warning"], stdout=subprocess.DEVNULL)
        for port in PORTS.values():
            wait_port(port)
        targets = ["nginx-pass", "nginx-cache", "veneer-pass", "veneer-cache"]
        for target in targets:  # warm the caches, check every answer whole
            for path, size in SIZES.values():
                for _ in range(2):
                    out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{size_download}",
                                          f"http://127.0.0.1:{PORTS[target]}{path}"], capture_output=True, text=True).stdout
                    if out != f"200 {size}":
                        raise SystemExit(f"bench large: {target}{path} answered {out!r}, not 200 with {size} bytes")

        results = {}
        for round_index in range(options.rounds):
            order = targets[round_index % len(targets):] + targets[:round_index % len(targets)]
            for label, (path, _) in SIZES.items():
                for target in order:
                    url = f"http://127.0.0.1:{PORTS[target]}{path}"
                    wrk(url, options.connections, 1)
                    pids = children(processes[target].pid)
                    before = cpu_seconds(pids)
                    mbps, rps, bad = wrk(url, options.connections, options.duration)
                    cpu = cpu_seconds(pids) - before
                    served = mbps * options.duration
                    results.setdefault((label, target), []).append((mbps, rps, cpu / served * 1e3 if served else 0, bad))
                    print(f"[round {round_index + 1}/{options.rounds}] {label} {target}: {mbps:.0f} MB/s, "
                          f"{rps:.0f} req/s, {cpu / served * 1e3 if served else 0:.2f} ms CPU per MB, errors {bad}", flush=True)

        print("\n### large: answers of 1 MB and 15 MB (medians over rounds)\n")
        print("| size | target | MB/s | vs nginx | req/s | CPU ms per MB | errors |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for label in SIZES:
            for target in targets:
                rows = results[(label, target)]
                mbps = statistics.median(row[0] for row in rows)
                peer = PEER.get(target)
                ratio = ""
                if peer:
                    ratios = [mine[0] / theirs[0] for mine, theirs in zip(rows, results[(label, peer)]) if theirs[0]]
                    ratio = f"**{statistics.median(ratios):.2f}×**"
                print(f"| {label} | {target} | {mbps:.0f} | {ratio} | {statistics.median(row[1] for row in rows):.0f} | "
                      f"{statistics.median(row[2] for row in rows):.2f} | {sum(row[3] for row in rows)} |")

        print("\n### large: 100 clients ask for the 15 MB post and do not read\n")
        print("| target | idle MiB | peak MiB (3 s in) | 10 s after they left MiB |")
        print("|---|---:|---:|---:|")
        figures = {}
        for target in ("nginx-pass", "veneer-pass"):
            pids = children(processes[target].pid)
            idle = resident_mib(pids)
            held = slow_clients(PORTS[target], SIZES["15MB"][0])
            time.sleep(3)
            peak = resident_mib(children(processes[target].pid))
            for client in held:
                client.close()
            time.sleep(10)
            after = resident_mib(children(processes[target].pid))
            figures[target] = (idle, peak, after)
            print(f"| {target} | {idle:.1f} | {peak:.1f} | {after:.1f} |")
        print(f"\nveneer-pass peak / nginx-pass peak: **{figures['veneer-pass'][1] / figures['nginx-pass'][1]:.2f}×**")
    finally:
        for process in processes.values():
            process.send_signal(signal.SIGTERM if process.args[0] != "nginx" else signal.SIGQUIT)
        for process in processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    sys.exit(main())
