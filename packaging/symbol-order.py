#!/usr/bin/env python3
"""Writes packaging/veneer.order, the linker's symbol ordering file for `make release`.

The release binary (unstripped, with its symbols) runs under valgrind's callgrind through what
bench/idle-memory.py does to an instance: start, 50 hits, 50 misses through the upstream, 50
admin requests, SIGTERM; once with a cache in front of the upstream, then again with the
production chain (latency_log, cache, block_list, auth_refresh, and 50 requests block_list
refuses: `--chain production`). Every function the first run executed is listed, the most
executed first, then those only the second executed, in the same order, so that the code of the
simpler chain stays packed and the production chain's own follows it; lld
(`--symbol-ordering-file`, `make release`) puts them at the start of .text, next to each other,
so that start-up and serving touch a few megabytes of code instead of pages spread over the
binary's 33 MB. `make symbol-order` runs it (installing valgrind when missing).

Code sections that have no symbol (the compiler's closure-context destructors and other private
helpers, .Lobjectdestroy and .L__unnamed_N) cannot be named here: packaging/veneer-text.ld
gathers them instead. The list names functions by their mangled symbols. When the code changes, a symbol it names
that no longer exists is skipped, and a new function is laid where it would be without the
file: the binary is as correct as ever and only the idle memory creeps up, by the new code's
pages. Regenerate it after large changes (a new dependency, a rewritten path).

    packaging/symbol-order.py .build/release/veneer > packaging/veneer.order
"""
import importlib.util
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import http.server

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("idle_memory", os.path.join(here, "..", "bench", "idle-memory.py"))
idle_memory = importlib.util.module_from_spec(spec)
spec.loader.exec_module(idle_memory)


def profile(binary, chain):
    """{symbol: instructions executed} of one run of `binary` under callgrind on `chain`."""
    origin = http.server.ThreadingHTTPServer(("127.0.0.1", 0), idle_memory.Origin)
    threading.Thread(target=origin.serve_forever, daemon=True).start()
    work = tempfile.mkdtemp(prefix="veneer-symbol-order.")
    config = os.path.join(work, "veneer.yaml")
    endpoint = idle_memory.write_config(work, origin.server_address[1], chain)
    port = idle_memory.free_port()
    profile = os.path.join(work, "callgrind.out")
    process = subprocess.Popen(["valgrind", "--tool=callgrind", "--demangle=no", f"--callgrind-out-file={profile}",
                                binary, "run", "--config", config, "-e", idle_memory.ENVIRONMENTS[chain], "--threads", "1",
                                "--listen", f"127.0.0.1:{port}", "--log-level", "warning"],
                               stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "valgrind.log"), "w"))
    idle_memory.wait_listening(port, time.time() + 600, process)
    time.sleep(2)
    idle_memory.traffic(port, 50, chain)
    time.sleep(2)
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=300)
    origin.shutdown()
    if endpoint is not None:
        endpoint.terminate()
        endpoint.wait()

    # Callgrind's format: "fn=(id) name" names a function the first time, "fn=(id)" after;
    # each cost line under it starts with a line number (or +/- offset) and its Ir count.
    names, cost, current = {}, {}, None
    with open(profile) as f:
        for line in f:
            match = re.match(r"(c?fn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
            if match:
                kind, ident, name = match.groups()
                if name:
                    names[ident] = name
                if kind == "fn":
                    current = ident
                cost.setdefault(ident, 0)
                continue
            if current and line[:1] in "0123456789+-*" and not line.startswith("calls="):
                parts = line.split()
                if len(parts) >= 2 and parts[1].isdigit():
                    cost[current] = cost.get(current, 0) + int(parts[1])
    symbols = {}
    for ident, name in names.items():
        # callgrind names a function "symbol" or "symbol'2" (recursion levels); keep the symbol.
        symbol = name.split("'")[0]
        if symbol.startswith("0x") or symbol == "(below main)":
            continue
        symbols[symbol] = symbols.get(symbol, 0) + cost.get(ident, 0)
    subprocess.run(["rm", "-rf", work])
    return symbols


def main():
    binary = os.path.abspath(sys.argv[1])
    listed = set()
    for chain in ("cache", "production"):
        for symbol, _ in sorted(profile(binary, chain).items(), key=lambda item: (-item[1], item[0])):
            if symbol not in listed:
                listed.add(symbol)
                print(symbol)


if __name__ == "__main__":
    main()
