"""The stand-in program: plays a container whose image has no real runner here, and says so.

Run as a script by the node agent (standard library only, so it starts fast and
imports nothing of the suite). It prints, to the container's log, that it is a
stand-in and the command the image would have run. Then either:

- ``--mode serve``: it answers every HTTP request on each ``--port`` of the pod's
  ``--address`` with 200 and a stock body naming the image, and stays up until
  SIGTERM; or
- ``--mode exit``: it exits 0 at once (a Job's container, an init container).

Nothing here is the real program: tests must not mistake its answers for one.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType

BANNER = "operator-suite node agent STAND-IN"


def _handler(body: bytes) -> type[BaseHTTPRequestHandler]:
    class StockAnswer(BaseHTTPRequestHandler):
        def _answer(self, with_body: bool) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Node-Agent-Stand-In", "true")
            self.end_headers()
            if with_body:
                self.wfile.write(body)

        def do_GET(self) -> None:
            self._answer(True)

        def do_POST(self) -> None:
            self._answer(True)

        def do_PUT(self) -> None:
            self._answer(True)

        def do_HEAD(self) -> None:
            self._answer(False)

        def log_message(self, format: str, *args: object) -> None:  # the base class's name
            pass  # keep the container log to what matters

    return StockAnswer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--image", required=True)
    parser.add_argument("--container", required=True)
    parser.add_argument("--address", required=True)
    parser.add_argument("--port", type=int, action="append", default=[])
    parser.add_argument("--would-run", default="[]")
    parser.add_argument("--mode", choices=("serve", "exit"), default="serve")
    options = parser.parse_args(argv)

    would_run = " ".join(json.loads(options.would_run))
    print(f"{BANNER} for image {options.image} (container {options.container})", flush=True)
    print(f"{BANNER}: the real image would have run: {would_run}", flush=True)
    if options.mode == "exit":
        print(f"{BANNER}: run-to-completion container, exiting 0", flush=True)
        return 0

    body = f"{BANNER} for {options.image}: stock answer, not the real program\n".encode()
    servers = [ThreadingHTTPServer((options.address, port), _handler(body)) for port in options.port]
    for server in servers:
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        print(f"{BANNER}: serving a stock 200 answer on {options.address}:{server.server_port}", flush=True)

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    stop.wait()
    print(f"{BANNER}: stopping on signal", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
