"""The system endpoints: health (/healthz, /livez, /readyz and their checks), /version, /metrics."""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable, Mapping, Sequence

from aiohttp import web

from apiserver import __version__
from apiserver.http.responses import NO_CACHE, object_response
from apiserver.storage.interface import Storage, StorageError

KUBERNETES_MINOR = "33"
HEALTH_PATHS = ("/healthz", "/livez", "/readyz")


def version_info() -> dict[str, str]:
    return {
        "major": "1",
        "minor": KUBERNETES_MINOR,
        "gitVersion": f"v1.{KUBERNETES_MINOR}.0-coreio.{__version__}",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": f"python{sys.version_info.major}.{sys.version_info.minor}",
        "compiler": platform.python_implementation().lower(),
        "platform": f"{platform.system().lower()}/{_arch()}",
    }


def _arch() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


class SystemEndpoints:
    """Health, version and metrics of one server.

    Every probe reports `ping` and `storage`; /healthz and /readyz read the storage's revision to
    tell (a live process need not reach its storage, so /livez does not); /readyz adds each of
    `ready_checks` (e.g. authorization synced). A check's own path (/readyz/ping) runs them all
    too, and `?verbose` lists each. `metrics` are the Prometheus texts /metrics joins.
    """

    def __init__(
        self,
        storage: Storage,
        *,
        ready_checks: Mapping[str, Callable[[], bool]] | None = None,
        metrics: Sequence[Callable[[], str]] = (),
    ) -> None:
        self.storage = storage
        self.ready_checks = dict(ready_checks or {})
        self.metrics_texts = tuple(metrics)

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/version", self.version)
        router.add_get("/version/", self.version)
        for path in HEALTH_PATHS:
            router.add_get(path, self.health)
            router.add_get(path + "/{check:.*}", self.health)
        router.add_get("/metrics", self.metrics)

    async def version(self, request: web.Request) -> web.StreamResponse:
        return object_response(request, version_info())

    async def metrics(self, request: web.Request) -> web.StreamResponse:
        return web.Response(
            text="".join(text() for text in self.metrics_texts),
            content_type="text/plain",
            headers={"Cache-Control": NO_CACHE},
        )

    async def health(self, request: web.Request) -> web.StreamResponse:
        check = request.path.strip("/")
        checks = await self._checks(check)
        healthy = all(checks.values())
        if "verbose" in request.query:
            lines = [
                f"[{'+' if ok else '-'}]{name} {'ok' if ok else 'failed'}" for name, ok in checks.items()
            ]
            lines.append(f"{check} check {'passed' if healthy else 'failed'}")
            text = "\n".join(lines) + "\n"
        else:
            text = "ok" if healthy else f"{check} check failed"
        return web.Response(
            status=200 if healthy else 500,
            text=text,
            content_type="text/plain",
            headers={"Cache-Control": NO_CACHE, "X-Content-Type-Options": "nosniff"},
        )

    async def _checks(self, check: str) -> dict[str, bool]:
        """Each check of the probe `check` names (`readyz`, `healthz/ping`, ...), in order."""
        checks = {"ping": True, "storage": True}
        if check.startswith("readyz"):
            checks.update((name, ready()) for name, ready in self.ready_checks.items())
        if check.startswith(("readyz", "healthz")):
            try:
                await self.storage.current_revision()
            except (StorageError, OSError):
                checks["storage"] = False
        return checks
