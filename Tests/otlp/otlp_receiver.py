#!/usr/bin/env python3
"""An OTLP/HTTP trace receiver for Veneer's tests: decodes each ExportTraceServiceRequest
with OpenTelemetry's own protobuf definitions (PyPI opentelemetry-proto, installed by
`make test-deps` into .build/otlp-venv), never with Veneer's types, and appends one JSON line
per span to the file named by its first argument. Prints the port it listens on, then serves.

With --hang it accepts connections and never answers (a collector that is down in the way
that costs the most: requests wait for their timeout)."""
import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
except ImportError as error:
    import os
    sys.exit(f"{error} (python {sys.executable}, prefix {sys.prefix}, PYTHONHOME {os.environ.get('PYTHONHOME')}, "
             f"PYTHONPATH {os.environ.get('PYTHONPATH')}): run make test-deps")

OUT = sys.argv[1]
LOCK = threading.Lock()


def value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(body)
        lines = []
        for resource_spans in request.resource_spans:
            resource = {kv.key: value(kv.value) for kv in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    lines.append(json.dumps({
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "trace_state": span.trace_state,
                        "name": span.name,
                        "kind": span.kind,
                        "start": span.start_time_unix_nano,
                        "end": span.end_time_unix_nano,
                        "attributes": {kv.key: value(kv.value) for kv in span.attributes},
                        "status_code": span.status.code,
                        "status_message": span.status.message,
                        "resource": resource,
                        "scope": scope_spans.scope.name,
                        "content_type": self.headers.get("Content-Type"),
                        "authorization": self.headers.get("Authorization"),
                    }))
        with LOCK, open(OUT, "a") as out:
            for line in lines:
                out.write(line + "\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def hang():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1024)
    print(server.getsockname()[1], flush=True)
    held = []
    while True:
        connection, _ = server.accept()
        held.append(connection)


if __name__ == "__main__":
    if "--hang" in sys.argv:
        hang()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    print(server.server_address[1], flush=True)
    server.serve_forever()
