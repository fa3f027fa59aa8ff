"""An HTTP receiving end in a process of its own, for bench.export's webhook and OTLP/HTTP ends:
the stdlib's threading HTTP server, writing each POST it reads, with the time it read it, to a file
the bench tails.

In its own process so that its answers never wait for the bench's writer on the GIL. In the
bench's process, beside one busy thread, it answered a sender posting one request at a time (as
kubernetes-event-exporter does) 460 times a second, against 6,600 alone (wrk -c1, this machine):
the end, not the exporter, was then the limit at 500 Events a second.

The file holds, for each request, a JSON line `[time, content type, body length]` and the body's
bytes after it."""

from __future__ import annotations

import argparse
import gzip
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from tests.support.server import free_port
from tests.support.waiting import stopped, wait_until

PROTOBUF = "application/x-protobuf"
ROOT = Path(__file__).resolve().parents[1]


def handler(out: BinaryIO, kept: bool) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1" if kept else "HTTP/1.0"
        # The answer's headers and body are two writes: without TCP_NODELAY the body waits for
        # the sender's delayed ACK of the headers, 40 ms a request on a kept connection.
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            at = time.time()
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            kind = self.headers.get("Content-Type", "")
            with lock:
                out.write(orjson.dumps([at, kind, len(body)]) + b"\n" + body)
                out.flush()
            protobuf = kind == PROTOBUF
            answer = b"" if protobuf else b"{}"  # an empty ExportLogsServiceResponse either way
            self.send_response(200)
            self.send_header("Content-Type", PROTOBUF if protobuf else "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            return None

    return Handler


class ReceivingProcess:
    """The receiving end's process on a loopback port, and the reader of its file. `kept`: HTTP/1.1
    with kept connections, else HTTP/1.0 (a connection a request)."""

    def __init__(self, path: Path, kept: bool = True) -> None:
        self.path, self.kept = path, kept
        self.port = free_port()
        self._offset = 0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)
        command = [sys.executable, "-m", "bench.receiving", str(self.port), str(self.path)]
        self._process = subprocess.Popen([*command, *([] if self.kept else ["--close"])], cwd=ROOT)
        wait_until(self.path.exists, timeout=30, message="the receiving end did not start")

    def stop(self) -> None:
        stopped(self._process)

    def read(self) -> list[tuple[float, str, bytes]]:
        """The requests (time read, content type, body) written since the last read, in order."""
        if self._process is None:
            return []
        with self.path.open("rb") as file:
            file.seek(self._offset)
            chunk = file.read()
        found = frames(chunk)
        self._offset += sum(end for *_, end in found)
        return [(at, kind, body) for at, kind, body, _ in found]


def frames(chunk: bytes) -> list[tuple[float, str, bytes, int]]:
    """The whole requests at the start of `chunk`: (time, content type, body, bytes up to its
    end), a request not yet wholly written left out."""
    found, start = [], 0
    while (line_end := chunk.find(b"\n", start)) >= 0:
        at, kind, length = orjson.loads(chunk[start:line_end])
        body_end = line_end + 1 + length
        if body_end > len(chunk):
            break
        found.append((at, kind, chunk[line_end + 1 : body_end], body_end - start))
        start = body_end
    return found


class Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a sender killed mid-request
            super().handle_error(request, client_address)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.receiving")
    parser.add_argument("port", type=int)
    parser.add_argument("path", type=Path)
    parser.add_argument("--close", action="store_true", help="HTTP/1.0: a connection a request")
    args = parser.parse_args()
    part = args.path.with_name(args.path.name + ".part")
    with part.open("wb") as out:
        server = Server(("127.0.0.1", args.port), handler(out, not args.close))
        part.rename(args.path)  # listening: the file is there
        server.serve_forever()


if __name__ == "__main__":
    main()
