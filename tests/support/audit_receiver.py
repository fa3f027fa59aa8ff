"""A real HTTPS audit webhook service for the tests: aiohttp on 127.0.0.1 in its own thread, with
its own CA, requiring a client certificate; it keeps every EventList POSTed to /audit (and who sent
it), and answers 500 to the next `fail_next` POSTs. `kubeconfig()` writes the file that
--audit-webhook-config-file reads."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import threading
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from apiserver import pki
from tests.support.waiting import wait_until

CLIENT_NAME = "coreio-audit"


class AuditReceiver:
    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.ca = pki.create_ca("audit-receiver-ca")
        serving = pki.issue_serving_certificate(self.ca, ["127.0.0.1"])
        serving.save(directory / "receiver.crt", directory / "receiver.key")
        client = pki.issue_client_certificate(self.ca, CLIENT_NAME)
        client.save(directory / "client.crt", directory / "client.key")
        self.posts: list[tuple[str, int, dict[str, Any]]] = []  # (client CN, status, body)
        self.fail_next = 0
        self.port = 0
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def _context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.directory / "receiver.crt", self.directory / "receiver.key")
        context.load_verify_locations(cadata=self.ca.cert_pem.decode())
        context.verify_mode = ssl.CERT_REQUIRED
        return context

    async def _receive(self, request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        subject = {key: value for rdn in (peer or {}).get("subject", ()) for key, value in rdn}
        body = await request.json()
        with self._lock:
            status = 500 if self.fail_next > 0 else 200
            self.fail_next = max(0, self.fail_next - 1)
            self.posts.append((subject.get("commonName", ""), status, body))
        return web.json_response({}, status=status)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/audit", self._receive)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self._context())
        await site.start()
        self.port = self._runner.addresses[0][1]

    def start(self) -> AuditReceiver:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        return self

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)

    def kubeconfig(self, port: int | None = None) -> Path:
        """A kubeconfig naming this service (or, with `port`, whatever listens there)."""
        server = f"https://127.0.0.1:{port or self.port}/audit"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "audit",
                    "cluster": {
                        "server": server,
                        "certificate-authority-data": base64.b64encode(self.ca.cert_pem).decode(),
                    },
                }
            ],
            "users": [
                {
                    "name": "coreio",
                    "user": {
                        "client-certificate": str(self.directory / "client.crt"),
                        "client-key": str(self.directory / "client.key"),
                    },
                }
            ],
            "contexts": [{"name": "audit", "context": {"cluster": "audit", "user": "coreio"}}],
            "current-context": "audit",
        }
        path = self.directory / f"webhook-{port or self.port}.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        return path

    def events(self) -> list[dict[str, Any]]:
        """Every event of the EventLists it took (answered 200)."""
        with self._lock:
            return [item for _cn, status, body in self.posts if status == 200 for item in body["items"]]

    def settled(self, log: Path, audit_ids: set[str], timeout: float = 20) -> tuple[list[Any], list[Any]]:
        """The events of `audit_ids` this service took and those the audit log at `log` holds
        (each sorted by audit ID and stage), once they are the same."""

        def same() -> tuple[list[Any], list[Any]] | None:
            taken, logged = _of(self.events(), audit_ids), _of(_logged(log), audit_ids)
            return (taken, logged) if taken == logged and logged else None

        return wait_until(same, timeout=timeout, message="the service to take what the log holds")


def _logged(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def _of(events: list[dict[str, Any]], audit_ids: set[str]) -> list[Any]:
    chosen = [event for event in events if event["auditID"] in audit_ids]
    return sorted(chosen, key=lambda event: (event["auditID"], event["stageTimestamp"], event["stage"]))
