"""Hand-made HTTPS clients for hostile-input and overload tests: raw TLS sockets that send exactly
what a test writes (half a request, one byte at a time, nothing at all), and client certificates of
users other than the admin."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apiserver import pki
from tests.support.server import ServerProcess, start_server


@dataclass
class RawResponse:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


def user_context(
    server: ServerProcess, directory: Path, user: str, groups: tuple[str, ...] = ()
) -> ssl.SSLContext:
    """A TLS context presenting a client certificate for `user` issued by the server's own CA."""
    pki_dir = server.data_dir / "pki"
    ca = pki.KeyPair.load(pki_dir / "ca.crt", pki_dir / "ca.key")
    cert, key = directory / f"{user}.crt", directory / f"{user}.key"
    pki.issue_client_certificate(ca, user, groups).save(cert, key)
    context = server.ssl_context(client_cert=False)
    context.load_cert_chain(str(cert), str(key))
    return context


def connect(server: ServerProcess, context: ssl.SSLContext, *, receive_buffer: int = 0) -> ssl.SSLSocket:
    """A TLS connection to the server; `receive_buffer` shrinks the socket's receive buffer (set before
    connecting, so the advertised window stays small) for clients that stop reading."""
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    raw.settimeout(30)
    raw.connect(("127.0.0.1", server.port))
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


def request_head(method: str, path: str, headers: dict[str, str] | None = None) -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1",
        "Host: 127.0.0.1",
        *(f"{k}: {v}" for k, v in (headers or {}).items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_response(sock: ssl.SSLSocket, timeout: float = 30) -> RawResponse:
    sock.settimeout(timeout)
    response = http.client.HTTPResponse(sock)
    response.begin()
    return RawResponse(response.status, response.headers, response.read())


def assert_no_tracebacks(server: ServerProcess) -> None:
    """Nothing in the server's log says a request crashed a handler (or aiohttp itself)."""
    log = server.log_file.read_text(errors="replace")
    for marker in ("Traceback", "internal error serving", "Error handling request", "Unhandled exception"):
        assert marker not in log, log[log.index(marker) - 2000 : log.index(marker) + 3000]


@contextmanager
def serving_cleanly(data_dir: Path, extra_args: list[str] | None = None) -> Iterator[ServerProcess]:
    """A started server, stopped afterwards; then nothing in its log may say a request crashed."""
    server = start_server(data_dir, extra_args)
    try:
        yield server
    finally:
        server.stop()
    assert_no_tracebacks(server)
