#!/usr/bin/env python3
"""The production scenario of bench/run.sh: its token endpoint, its preflight and its report.
Standard library only; every server here listens on 127.0.0.1.

  production.py token-endpoint --port P --client-id ID --client-secret-file F --refresh-token-file F ...
      An OAuth 2.0 token endpoint (POST /oauth/token) for the refresh_token grant (RFC 6749 §6):
      checks the client (HTTP Basic), accepts each refresh token once and rotates it, and
      issues Bearer access tokens that live --expires-in seconds [3600], long enough that
      Veneer does not refresh during a run. Several --refresh-token-file: independent clients
      (the preflight's instance and the benchmarked one). GET /__stats: grants, refusals and
      the access tokens issued.

  production.py preflight --binary B --config C --environment E --listen HOST:PORT --dir D
                          --token-url U --origin-port P
      Runs environment E of C (Veneer's production chain) for a moment in front of a checking
      origin of its own, with its own secrets, state and latency log under D, and fails unless
      the token endpoint is called at start, the origin sees `Authorization: Bearer <a token the
      endpoint issued>`, a repeated GET is a hit (`Cache-Status`) that does not reach the origin,
      a request matching a deny rule gets 403 client_blocked without reaching it, and the latency
      log file grows by one line per request. Writes what it saw as JSON (--summary).

  production.py report --results R --target T --baseline B --token-url U --latency-log L
                       --access-log A [--preflight J]
      The production section of the report, from the harness's results.json: hits and misses of
      T against B, paired by round, then what the chain did during the run.
"""
import argparse
import base64
import http.client
import http.server
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] production: {message}", file=sys.stderr, flush=True)


def get(host, port, path, headers=None, timeout=5.0):
    """One GET on a fresh connection: (status, headers with lower-case names, body)."""
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        body = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, body
    finally:
        connection.close()


def stats(token_url):
    parts = urllib.parse.urlsplit(token_url)
    _, _, body = get(parts.hostname, parts.port, "/__stats")
    return json.loads(body)


