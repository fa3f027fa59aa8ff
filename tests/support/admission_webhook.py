"""A real admission webhook for tests: HTTPS on 127.0.0.1 (its own CA, the certificate naming
127.0.0.1, localhost and a Service name), in a thread of its own, recording every AdmissionReview
it is sent. What it answers is chosen by the path it is called on (see BEHAVIOURS), so one server
serves every webhook of a configuration, kube-apiserver's calls and coreio's alike."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import ssl
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from apiserver import pki

JSON = dict[str, Any]
SERVICE_HOST = "hooks.webhooks.svc"
SLOW_SECONDS = 2.5


@dataclass
class Received:
    path: str
    query: str
    review: JSON


def _patch(operations: list[JSON]) -> JSON:
    return {"patchType": "JSONPatch", "patch": base64.b64encode(json.dumps(operations).encode()).decode()}


def _label_patch(obj: JSON | None, key: str, value: str) -> list[JSON]:
    labels = ((obj or {}).get("metadata") or {}).get("labels")
    if labels is None:
        return [{"op": "add", "path": "/metadata/labels", "value": {key: value}}]
    return [{"op": "add", "path": f"/metadata/labels/{key.replace('/', '~1')}", "value": value}]


def _behaviour(name: str, request: JSON) -> JSON:
    """The response (without uid) the path `name` answers."""
    obj = request.get("object")
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    if name == "allow":
        return {
            "allowed": True,
            "warnings": ["checked by the test webhook"],
            "auditAnnotations": {"seen": "yes"},
        }
    if name == "deny":
        return {
            "allowed": False,
            "status": {"code": 403, "reason": "Forbidden", "message": "not on my watch"},
        }
    if name == "deny-bare":
        return {"allowed": False}
    if name == "deny-reason":
        return {"allowed": False, "status": {"code": 200, "reason": "NotAcceptable"}}
    if name == "deny-admins":
        admin = ((obj or {}).get("roleRef") or {}).get("name") == "cluster-admin"
        return {"allowed": not admin, "status": {"message": "no cluster-admin bindings"}}
    if name == "label":
        return {"allowed": True, **_patch(_label_patch(obj, "webhook", "patched"))}
    if name == "first":
        # Reinvoked when a later webhook changed the object: counts the rounds it saw.
        seen = "twice" if labels.get("first") == "once" else "once"
        return {"allowed": True, **_patch(_label_patch(obj, "first", seen))}
    if name == "second":
        if "second" in labels:
            return {"allowed": True}
        return {"allowed": True, **_patch(_label_patch(obj, "second", "yes"))}
    if name == "invalid-patch":
        return {"allowed": True, **_patch([{"op": "replace", "path": "/subjects", "value": "nobody"}])}
    if name == "bad-uid":
        return {"allowed": True, "uid": "not-the-request"}
    return {"allowed": True}


class AdmissionWebhookServer:
    """Serves POST /<behaviour> for as long as it runs; `received` is every review, in order."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self._dir = Path(tempfile.mkdtemp(prefix="admission-webhook-"))
        self.ca = pki.create_ca("admission-webhook-ca")
        leaf = pki.issue_serving_certificate(self.ca, ["127.0.0.1", "localhost", SERVICE_HOST])
        leaf.save(self._dir / "tls.crt", self._dir / "tls.key")
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="admission-webhook", daemon=True)

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca.cert_pem).decode()

    def url(self, behaviour: str) -> str:
        return f"https://127.0.0.1:{self.port}/{behaviour}"

    def client_config(self, behaviour: str) -> JSON:
        return {"url": self.url(behaviour), "caBundle": self.ca_bundle}

    def reviews(self, behaviour: str) -> list[JSON]:
        return [item.review for item in self.received if item.path == f"/{behaviour}"]

    def start(self) -> AdmissionWebhookServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("admission webhook did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> AdmissionWebhookServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    async def _handle(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.received.append(Received(request.path, request.query_string, review))
        name = request.path.strip("/")
        if name == "slow":
            await asyncio.sleep(SLOW_SECONDS)  # a slow webhook: its time is under test
        if name == "error":
            return web.Response(status=500, text="the webhook fell over")
        body = review.get("request") or {}
        response: JSON = {"uid": body.get("uid", ""), **_behaviour(name, body)}
        return web.json_response(
            {"apiVersion": review.get("apiVersion"), "kind": "AdmissionReview", "response": response}
        )

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self._dir / "tls.crt", self._dir / "tls.key")
        app = web.Application()
        app.router.add_post("/{behaviour}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=context)
        loop.run_until_complete(site.start())
        self.port = self._runner.addresses[0][1]
        self._ready.set()
        loop.run_forever()
        loop.close()
