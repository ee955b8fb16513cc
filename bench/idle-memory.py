#!/usr/bin/env python3
"""Idle resident memory of Veneer binaries, side by side in one run (README, "Installing").

Each round starts every binary in turn (alternating, so that the machine's state is shared),
`veneer run --threads 1` on an environment with an `upstream` origin (a small HTTP/1.1 origin
of this script's own) and a memory cache, and reads its memory twice:

  fresh    2 s after its listener accepts, no request served;
  served   2 s after 50 hits, 50 misses (unique URLs, fetched from the origin and stored) and
           50 admin requests (/-/health, /-/metrics, /-/ in turn), each kind on a keep-alive
           connection of its own: what an instance that has served and gone quiet holds.

--chain production runs the production chain of bench/run.sh instead (latency_log, cache,
block_list and auth_refresh, with bench/production.py's token endpoint), and adds 50 requests
that block_list refuses (403) to the served phase.

VmRSS, RssAnon and RssFile come from /proc/PID/status. The binary's file is read whole before
each start, so that every page of it is in the page cache (as for an installed binary that has
run before, or for a second instance): the kernel then maps the cached pages around each page
touched (fault-around, 64 KB), which is the figure that code layout changes. --sections also
counts the present pages of the binary's mappings per ELF section (/proc/PID/pagemap, root).

    bench/idle-memory.py main=/tmp/veneer-main new=.build/release/veneer --rounds 3 --sections
    bench/idle-memory.py main=/tmp/veneer-main new=.build/release/veneer --chain production
"""
import argparse
import atexit
import http.client
import http.server
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time


CONFIG = """version: 1
state_dir: {work}/state
environments:
  idle:
    listen: 127.0.0.1:0
    origin: {{ upstream: {{ url: "http://127.0.0.1:{origin_port}" }} }}
    chain:
      - cache: {{ ttl: 1h, max_entries: 10000, max_bytes: 64MB }}
  production:
    listen: 127.0.0.1:0
    origin: {{ upstream: {{ url: "http://127.0.0.1:{origin_port}" }} }}
    chain:
      - latency_log: {{ file: "{work}/latency.log", slow: 500ms }}
      - cache: {{ ttl: 1h, max_entries: 10000, max_bytes: 64MB }}
      - block_list:
          deny:
            clients: [203.0.113.0/24]
            headers: {{ X-Account-Id: ["4242"] }}
          learn: {{ status: 403, json: {{ error: account_blocked }} }}
      - auth_refresh:
          token_url: http://127.0.0.1:{token_port}/oauth/token
          client_id: veneer-idle
          client_secret_file: {work}/client-secret
          refresh_token_file: {work}/refresh-token
"""

# The environment of CONFIG that each --chain runs.
ENVIRONMENTS = {"cache": "idle", "production": "production"}