def wait_until(condition, timeout, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return condition()


def port_open(host, port):
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class JSONHandler(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive (Veneer pools its upstream connections); quiet."""
    protocol_version = "HTTP/1.1"

    def send_json(self, status, value, extra=()):
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, text in extra:
            self.send_header(name, text)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_):
        pass


# --------------------------------------------------------------------------- token endpoint

class TokenEndpoint:
    def __init__(self, client_id, client_secret, refresh_tokens, expires_in):
        self.client_id, self.client_secret, self.expires_in = client_id, client_secret, expires_in
        self.valid = set(refresh_tokens)
        self.grants = 0
        self.refused = 0
        self.issued = []
        self.lock = threading.Lock()

    def grant(self, authorization, form):
        """(status, JSON answer) for one token request."""
        try:
            scheme, _, encoded = authorization.partition(" ")
            user, _, password = base64.b64decode(encoded).decode().partition(":")
            client = (urllib.parse.unquote_plus(user), urllib.parse.unquote_plus(password))
        except ValueError:
            client = None
        with self.lock:
            if scheme.lower() != "basic" or client != (self.client_id, self.client_secret):
                self.refused += 1
                return 401, {"error": "invalid_client"}
            if form.get("grant_type") != ["refresh_token"]:
                self.refused += 1
                return 400, {"error": "unsupported_grant_type"}
            presented = (form.get("refresh_token") or [""])[0]
            if presented not in self.valid:
                self.refused += 1
                return 400, {"error": "invalid_grant"}
            # Rotation: the presented token is spent; only the new one works from now on.
            self.valid.discard(presented)
            rotated = "bench-refresh-" + secrets.token_urlsafe(16)
            self.valid.add(rotated)
            access = "bench-access-" + secrets.token_urlsafe(24)
            self.grants += 1
            self.issued.append(access)
            return 200, {"access_token": access, "token_type": "Bearer", "expires_in": self.expires_in,
                         "refresh_token": rotated}

    def snapshot(self):
        with self.lock:
            return {"grants": self.grants, "refused": self.refused, "issued": list(self.issued)}


def serve_token_endpoint(args):
    def read(path):
        with open(path) as f:
            return f.read().strip()

    endpoint = TokenEndpoint(args.client_id, read(args.client_secret_file),
                             [read(p) for p in args.refresh_token_file], args.expires_in)

    class Handler(JSONHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path != "/oauth/token":
                return self.send_json(404, {"error": "not_found"})
            form = urllib.parse.parse_qs(body.decode(errors="replace"))
            status, answer = endpoint.grant(self.headers.get("Authorization") or "", form)
            self.send_json(status, answer, [("Cache-Control", "no-store")])
            # Never the tokens themselves, as a real endpoint's log would not have them.
            log(f"token endpoint: {status} {answer.get('error', 'granted')}")

        def do_GET(self):
            if self.path == "/__stats":
                return self.send_json(200, endpoint.snapshot())
            self.send_json(404, {"error": "not_found"})

    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    log(f"token endpoint on http://127.0.0.1:{args.port}/oauth/token, access tokens for {args.expires_in} s")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


# --------------------------------------------------------------------------- preflight

class CheckingOrigin:
    """A posts origin that records every request's path and Authorization."""

    def __init__(self, port):
        self.seen = []
        seen, lock = self.seen, threading.Lock()

        class Handler(JSONHandler):
            def do_GET(self):
                with lock:
                    seen.append((self.path, self.headers.get("Authorization")))
                post_id = urllib.parse.urlsplit(self.path).path.rsplit("/", 1)[-1]
                if not post_id.isdigit():
                    return self.send_json(404, {"error": "not_found"})
                self.send_json(200, {"id": int(post_id), "title": f"Post {post_id}", "body": "checked"},
                               [("Cache-Control", "public, max-age=3600")])

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def requests_for(self, path):
        return [auth for p, auth in list(self.seen) if p == path]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def line_count(path):
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def show_log(directory):
    """The preflight instance's own log, before bench/run.sh removes its directory."""
    with open(os.path.join(directory, "veneer.log"), errors="replace") as f:
        tail = f.readlines()[-20:]
    log("the preflight instance's log:\n" + "".join(tail))


def preflight(args):
    host, port = args.listen.rsplit(":", 1)
    port = int(port)
    latency_log = os.path.join(args.dir, "latency.log")
    origin = CheckingOrigin(args.origin_port)
    env = dict(os.environ, BENCH_ORIGIN_FAST=f"http://127.0.0.1:{args.origin_port}",
               BENCH_PRODUCTION_DIR=args.dir, BENCH_STATE=os.path.join(args.dir, "state"))
    grants_before = stats(args.token_url)["grants"]
    checks, failed = [], []

    def check(name, ok, detail):
        checks.append({"check": name, "ok": bool(ok), "detail": detail})
        (log if ok else lambda m: log("FAILED " + m))(f"preflight: {name}: {detail}")
        if not ok:
            failed.append(name)

    with open(os.path.join(args.dir, "veneer.log"), "ab") as output:
        veneer = subprocess.Popen([args.binary, "run", "--config", args.config, "-e", args.environment,
                                   "--threads", "1", "--log-level", "warning"],
                                  stdout=output, stderr=output, stdin=subprocess.DEVNULL, env=env)
    try:
        if not wait_until(lambda: port_open(host, port) or veneer.poll() is not None, 30) or veneer.poll() is not None:
            show_log(args.dir)
            raise SystemExit("preflight: Veneer did not start")
        # Before any request: auth_refresh fetches its first token at start, not on demand.
        started = wait_until(lambda: stats(args.token_url)["grants"] > grants_before, 10)
        grants = stats(args.token_url)["grants"] - grants_before
        check("token endpoint called at start", started, f"{grants} grant(s) before the first request")
        lines_before = line_count(latency_log)

        first = get(host, port, "/posts/1")
        second = get(host, port, "/posts/1")
        check("cache answers hits",
              first[0] == 200 and second[0] == 200 and "hit" in second[1].get("cache-status", "")
              and len(origin.requests_for("/posts/1")) == 1,
              f"Cache-Status {first[1].get('cache-status')!r} then {second[1].get('cache-status')!r}; "
              f"/posts/1 reached the origin {len(origin.requests_for('/posts/1'))} time(s)")

        miss = get(host, port, "/posts/2?nocache=preflight")
        seen = origin.requests_for("/posts/2?nocache=preflight")
        issued = stats(args.token_url)["issued"]
        bearer = seen[0] if seen else None
        check("Authorization: Bearer reaches the origin",
              miss[0] == 200 and bearer is not None and bearer.startswith("Bearer ")
              and bearer[len("Bearer "):] in issued,
              "the origin saw " + (f"'Bearer <token #{issued.index(bearer[7:]) + 1} the endpoint issued>'"
                                   if bearer and bearer[7:] in issued else repr(bearer and bearer[:20])))

        blocked = get(host, port, "/posts/3", headers={"X-Account-Id": "4242"})
        try:
            code = json.loads(blocked[2]).get("error")
        except ValueError:
            code = None
        check("block_list denies a matching request", blocked[0] == 403 and code == "client_blocked"
              and not origin.requests_for("/posts/3"),
              f"{blocked[0]} {code}; the origin saw it {len(origin.requests_for('/posts/3'))} time(s)")

        wait_until(lambda: line_count(latency_log) >= lines_before + 4, 3)
        lines = line_count(latency_log)
        check("latency log file grows", lines - lines_before == 4,
              f"{latency_log}: {lines_before} → {lines} lines after 4 requests")
    finally:
        veneer.terminate()
        try:
            veneer.wait(timeout=15)
        except subprocess.TimeoutExpired:
            veneer.kill()
            veneer.wait()
        origin.stop()
    with open(args.summary, "w") as f:
        json.dump({"checks": checks, "grants": stats(args.token_url)["grants"] - grants_before}, f)
    if failed:
        show_log(args.dir)
        raise SystemExit(f"preflight failed: {', '.join(failed)}")


# --------------------------------------------------------------------------- report

def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, pattern):
    return pattern.format(value) if value is not None else "—"


def report(args):
    with open(args.results) as f:
        results = json.load(f)["results"]
    out = []
    out.append(f"### production: latency_log (file) → block_list → cache → auth_refresh, "
               f"{args.target} — baseline {args.baseline} (nginx-cache with its access log on)")
    out.append("")
    out.append("| requests | target req/s | baseline req/s | ratio | p50 ms (base / target) | p99 ms (base / target) "
               "| origin/req (base / target) | cpu µs/req (base / target) | errors (base / target) | ratio per round |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    measured = 0
    for scenario, label in (("hit", "hits: GET /posts/{1..100}, warm"),
                            ("pass", "misses: GET /posts/{1..1000}?nocache=<unique>")):
        runs = results.get(scenario, {}).get(args.target) or []
        base = results.get(scenario, {}).get(args.baseline) or []
        if not runs or not base:
            out.append(f"| {label} | — | — | — | — | — | — | — | — | not run |")
            continue
        measured += sum(r["requests"] for r in runs)
        # Paired by round: both were measured in the same round, so the machine's drift cancels.
        ratios = [r["rps"] / b["rps"] for r, b in zip(runs, base) if b["rps"]]

        def both(key, pattern, scale=1.0):
            b, t = median([x.get(key) for x in base]), median([x.get(key) for x in runs])
            return f"{fmt(b and b * scale, pattern)} / {fmt(t and t * scale, pattern)}"

        out.append("| {} | {:.0f} | {:.0f} | **{}** | {} | {} | {} | {} | {} | {} |".format(
            label, median([r["rps"] for r in runs]), median([b["rps"] for b in base]),
            fmt(median(ratios), "{:.2f}×"), both("lat_p50_us", "{:.2f}", 1e-3), both("lat_p99_us", "{:.2f}", 1e-3),
            both("origin_frac", "{:.3f}"), both("cpu_us_per_req", "{:.1f}"),
            f"{sum(b['errors'] for b in base)} / {sum(r['errors'] for r in runs)}", " / ".join(f"{x:.2f}" for x in ratios)))
    out.append("")

    hits = misses = lines = 0
    try:
        with open(args.latency_log, "rb") as f:
            for line in f:
                lines += 1
                if b'"cache":"veneer; hit' in line:
                    hits += 1
                elif b'fwd=' in line:
                    misses += 1
    except FileNotFoundError:
        pass
    token = stats(args.token_url)
    preflight_grants = 0
    evidence = []
    if args.preflight and os.path.exists(args.preflight):
        with open(args.preflight) as f:
            summary = json.load(f)
        preflight_grants = summary["grants"]
        evidence.append("- preflight (the same chain in front of a checking origin): " +
                        "; ".join(f"{c['check']}: {'ok' if c['ok'] else 'FAILED'} ({c['detail']})"
                                  for c in summary["checks"]))
    evidence.append(f"- latency log of {args.target}: {lines:,} lines ({hits:,} `Cache-Status` hits, "
                    f"{misses:,} misses) for {measured:,} measured requests plus warm-ups")
    evidence.append(f"- access log of {args.baseline}: {line_count(args.access_log):,} lines")
    evidence.append(f"- token endpoint during the run: {token['grants'] - preflight_grants} grant(s) to "
                    f"{args.target}, {token['refused']} refusal(s)")
    out.extend(evidence)
    out.append("")
    print("\n".join(out))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name, *required, **typed):
        """A subcommand with these required options: strings, unless typed (by their Python name)."""
        sub = commands.add_parser(name)
        for option in required:
            sub.add_argument("--" + option, type=typed.get(option.replace("-", "_"), str), required=True)
        return sub

    token = command("token-endpoint", "port", "client-id", "client-secret-file", port=int)
    token.add_argument("--refresh-token-file", action="append", required=True)
    token.add_argument("--expires-in", type=int, default=3600)
    command("preflight", "binary", "config", "environment", "listen", "dir", "token-url", "origin-port", "summary",
            origin_port=int)
    command("report", "results", "target", "baseline", "token-url", "latency-log", "access-log").add_argument("--preflight")

    args = parser.parse_args()
    {"token-endpoint": serve_token_endpoint, "preflight": preflight, "report": report}[args.command](args)


if __name__ == "__main__":
    main()
