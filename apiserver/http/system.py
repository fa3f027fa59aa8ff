"""The system endpoints: health (/healthz, /livez, /readyz and their checks), /version, /metrics."""

from __future__ import annotations

import asyncio
import logging
import platform
import sys
from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web

from apiserver import __version__
from apiserver.http.health import Check, PostStartHooks, answer_check, answer_probe, run_check
from apiserver.http.lifecycle import LIFECYCLE_KEY
from apiserver.http.responses import NO_CACHE, object_response
from apiserver.storage.interface import Readiness, Storage

log = logging.getLogger(__name__)

KUBERNETES_MINOR = "33"
HEALTH_PATHS = ("/healthz", "/livez", "/readyz")
# kube-apiserver's --etcd-healthcheck-timeout and --etcd-readycheck-timeout (2 s each).
STORAGE_CHECK_TIMEOUT = 2.0
# The post-start hook that waits for the watch cache, as kube-apiserver names it (behind its
# WatchCacheInitializationPostStartHook gate), and how long it waits before it reports ready all
# the same (kube-apiserver's --storage-initialization-timeout, 1 min).
STORAGE_READINESS_HOOK = "storage-readiness"
STORAGE_INITIALIZATION_TIMEOUT = 60.0


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

    The probes run upstream's checks, in its order and by its names (`apiserver.http.health`):
    `ping`, `log`, `etcd` (the storage answers its revision within 2 s; /livez leaves it out, as a
    live process need not reach its storage), on /readyz `etcd-readiness` and each of
    `ready_checks` (e.g. `informer-sync`: authorization's informers have synced), then each of
    `post_start_hooks` (e.g. `poststarthook/storage-readiness`, failing until every watch cache is
    filled: `await_storage_readiness`), and last on /readyz `shutdown`, which fails from the moment
    the server's shutdown is initiated while the rest is still served. `metrics` gives the
    Prometheus text /metrics answers (of every worker, when the server runs several).
    """

    def __init__(
        self,
        storage: Storage,
        *,
        ready_checks: Mapping[str, Check] | None = None,
        post_start_hooks: PostStartHooks | None = None,
        metrics: Callable[[], Awaitable[str]] | None = None,
    ) -> None:
        self.storage = storage
        self.ready_checks = dict(ready_checks or {})
        self.post_start_hooks = post_start_hooks or PostStartHooks()
        self.metrics_text = metrics

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
        # Prometheus' text format 0.0.4, as kube-apiserver answers a scrape that asks for no other.
        return web.Response(
            body=(await self.metrics_text() if self.metrics_text else "").encode(),
            headers={"Cache-Control": NO_CACHE, "Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    async def health(self, request: web.Request) -> web.StreamResponse:
        probe = request.path.strip("/").split("/", 1)[0]
        checks = self.checks(request, probe)
        check = request.match_info.get("check")
        if check is not None:
            return await answer_check(check, checks)
        return await answer_probe(request, probe, checks)

    async def ready(self) -> bool:
        """Whether every /readyz check but `shutdown` passes now (asked without a request)."""
        for _, check in self._checks("readyz"):
            if await run_check(check) is not None:
                return False
        return True

    def checks(self, request: web.Request, probe: str) -> list[tuple[str, Check]]:
        """The checks of `probe` (healthz, livez or readyz), in upstream's order."""
        checks = self._checks(probe)
        if probe == "readyz":
            lifecycle = request.config_dict.get(LIFECYCLE_KEY)
            checks.append(("shutdown", lambda: lifecycle is None or not lifecycle.shutdown_initiated))
        return checks

    def _checks(self, probe: str) -> list[tuple[str, Check]]:
        checks: list[tuple[str, Check]] = [("ping", _passes), ("log", _passes)]
        if probe != "livez":
            checks.append(("etcd", self._storage_answers))
        if probe == "readyz":
            checks.append(("etcd-readiness", self._storage_answers))
            checks += self.ready_checks.items()
        checks += self.post_start_hooks.checks()
        return checks

    async def _storage_answers(self) -> None:
        try:
            async with asyncio.timeout(STORAGE_CHECK_TIMEOUT):
                await self.storage.current_revision()
        except TimeoutError:
            raise TimeoutError(f"the storage did not answer within {STORAGE_CHECK_TIMEOUT:g}s") from None


def _passes() -> bool:
    return True


async def await_storage_readiness(
    storage: Storage,
    done: Callable[[], None],
    *,
    give_up_after: float = STORAGE_INITIALIZATION_TIMEOUT,
) -> None:
    """Upstream's `storage-readiness` post-start hook: `done` once `storage` (started) is ready to
    serve every resource, i.e. each watch cache has its initial list and watch; at once for a
    storage with no readiness to wait for (--watch-cache=false). As upstream, it stays done when a
    cache restarts later (reads then go to the storage), and after `give_up_after` seconds it stops
    waiting, says so, and is done all the same."""
    if isinstance(storage, Readiness):
        try:
            async with asyncio.timeout(give_up_after):
                await storage.wait_ready()
        except TimeoutError:
            log.warning("Deadline exceeded while waiting for storage readiness... ignoring")
        else:
            log.info("Storage is ready for all registered resources")
    done()
