"""The server process as its user meets it: one server per data directory (a crash does not keep it
taken), one clear line and status 1 when it cannot start, and a graceful shutdown at SIGTERM."""

from __future__ import annotations

import contextlib
import http.client
import json
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from apiserver import pki
from tests.support.api import Api, rb_path, rolebinding
from tests.support.metrics import metric
from tests.support.rawhttp import (
    RawResponse,
    assert_no_tracebacks,
    connect,
    read_response,
    request_head,
)
from tests.support.server import BACKENDS, ServerProcess, backend_args, free_port, start_server
from tests.support.waiting import wait_until

ERROR = "coreio-apiserver: error: "


def run_to_exit(
    data_dir: Path, args: list[str], port: int = 0, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`coreio-apiserver` run until it exits (for the ones that must not start)."""
    command = [
        sys.executable,
        "-m",
        "apiserver",
        "--data-dir",
        str(data_dir),
        "--secure-port",
        str(port or free_port()),
    ]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=timeout, check=False)


def kubeconfig_server(server: ServerProcess) -> str:
    doc = yaml.safe_load(server.kubeconfig.read_text())
    return str(doc["clusters"][0]["cluster"]["server"])


# --- one server per data directory ----------------------------------------------------------------


def test_a_second_server_on_a_data_directory_is_refused_and_the_first_keeps_its_users(tmp_path: Path) -> None:
    first = start_server(tmp_path / "data")
    try:
        assert first.process is not None
        assert Api(first).post(rb_path("default"), rolebinding("kept")).status == 201
        kubeconfig = first.kubeconfig.read_bytes()
        second_port = free_port()
        done = run_to_exit(first.data_dir, [], port=second_port)
        assert done.returncode == 1, done.stderr
        assert done.stderr.splitlines() == [
            f"{ERROR}data directory {first.data_dir} is in use by pid {first.process.pid} ({first.url})"
        ]
        # The first server's users are not cut off: their kubeconfig still names it, and it answers.
        assert first.kubeconfig.read_bytes() == kubeconfig
        assert kubeconfig_server(first) == first.url
        assert Api(first).get(rb_path("default", "kept")).status == 200
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", second_port), timeout=5).close()
    finally:
        first.stop()


def test_a_server_killed_with_sigkill_leaves_its_data_directory_free(tmp_path: Path) -> None:
    first = start_server(tmp_path / "data")
    assert first.process is not None
    assert Api(first).post(rb_path("default"), rolebinding("survivor")).status == 201
    first.process.kill()
    assert first.process.wait(timeout=10) == -signal.SIGKILL
    second = start_server(first.data_dir)
    try:
        assert second.process is not None
        assert Api(second).get(rb_path("default", "survivor")).status == 200
        assert kubeconfig_server(second) == second.url
        assert (first.data_dir / "apiserver.lock").read_text() == f"{second.process.pid} {second.url}\n"
    finally:
        second.stop()


# --- one line when it cannot start ----------------------------------------------------------------


def the_error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The last line of a server that could not start, after checking it said nothing worse."""
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr.splitlines()[-1]


def test_a_port_in_use_is_one_line_and_the_data_directory_is_left_alone(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = run_to_exit(tmp_path / "data", [], port=port)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        f"{ERROR}failed to listen on 127.0.0.1:{port}: "
        f"listen tcp 127.0.0.1:{port}: bind: address already in use"
    ]
    # No kubeconfig was written for a server that never served.
    assert [path.name for path in (tmp_path / "data").iterdir()] == ["apiserver.lock"]


@pytest.fixture
def tls_files(tmp_path: Path) -> dict[str, Path]:
    """A serving pair, another pair's key, a file that is no PEM at all, and a directory."""
    ca = pki.create_ca("lifecycle-ca")
    files = {name: tmp_path / name for name in ("tls.crt", "tls.key", "other.crt", "other.key", "junk.pem")}
    pki.issue_serving_certificate(ca, ["127.0.0.1"]).save(files["tls.crt"], files["tls.key"])
    pki.issue_serving_certificate(ca, ["127.0.0.1"]).save(files["other.crt"], files["other.key"])
    files["junk.pem"].write_text("not a certificate\n")
    files["missing.crt"] = tmp_path / "missing.crt"
    files["dir"] = tmp_path
    return files


@pytest.mark.parametrize(
    ("cert", "key", "problem"),
    [
        ("missing.crt", "tls.key", "open <missing.crt>: no such file or directory"),
        ("junk.pem", "tls.key", "tls: failed to find any PEM data in certificate input"),
        ("tls.crt", "junk.pem", "tls: failed to find any PEM data in key input"),
        ("tls.crt", "other.key", "tls: private key does not match public key"),
        ("tls.crt", "dir", "open <dir>: is a directory"),
    ],
    ids=["missing", "not-pem", "key-not-pem", "not-a-pair", "key-is-a-directory"],
)
def test_an_unusable_serving_certificate_is_one_line(
    tmp_path: Path, tls_files: dict[str, Path], cert: str, key: str, problem: str
) -> None:
    paths = {name: str(path) for name, path in tls_files.items()}
    args = ["--tls-cert-file", paths[cert], "--tls-private-key-file", paths[key]]
    for name, path in paths.items():
        problem = problem.replace(f"<{name}>", path)
    done = run_to_exit(tmp_path / "data", args)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        f"{ERROR}failed to load serving certificate {paths[cert]} and key {paths[key]}: {problem}"
    ]