def write_config(work, origin_port, chain):
    """Writes CONFIG under `work`; for the production chain, also the client's secrets, and starts
    bench/production.py's token endpoint, returned (None for the cache chain) for the caller to end."""
    token_port = free_port()
    with open(os.path.join(work, "veneer.yaml"), "w") as f:
        f.write(CONFIG.format(work=work, origin_port=origin_port, token_port=token_port))
    if chain != "production":
        return None
    for name, value in (("client-secret", "idle-secret"), ("refresh-token", "idle-refresh")):
        descriptor = os.open(os.path.join(work, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(descriptor, (value + "\n").encode())
        os.close(descriptor)
    endpoint = subprocess.Popen(
        [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "production.py"), "token-endpoint",
         "--port", str(token_port), "--client-id", "veneer-idle", "--client-secret-file", os.path.join(work, "client-secret"),
         "--refresh-token-file", os.path.join(work, "refresh-token")], stderr=subprocess.DEVNULL)
    atexit.register(endpoint.terminate)
    wait_listening(token_port, time.time() + 30, endpoint)
    return endpoint


class Origin(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = (f'{{"path":"{self.path}","title":"post","body":"' + "x" * 120 + '"}').encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "max-age=3600")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                fields[key] = int(value.split()[0]) / 1024  # MiB
    return fields


def prepare_page_cache(path, mode):
    """Puts the binary's file in the same state in the page cache before each start, whatever
    wrote or read it last: its pages dropped (written back first), then, for "read", read whole
    again. How the pages came into the page cache matters: the kernel caches a file in folios of
    up to several hundred KB (large folios, ext4 since Linux 6.16) and maps the whole folio around
    a page touched, so the same binary idles larger when cached by a sequential read than by the
    faults of a process started with none of it cached ("cold"). Pages that another running
    process maps stay cached: run nothing else from the same file meanwhile."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        if mode == "read":
            while os.read(descriptor, 1 << 20):
                pass
    finally:
        os.close(descriptor)


def elf_sections(path):
    """(name, file offset, size) of the sections with contents in the file."""
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True, check=True).stdout
    sections = []
    for line in out.splitlines():
        line = line.strip()
        if not line.startswith("[") or line.startswith("[Nr]"):
            continue
        parts = line.split("]", 1)[1].split()
        if len(parts) < 6 or parts[1] == "NOBITS" or parts[1] == "NULL":
            continue
        sections.append((parts[0], int(parts[3], 16), int(parts[4], 16)))
    return sections


def present_by_section(pid, path, sections):
    """KiB present per section of the mappings of `path`, and per other mapped file / anonymous."""
    page = os.sysconf("SC_PAGE_SIZE")
    real = os.path.realpath(path)
    counts = {}
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/pagemap", "rb") as pagemap:
        for line in maps:
            parts = line.split()
            start, end = (int(x, 16) for x in parts[0].split("-"))
            offset = int(parts[2], 16)
            name = parts[5] if len(parts) > 5 else "[anon]"
            pagemap.seek(start // page * 8)
            data = pagemap.read((end - start) // page * 8)
            for i in range(len(data) // 8):
                entry = int.from_bytes(data[i * 8:i * 8 + 8], "little")
                if not entry >> 63 & 1:
                    continue
                if name == real:
                    file_offset = offset + i * page
                    key = "binary (no section)"
                    for section, sec_offset, size in sections:
                        if sec_offset <= file_offset < sec_offset + size or (
                                file_offset <= sec_offset < file_offset + page and size):
                            key = section
                            break
                    if not entry >> 61 & 1:  # not file-backed (a private copy): relocated data
                        key += " (copied)"
                else:
                    key = os.path.basename(name) if name.startswith("/") else "anonymous " + name
                counts[key] = counts.get(key, 0) + page // 1024
    return counts


def wait_listening(port, deadline, process=None):
    while time.time() < deadline:
        if process is not None and process.poll() is not None:
            raise SystemExit(f"idle-memory: the process exited ({process.returncode}) before listening")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"idle-memory: nothing listens on {port}")


def traffic(port, count, chain="cache"):
    kinds = {
        "hit": lambda i: "/posts/1",
        "miss": lambda i: f"/posts/{i + 2}",
        "admin": lambda i: ("/-/health", "/-/metrics", "/-/")[i % 3],
    }
    if chain == "production":
        # Paths not yet cached: the cache, before block_list in the chain, would answer the others.
        kinds["blocked"] = lambda i: f"/posts/{count + i + 2}"
    # One miss first, so that the 50 of "hit" are all hits.
    for kind, path in [("warm", lambda i: "/posts/1")] + list(kinds.items()):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers, expected = ({"X-Account-Id": "4242"}, 403) if kind == "blocked" else ({}, 200)
        for i in range(1 if kind == "warm" else count):
            connection.request("GET", path(i), headers=headers)
            response = connection.getresponse()
            response.read()
            if response.status != expected:
                raise SystemExit(f"idle-memory: {kind} {path(i)} answered {response.status}")
        connection.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("binaries", nargs="+", help="NAME=PATH")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--sections", action="store_true", help="present pages per ELF section (root)")
    parser.add_argument("--page-cache", choices=("cold", "read"), default="cold",
                        help="before each start: the binary dropped from the page cache (cold, as at the first "
                             "start after a boot), or dropped then read whole (read)")
    parser.add_argument("--chain", choices=sorted(ENVIRONMENTS), default="cache",
                        help="the environment run: a cache in front of an upstream, or the production chain")
    args = parser.parse_args()
    binaries = [(name, os.path.abspath(path)) for name, path in (b.split("=", 1) for b in args.binaries)]

    origin = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Origin)
    threading.Thread(target=origin.serve_forever, daemon=True).start()
    work = tempfile.mkdtemp(prefix="veneer-idle-memory.")
    config = os.path.join(work, "veneer.yaml")
    endpoint = write_config(work, origin.server_address[1], args.chain)
    results = {name: {"fresh": [], "served": []} for name, _ in binaries}
    breakdowns = {name: {} for name, _ in binaries}
    for round_ in range(args.rounds):
        for name, path in binaries:
            prepare_page_cache(path, args.page_cache)
            port = free_port()
            process = subprocess.Popen([path, "run", "--config", config, "-e", ENVIRONMENTS[args.chain], "--threads", "1",
                                        "--listen", f"127.0.0.1:{port}", "--log-level", "warning"],
                                       stdout=subprocess.DEVNULL)
            try:
                wait_listening(port, time.time() + 30, process)
                for phase in ("fresh", "served"):
                    if phase == "served":
                        traffic(port, args.requests, args.chain)
                    time.sleep(2)
                    results[name][phase].append(status(process.pid))
                    if args.sections and round_ == args.rounds - 1:
                        breakdowns[name][phase] = present_by_section(process.pid, path, elf_sections(path))
            finally:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=30)
            figures = "  ".join(f"{phase} {results[name][phase][-1]['VmRSS']:.1f}" for phase in ("fresh", "served"))
            print(f"round {round_ + 1} {name}: {figures} MiB (load {os.getloadavg()[0]:.1f})", flush=True)

    print(f"\nmedians of {args.rounds} rounds, {args.chain} chain, MiB (VmRSS = RssAnon + RssFile):")
    print("| binary | fresh VmRSS | anon | file | served VmRSS | anon | file |")
    print("|---|---|---|---|---|---|---|")
    for name, _ in binaries:
        cells = []
        for phase in ("fresh", "served"):
            for key in ("VmRSS", "RssAnon", "RssFile"):
                cells.append(f"{statistics.median(r[key] for r in results[name][phase]):.1f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    if args.sections:
        for name, _ in binaries:
            print(f"\n{name}, last round, KiB present per section or mapping (fresh / served):")
            fresh, served = breakdowns[name]["fresh"], breakdowns[name]["served"]
            for key in sorted(set(fresh) | set(served), key=lambda k: -served.get(k, 0)):
                if max(fresh.get(key, 0), served.get(key, 0)) >= 64:
                    print(f"  {key:40} {fresh.get(key, 0):8,} {served.get(key, 0):8,}")
    origin.shutdown()
    if endpoint is not None:
        endpoint.terminate()
        endpoint.wait()
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    sys.exit(main())
