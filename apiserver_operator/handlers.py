"""kopf handlers, thin over `reconcile` and `retention`: reconcile on change and on a timer (which
also renews certificates and puts back drifted children), garbage-collect Events in a daemon beside
it, and remove the children when an Installation is deleted.

kopf keeps its own bookkeeping in annotations under `operator.core.io/` (not in status, which
belongs to the conditions) and records what the handlers do as core/v1 Events of the cluster.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import kopf

from apiserver.cluster.connection import SERVICE_ACCOUNT_DIR, in_cluster_connection
from apiserver.machinery.gofmt import parse_go_duration
from apiserver.machinery.types import JSON
from apiserver_operator import exporting, metrics, reconcile, retention, status
from apiserver_operator.kube import ApiError, KubeClient, resource_path
from apiserver_operator.spec import FINALIZER, GROUP, PLURAL, VERSION, parse_spec

MAX_GC_BACKOFF = 600.0
TICK_SECONDS = 5.0
GC_WAIT = 5.0  # before coreio is Available, and the first wait after a failed run
UNREACHABLE = (ApiError, aiohttp.ClientError, OSError, TimeoutError)


@dataclass(frozen=True)
class HandlerConfig:
    reconcile_interval: float = 30.0
    namespaces: tuple[str, ...] = ()  # those it manages; none: every namespace


def login_in_cluster(
    directory: Path = SERVICE_ACCOUNT_DIR, environ: dict[str, str] | None = None
) -> kopf.ConnectionInfo | None:
    """The pod's service account at KUBERNETES_SERVICE_HOST/PORT, as client-go and KubeClient reach
    it. kopf's own `login_with_service_account` names https://kubernetes.default.svc, which only a
    cluster DNS resolves (and is not the address the pod was given)."""
    connection = in_cluster_connection(directory, environ)
    if connection is None or connection.token_file is None:
        return None
    namespace = directory / "namespace"
    return kopf.ConnectionInfo(
        server=connection.server,
        ca_path=str(directory / "ca.crt"),
        token=connection.token_file.read_text().strip(),
        default_namespace=namespace.read_text().strip() if namespace.exists() else None,
    )


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _lock(memo: kopf.Memo) -> asyncio.Lock:
    # One reconciliation of an object at a time: change handlers and timers run concurrently.
    lock = memo.get("lock")
    if lock is None:
        lock = memo["lock"] = asyncio.Lock()
    assert isinstance(lock, asyncio.Lock)
    return lock


def _client(memo: kopf.Memo) -> KubeClient:
    client = memo["client"]
    assert isinstance(client, KubeClient)
    return client


def _default_image(memo: kopf.Memo) -> str:
    """The operator's --default-image, for an Installation whose spec names none."""
    return str(memo.get("default_image", ""))


async def _reconcile(
    body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, logger: kopf.Logger, interval: float
) -> None:
    """Reconciles; notes in the memo whether coreio answers through the aggregation layer (the
    Event GC waits for it) and when the next reconciliation is due: after `interval`, or sooner
    when a certificate step falls due before that."""
    obj: JSON = dict(body)
    now = _now()
    async with _lock(memo):
        if memo.get("deleting") or body.get("metadata", {}).get("deletionTimestamp"):
            return  # a tick that fired before the deletion must not recreate children
        try:
            outcome = await reconcile.reconcile(_client(memo), obj, now, _default_image(memo))
        except reconcile.Refused as refusal:
            metrics.RECONCILE_TOTAL.labels(result="refused").inc()
            if memo.get("refused") != refusal.message:
                kopf.warn(body, reason=refusal.reason, message=refusal.message)
                memo["refused"] = refusal.message
            patch["status"] = status.refused(obj, refusal, now)
            memo["reconcile_due"] = time.monotonic() + interval
            return
        except UNREACHABLE as exc:
            metrics.RECONCILE_TOTAL.labels(result="error").inc()
            patch["status"] = status.failed(obj, exc, now)
            raise kopf.TemporaryError(str(exc), delay=5) from exc
    memo["refused"] = None
    metrics.RECONCILE_TOTAL.labels(result="success").inc()
    for action in outcome.actions:
        kopf.info(body, reason="Certificates", message=action)
        logger.info(action)
    patch["status"] = status.reconciled(obj, outcome, now)
    memo["available"] = outcome.available[0] == "True"
    if (keeper := memo.get("keeper")) is not None:
        keeper.changed.set()  # the spec may deploy the exporters otherwise: not a resync away
    memo["reconcile_due"] = time.monotonic() + _until_next(outcome, now, interval)