@pytest.mark.parametrize("flag", ["--client-ca-file", "--requestheader-client-ca-file"])
def test_an_unusable_ca_file_is_one_line(tmp_path: Path, tls_files: dict[str, Path], flag: str) -> None:
    serving = [
        "--tls-cert-file",
        str(tls_files["tls.crt"]),
        "--tls-private-key-file",
        str(tls_files["tls.key"]),
    ]
    done = run_to_exit(tmp_path / "data", [*serving, flag, str(tls_files["junk.pem"])])
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        f"{ERROR}failed to load CA bundle {tls_files['junk.pem']}: "
        "data does not contain any valid RSA or ECDSA certificates"
    ]
    done = run_to_exit(tmp_path / "data", [*serving, flag, str(tls_files["missing.crt"])])
    assert the_error_line(done) == (
        f"{ERROR}failed to load CA bundle {tls_files['missing.crt']}: "
        f"open {tls_files['missing.crt']}: no such file or directory"
    )


def test_an_unreachable_etcd_at_start_is_one_line(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    started = time.monotonic()
    done = run_to_exit(tmp_path / "data", ["--etcd-servers", f"http://127.0.0.1:{port}"])
    took = time.monotonic() - started
    line = the_error_line(done)
    assert line.startswith(f"{ERROR}cannot reach the storage (etcd http://127.0.0.1:{port}) within 5s: "), (
        line
    )
    assert "Connection refused" in line, line
    assert took < 30


def test_missing_etcd_client_files_are_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "etcd-ca.crt"
    args = ["--etcd-servers", f"https://127.0.0.1:{free_port()}", "--etcd-cafile", str(missing)]
    assert the_error_line(run_to_exit(tmp_path / "data", args)) == (
        f"{ERROR}failed to start the storage (etcd {args[1]}): open {missing}: no such file or directory"
    )


# --- graceful shutdown ----------------------------------------------------------------------------


class WatchReader(threading.Thread):
    """Reads a watch stream to its end: `error` stays None when it ended normally (the final chunk),
    and `ended_at` is when."""

    def __init__(self, api: Api, path: str) -> None:
        super().__init__(daemon=True)
        self.connection = api.connection(timeout=60)
        self.connection.request("GET", path)
        self.response = self.connection.getresponse()
        assert self.response.status == 200
        self.events: list[dict[str, Any]] = []
        self.error: Exception | None = None
        self.ended_at: float | None = None

    def run(self) -> None:
        try:
            while line := self.response.readline():
                self.events.append(json.loads(line))
        except Exception as exc:  # an abrupt end: IncompleteRead, a reset
            self.error = exc
        finally:
            self.ended_at = time.monotonic()
            self.connection.close()

    def names(self) -> list[str]:
        return [event["object"]["metadata"]["name"] for event in self.events if event["type"] == "ADDED"]


class SlowWrite:
    """A create whose body is sent in two halves: in flight for as long as the test likes."""

    def __init__(self, server: ServerProcess, path: str, body: dict[str, Any]) -> None:
        self.data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Content-Length": str(len(self.data))}
        self.sock = connect(server, server.ssl_context())
        self.sock.sendall(request_head("POST", path, headers) + self.data[: len(self.data) // 2])

    def finish(self) -> RawResponse:
        try:
            self.sock.sendall(self.data[len(self.data) // 2 :])
            return read_response(self.sock)
        finally:
            self.sock.close()


def probe_until_refused(server: ServerProcess, timeout: float = 30) -> list[tuple[int, str]]:
    """/readyz?verbose on a new connection every 50 ms until connections are refused."""
    answers: list[tuple[int, str]] = []

    def refused() -> bool:
        connection = http.client.HTTPSConnection(
            "127.0.0.1", server.port, context=server.ssl_context(client_cert=False), timeout=5
        )
        try:
            connection.request("GET", "/readyz?verbose")
            response = connection.getresponse()
            answers.append((response.status, response.read().decode()))
        except ConnectionRefusedError:
            return True
        except (http.client.RemoteDisconnected, ConnectionResetError, ssl.SSLError) as exc:
            # Accepted by the kernel just as the server closed its listener: dropped unanswered,
            # as Go's server drops its backlog. Only if nothing listens any more.
            _assert_refused_soon(server, exc)
            return True
        finally:
            connection.close()
        return False

    wait_until(refused, timeout=timeout, message=lambda: f"connections refused after SIGTERM: {answers[-3:]}")
    return answers


def _assert_refused_soon(server: ServerProcess, dropped: Exception, timeout: float = 2) -> None:
    def refused() -> bool:
        try:
            socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
        except ConnectionRefusedError:
            return True
        return False

    wait_until(
        refused,
        timeout=timeout,
        message=f"connections refused: one was dropped unanswered ({dropped!r}) while still listening",
    )


def _failed_checks(verbose: str) -> list[str]:
    """`[-]name` of each failed check a `?verbose` probe lists."""
    return [line.split(" ", 1)[0] for line in verbose.splitlines() if line.startswith("[-]")]


@pytest.mark.parametrize("backend", BACKENDS)
def test_sigterm_fails_readiness_then_drains_and_exits_0(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    storage = backend_args(request, backend)
    server = start_server(tmp_path / "data", [*storage, "--shutdown-delay-duration=2s"])
    assert server.process is not None
    api = Api(server)
    try:
        watch = WatchReader(api, rb_path("default") + "?watch=1")
        watch.start()
        assert api.post(rb_path("default"), rolebinding("before")).status == 201
        wait_until(
            lambda: watch.names() == ["before"], timeout=15, message="the watch to see the first binding"
        )
        slow = SlowWrite(server, rb_path("default"), rolebinding("in-flight"))
        wait_until(  # its head and half its body are with the server, which waits for the rest
            lambda: metric(server, "apiserver_current_inflight_requests", 'request_kind="mutating"') == 1,
            message="the slow write in flight",
        )
        signalled = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        answers = probe_until_refused(server)
        refused = time.monotonic()
        created = slow.finish()
        assert server.process.wait(timeout=30) == 0
    finally:
        server.stop()
    # Readiness turned false at once and stayed so while the listener was still open, for the delay.
    failing = [text for status, text in answers if status != 200]
    assert failing and answers[-len(failing) :] == [(500, text) for text in failing], answers
    # Only the shutdown check failed: the rest (the storage too) was fine all along.
    assert [_failed_checks(text) for text in failing] == [["[-]shutdown"]] * len(failing), [
        t for t in failing if _failed_checks(t) != ["[-]shutdown"]
    ]
    assert refused - signalled >= 1.8
    # The watch ended normally (its final chunk came), once the listener closed; the slow write,
    # in flight all along, finished.
    watch.join(timeout=10)
    assert watch.error is None, watch.error
    assert watch.ended_at is not None and watch.ended_at - signalled >= 1.8
    assert created.status == 201, created.body
    assert created.json["metadata"]["name"] == "in-flight"
    assert created.headers["Connection"] == "close"  # no keep-alive once the listener is closed
    assert_no_tracebacks(server)
    # Nothing acknowledged was lost: a restarted server has both.
    again = start_server(server.data_dir, storage)
    try:
        for name in ("before", "in-flight"):
            assert Api(again).get(rb_path("default", name)).status == 200
    finally:
        again.stop()


def _read_to_end(sock: socket.socket) -> None:
    sock.settimeout(10)
    with contextlib.suppress(ConnectionResetError):
        while sock.recv(4096):
            pass


def test_a_connection_accepted_before_the_listener_closed_is_waited_for_and_served(tmp_path: Path) -> None:
    """As Go's server waits for its new connections: one accepted before the listener closed, which
    only then makes its TLS handshake and sends its request, is answered (before the storage
    closes); one whose handshake failed holds nothing up."""
    server = start_server(tmp_path / "data", ["--workers=1"])
    assert server.process is not None
    try:
        failed = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        failed.sendall(request_head("GET", "/readyz"))  # plain HTTP to the TLS port
        _read_to_end(failed)
        pending = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        # Accepted in order by the one worker: once a later connection is answered, it is accepted.
        assert Api(server).get(rb_path("default")).status == 200
        server.process.send_signal(signal.SIGTERM)
        _assert_refused_soon(server, RuntimeError("not yet"), timeout=10)
        time.sleep(1.0)
        assert server.process.poll() is None, "the server left without answering an accepted connection"
        tls = server.ssl_context().wrap_socket(pending, server_hostname="127.0.0.1")
        tls.sendall(request_head("GET", rb_path("default")))
        answer = read_response(tls)
        answered = time.monotonic()
        assert answer.status == 200, answer.body
        assert answer.headers["Connection"] == "close"
        assert server.process.wait(timeout=30) == 0
        # Not held for the new-connection grace (5 s from its start) by the failed handshake.
        assert time.monotonic() - answered < 2.5
    finally:
        failed.close()
        server.stop()
    assert_no_tracebacks(server)


def test_a_second_sigterm_exits_at_once_with_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scratch = tmp_path / "tmp"  # where the supervisor makes its temporary directory
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    server = start_server(tmp_path / "data", ["--shutdown-delay-duration=30s"])
    assert server.process is not None
    assert any(scratch.iterdir())
    server.process.send_signal(signal.SIGTERM)
    wait_until(
        lambda: "received SIGTERM" in server.log_file.read_text(),
        timeout=15,
        message="the first SIGTERM to be taken",
    )
    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(timeout=10) == 1
    assert time.monotonic() - started < 5
    assert "second SIGTERM: exiting now" in server.log_file.read_text()
    assert not any(scratch.iterdir())  # removed, as at a graceful end
