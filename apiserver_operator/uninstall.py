"""`coreio-operator uninstall`: what the chart's pre-delete hook runs, so that `helm uninstall`
alone removes everything.

Helm deletes kinds it does not know (the Installation) last, after the operator's Deployment and
RBAC, so the operator's finalizer would never run and the Installation would stay Terminating. The
hook runs first, while the operator still runs: it deletes the Installation and waits for the
operator to remove its children. Should the operator not finish in time, or not run at all (its
Lease released, or not renewed for a lease duration), the hook removes the children itself, from
the Installation's namespace, name and owner alone (never its spec, which may be one the operator
refuses), and the exporters it deployed (by label, in the namespaces given), then drops the
finalizer."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from apiserver.cluster.leader import LeaderElection
from apiserver.machinery.types import JSON
from apiserver_operator import exporting, reconcile
from apiserver_operator.kube import ApiError, KubeClient, resource_path
from apiserver_operator.spec import FINALIZER, GROUP, PLURAL, VERSION

POLL_SECONDS = 1.0


async def _gone(client: KubeClient, path: str, seconds: float) -> bool:
    """Whether `path` is gone within `seconds` (polled)."""
    return not await _wait_for_operator(client, path, seconds, None)


async def _wait_for_operator(
    client: KubeClient, path: str, seconds: float, lease: LeaderElection | None
) -> str:
    """Polls until `path` is gone (returns ""), or says why the wait ended: `seconds` passed, or
    `lease` shows that no operator leads."""
    try:
        async with asyncio.timeout(seconds):
            while True:  # a watch would do too; a hook waits seconds, once
                if await client.get_or_none(path) is None:
                    return ""
                if lease is not None and not await _leads(lease):
                    return f"no operator leads (Lease {lease.namespace}/{lease.name} released or not renewed)"
                await asyncio.sleep(POLL_SECONDS)
    except TimeoutError:
        return f"the operator did not finish within {seconds:g}s"


async def _leads(lease: LeaderElection) -> bool:
    try:
        return await lease.someone_leads()
    except ApiError:
        return True  # unreadable: wait out the timeout, as without a Lease


async def _drop_finalizer(client: KubeClient, path: str, attempts: int = 5) -> None:
    for _ in range(attempts):
        current: JSON | None = await client.get_or_none(path)
        if current is None:
            return
        meta = current["metadata"]
        finalizers = [f for f in meta.get("finalizers", []) if f != FINALIZER]
        # resourceVersion makes the merge patch conditional: a finalizer added meanwhile is kept.
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
        try:
            await client.merge_patch(path, patch)
            return
        except ApiError as exc:
            if exc.status != 409:
                raise
    raise RuntimeError(f"{path}: the finalizer could not be removed ({attempts} conflicts in a row)")


async def uninstall(
    client: KubeClient,
    namespaces: Sequence[str],
    name: str,
    wait: float,
    lease: LeaderElection | None = None,
) -> list[str]:
    """Deletes the Installation `name` of the first of `namespaces` (the exporters it deployed are
    looked for in each) and returns what happened, one line per step. `lease`: the operator's, so
    that the wait ends as soon as it shows no operator running."""
    namespace = namespaces[0]
    path = resource_path(f"{GROUP}/{VERSION}", PLURAL, namespace, name)
    body = await client.get_or_none(path)
    if body is None:
        return [f"Installation {namespace}/{name}: not found, nothing to remove"]
    await client.delete(path)
    if not (why := await _wait_for_operator(client, path, wait, lease)):
        return [f"Installation {namespace}/{name}: deleted, its children removed by the operator"]
    steps = [f"Installation {namespace}/{name}: {why}"]
    inst = reconcile.identity(body)
    removed = await reconcile.remove_children(client, inst)
    removed += await exporting.remove(client, namespaces, inst)
    steps.append(f"removed {', '.join(removed) or 'nothing'}")
    await _drop_finalizer(client, path)
    if not await _gone(client, path, wait):
        raise RuntimeError(f"Installation {namespace}/{name} is still there after its finalizer was removed")
    steps.append(f"Installation {namespace}/{name}: deleted")
    return steps