def _until_next(outcome: reconcile.Outcome, now: datetime.datetime, interval: float) -> float:
    if outcome.certificates is None:
        return interval
    return max(0.0, min(interval, (outcome.certificates.next_due - now).total_seconds()))


async def _given_secret_changed(body: kopf.Body, memo: kopf.Memo) -> bool:
    """Whether the Secret the user brings (spec.certificates.secretName) changed since the last
    tick: its new certificates (or a new CA) reach the caBundle within a tick, not an interval."""
    certificates = dict(body.get("spec", {})).get("certificates") or {}
    name = str(certificates.get("secretName") or "")
    if not name:
        return False
    path = resource_path("v1", "secrets", str(body.get("metadata", {}).get("namespace", "")), name)
    try:
        secret = await _client(memo).get_or_none(path)
    except UNREACHABLE:
        return False  # the reconciliation reports it
    version = (secret or {}).get("metadata", {}).get("resourceVersion")
    seen, memo["given_version"] = memo.get("given_version", version), version
    return bool(seen != version)


async def _patch_retention_status(memo: kopf.Memo, body: kopf.Body, retention_status: JSON) -> None:
    meta = body.get("metadata", {})
    path = resource_path(f"{GROUP}/{VERSION}", PLURAL, meta.get("namespace", ""), meta.get("name", ""))
    await _client(memo).merge_patch(f"{path}/status", {"status": {"eventRetention": retention_status}})


async def _collect_events(body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger) -> float:
    """One Event GC run, once coreio is Available (it goes through the aggregation layer); returns
    the seconds until the next: the interval, or after a failure a wait doubled each time."""
    try:
        policy = parse_spec(dict(body.get("spec", {}))).event_retention
    except ValueError:
        return GC_WAIT  # the reconciliation reports the spec
    if not memo.get("available"):
        return GC_WAIT
    try:
        report = await retention.collect_events(_client(memo), policy)
    except UNREACHABLE as exc:
        backoff = min(MAX_GC_BACKOFF, max(float(memo.get("gc_backoff", 0.0)) * 2, GC_WAIT))
        memo["gc_backoff"] = backoff
        logger.warning(f"Event retention failed, next try in {backoff:.0f}s: {exc}")
        await _patch_retention_status(memo, body, {"lastError": str(exc)[:500]})
        return backoff
    memo["gc_backoff"] = 0.0
    await _patch_retention_status(memo, body, report.status())
    if report.deleted_by_age or report.deleted_by_count:
        kopf.info(
            body,
            reason="EventRetention",
            message=f"deleted {report.deleted_by_age} Events by age, {report.deleted_by_count} by count",
        )
    return parse_go_duration(policy.interval)


async def _keep_exporters(keeper: exporting.Keeper, body: kopf.Body, memo: kopf.Memo) -> float:
    """One pass of the exporters' upkeep (once coreio is Available: the EventExports are read
    through the aggregation layer); returns the seconds until the next unless an export changes."""
    keeper.changed.clear()  # seen now, whatever this pass does: the wait after it must not end at once
    if memo.get("deleting") or body.get("metadata", {}).get("deletionTimestamp"):
        return GC_WAIT
    try:
        inst = reconcile.installation(dict(body), _default_image(memo))
    except reconcile.Refused:
        return GC_WAIT  # the reconciliation reports it
    if not memo.get("available"):
        return GC_WAIT
    try:
        async with _lock(memo):  # never beside the deletion's removal of the exporters
            if memo.get("deleting"):
                return GC_WAIT
            await keeper.step(inst)
    except UNREACHABLE as exc:
        logging.getLogger(__name__).warning(f"keeping the exporters failed, next try soon: {exc}")
        return GC_WAIT
    return keeper.resync if keeper.synced or keeper.removed else 1.0


async def _changed_or(keeper: exporting.Keeper, stopped: kopf.DaemonStopped, delay: float) -> None:
    """Waits `delay` seconds, less when an export changes or the daemon is stopped."""
    waits = [asyncio.ensure_future(keeper.changed.wait()), asyncio.ensure_future(stopped.wait(delay))]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


def _register_exporters(registry: kopf.OperatorRegistry, config: HandlerConfig) -> None:
    resource = (GROUP, VERSION, PLURAL)

    # Each EventExport's exporter (exporting.py), kept by a daemon of its own beside the
    # reconciliation, as the Event GC is.
    @kopf.daemon(*resource, registry=registry, cancellation_timeout=10.0)
    async def export(body: kopf.Body, memo: kopf.Memo, stopped: kopf.DaemonStopped, **_: Any) -> None:
        keeper = memo["keeper"] = exporting.Keeper(
            _client(memo), config.namespaces, config.reconcile_interval
        )
        try:
            while not stopped:
                await _changed_or(keeper, stopped, await _keep_exporters(keeper, body, memo))
        finally:
            await keeper.stop()


def register(registry: kopf.OperatorRegistry, config: HandlerConfig) -> None:
    resource = (GROUP, VERSION, PLURAL)

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        # The same sources as KubeClient, in the same order: a kubeconfig, else the pod's account.
        return kopf.login_with_kubeconfig(**kwargs) or login_in_cluster()

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.persistence.finalizer = FINALIZER
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)
        settings.posting.level = logging.INFO
        settings.watching.server_timeout = 300

    @kopf.on.resume(*resource, registry=registry)
    @kopf.on.create(*resource, registry=registry)
    @kopf.on.update(*resource, field="spec", registry=registry)
    async def changed(
        body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, logger: kopf.Logger, **_: Any
    ) -> None:
        await _reconcile(body, patch, memo, logger, config.reconcile_interval)

    # The timer looks every few seconds whether a reconciliation is due (`_reconcile` says when),
    # so that a certificate renewal or rollover step due before the next interval is not late.
    @kopf.timer(*resource, interval=min(config.reconcile_interval, TICK_SECONDS), registry=registry)
    async def tick(
        body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, logger: kopf.Logger, **_: Any
    ) -> None:
        changed = await _given_secret_changed(body, memo)
        if changed or time.monotonic() >= float(memo.get("reconcile_due", 0.0)):
            await _reconcile(body, patch, memo, logger, config.reconcile_interval)

    # Beside reconciliation, never inside it: a long run after a flood of Events must not delay
    # certificate renewal or drift repair.
    @kopf.daemon(*resource, registry=registry, cancellation_timeout=10.0)
    async def collect(
        body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, stopped: kopf.DaemonStopped, **_: Any
    ) -> None:
        while not stopped:
            await stopped.wait(await _collect_events(body, memo, logger))

    _register_exporters(registry, config)

    @kopf.on.delete(*resource, registry=registry)
    async def deleted(body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
        try:
            inst = reconcile.installation(dict(body), _default_image(memo))
        except reconcile.Refused:
            # A spec refused now may have served before (a working SQLite install scaled to three):
            # its children are found by namespace, name and owner alone.
            inst = reconcile.identity(dict(body))
        async with _lock(memo):
            memo["deleting"] = True
            removed = await reconcile.remove_children(_client(memo), inst)
            removed += await exporting.remove(_client(memo), config.namespaces, inst)
        logger.info(f"removed {', '.join(removed) or 'nothing'}")
