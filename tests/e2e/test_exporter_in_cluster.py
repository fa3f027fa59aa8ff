"""coreio-export in a real cluster, through a real kube-apiserver that aggregates coreio (Events in
v1, EventExports in v1alpha1) and serves the Secrets a sink reads and the Lease replicas elect
through.

A webhook sink's headers come from a real Secret of the export's namespace. With --leader-elect,
of two replicas of one EventExport's exporter one exports, the other waits; the leader killed (SIGKILL) in
the middle of a stream of writes, the other takes over within the Lease's duration and goes on from
the position the first one had delivered: every acknowledged Event reaches the sink, in order, the
only duplicates those of the batch in flight at the kill. Stopped (SIGTERM), the leader hands the
Lease back at once. Short timings (a 3 s Lease) keep it fast; the defaults are client-go's 15/10/2 s.
"""

from __future__ import annotations

import asyncio
import base64
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apiserver.cluster.connection import load_kubeconfig
from apiserver_operator import exporting
from apiserver_operator.children import Installation
from apiserver_operator.kube import KubeClient
from apiserver_operator.spec import parse_spec
from tests.support.aggregation import AggregatedCoreio
from tests.support.controlplane import ControlPlane
from tests.support.exporter import SERVES_EXPORTS, ExporterProcess, delivery, export, read_lines, write_events
from tests.support.server import free_port
from tests.support.waiting import wait_until
from tests.support.webhook_receiver import Receiver

pytestmark = pytest.mark.e2e

NAMESPACE = "export-leader"
NAME = "warnings"
ALPHA = "v1alpha1.events.core.io"
SERVICE = "coreio-exports"
TIMINGS = [
    "--leader-elect",
    "--leader-elect-lease-duration=3s",
    "--leader-elect-renew-deadline=2s",
    "--leader-elect-retry-period=500ms",
]
BATCH = 100  # export()'s maxEvents: the most a kill may send twice
KEPT = "export-kept"  # the operator's upkeep of exporters, apart from the exports above


@pytest.fixture(scope="module")
def serves_exports(
    control_plane: ControlPlane,
    aggregated_coreio: AggregatedCoreio,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[AggregatedCoreio]:
    """A second coreio on the same etcd prefix (a replica of the session's), serving the alpha
    version too, registered for it alone; the APIService is removed afterwards, so that later tests
    see the discovery they expect."""
    coreio = AggregatedCoreio(
        control_plane,
        tmp_path_factory.mktemp("coreio-exports"),
        extra_args=[SERVES_EXPORTS],
        service_dns=f"{SERVICE}.coreio-system.svc",
    )
    coreio.start()
    try:
        control_plane.apply(*_alpha_registration(coreio))
        wait_until(
            lambda: coreio.available(ALPHA)[0] == "True", timeout=120, message=lambda: coreio.log_tail()
        )
        wait_until(
            lambda: (
                "eventexports"
                in control_plane.run("api-resources", "--api-group=events.core.io", check=False).stdout
            ),
            timeout=60,
            message=lambda: "kubectl to discover EventExports; coreio: " + coreio.log_tail(),
        )
        control_plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        yield coreio
    finally:
        control_plane.run("delete", "eventexports", "--all", "-n", NAMESPACE, "--wait=false", check=False)
        control_plane.run("delete", "apiservice", ALPHA, "--ignore-not-found", check=False)
        control_plane.run(
            "delete", "service", SERVICE, "-n", "coreio-system", "--ignore-not-found", check=False
        )
        coreio.stop()
        # Gone from discovery, and from kubectl's cache of it, before the next module's tests.
        wait_until(
            lambda: _alpha_gone(control_plane), timeout=60, message="the alpha version to leave discovery"
        )


def _alpha_gone(plane: ControlPlane) -> bool:
    shutil.rmtree(plane.home / ".kube" / "cache", ignore_errors=True)
    group = plane.run("get", "--raw", "/apis/events.core.io", check=False).stdout
    return "v1alpha1" not in group and "eventexports" not in plane.run("api-resources", check=False).stdout


def _alpha_registration(coreio: AggregatedCoreio) -> list[dict[str, Any]]:
    assert coreio.serving_ca is not None
    port = coreio.server.port
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": "coreio-system"},
            "spec": {"type": "ExternalName", "externalName": "localhost", "ports": [{"port": port}]},
        },
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": ALPHA},
            "spec": {
                "group": "events.core.io",
                "version": "v1alpha1",
                "service": {"namespace": "coreio-system", "name": SERVICE, "port": port},
                "caBundle": base64.b64encode(coreio.serving_ca.cert_pem).decode(),
                "groupPriorityMinimum": 1000,
                "versionPriority": 5,
            },
        },
    ]


def lease(plane: ControlPlane) -> dict[str, Any]:
    return dict(plane.json("get", "lease", f"coreio-export-{NAME}", "-n", NAMESPACE)["spec"])


def leading(exporter: ExporterProcess) -> bool:
    return "leading as" in exporter.log.read_text()


def test_one_replica_exports_and_the_other_takes_over_losing_nothing(
    control_plane: ControlPlane, serves_exports: AggregatedCoreio, tmp_path: Path
) -> None:
    sink = tmp_path / "out.jsonl"
    control_plane.apply(
        export(NAME, {"jsonLines": {"path": str(sink)}})
        | {"metadata": {"name": NAME, "namespace": NAMESPACE}}
    )
    first, second = (
        ExporterProcess(control_plane, NAMESPACE, NAME, tmp_path / f"exporter-{n}.log", TIMINGS)
        for n in (1, 2)
    )
    first.start()
    try:
        wait_until(lambda: leading(first), timeout=30, message=lambda: first.log.read_text())
        second.start()
        wait_until(
            lambda: "waiting to lead" in second.log.read_text(),
            timeout=30,
            message=lambda: second.log.read_text(),
        )

        def kill_the_leader(elapsed: float) -> None:
            if elapsed > 3 and first.alive():
                first.kill()

        written = asyncio.run(
            write_events(
                control_plane, [NAMESPACE], rate=100, seconds=8, prefix="lead", during=kill_the_leader
            )
        )
        assert not first.alive() and written.refused == 0
        wait_until(lambda: leading(second), timeout=15, message=lambda: second.log.read_text())
        names = {name for _, name, _, _ in written.events}
        wait_until(
            lambda: names <= {r["event"]["metadata"]["name"] for r in read_lines(sink)},
            timeout=60,
            message=lambda: f"{len(names)} written; the second exporter: {second.log.read_text()[-2000:]}",
        )
        got = delivery(read_lines(sink))
        assert got.out_of_order == []
        assert got.duplicates <= BATCH, got.duplicates
        print(f"{len(names)} Events, {got.duplicates} sent twice across the kill")
        # Stopped, the leader sends what it holds, exits 0 and hands the Lease back.
        assert second.stop() == 0
        assert lease(control_plane).get("holderIdentity") in (None, "")
    finally:
        for exporter in (first, second):
            if exporter.alive():
                exporter.kill()


def test_a_waiting_replica_stops_at_once_and_exits_0(
    control_plane: ControlPlane, serves_exports: AggregatedCoreio, tmp_path: Path
) -> None:
    holder = ExporterProcess(control_plane, NAMESPACE, NAME, tmp_path / "holder.log", TIMINGS)
    waiting = ExporterProcess(control_plane, NAMESPACE, NAME, tmp_path / "waiting.log", TIMINGS)
    holder.start()
    try:
        wait_until(lambda: leading(holder), timeout=30, message=lambda: holder.log.read_text())
        waiting.start()
        wait_until(lambda: "waiting to lead" in waiting.log.read_text(), timeout=30)
        assert waiting.stop() == 0
        assert "leading as" not in waiting.log.read_text()
        assert holder.alive()
    finally:
        for exporter in (holder, waiting):
            exporter.stop()


def test_a_webhooks_headers_come_from_a_secret_of_the_exports_namespace(
    control_plane: ControlPlane, serves_exports: AggregatedCoreio, tmp_path: Path
) -> None:
    receiver = Receiver(free_port())
    receiver.start()
    token = "Bearer s3cret-from-the-cluster"
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "hook-token", "namespace": NAMESPACE},
    }
    control_plane.apply(secret | {"stringData": {"Authorization": token, "X-Tenant": "shop"}})
    sink = {"webhook": {"url": receiver.url, "headersFrom": {"name": "hook-token"}}}
    control_plane.apply(export("hooked", sink) | {"metadata": {"name": "hooked", "namespace": NAMESPACE}})
    exporter = ExporterProcess(control_plane, NAMESPACE, "hooked", tmp_path / "hooked.log")
    exporter.start()
    try:
        wait_until(
            lambda: "position" in str(control_plane.json("get", "eventexport", "hooked", "-n", NAMESPACE)),
            timeout=30,
            message=lambda: exporter.log.read_text(),
        )
        written = asyncio.run(write_events(control_plane, [NAMESPACE], rate=50, seconds=1, prefix="hooked"))
        names = {name for _, name, _, _ in written.events}
        wait_until(
            lambda: names <= {r["event"]["metadata"]["name"] for r in receiver.records},
            timeout=30,
            message=lambda: exporter.log.read_text(),
        )
        assert receiver.headers
        assert all(h.get("Authorization") == token and h.get("X-Tenant") == "shop" for h in receiver.headers)
    finally:
        exporter.stop()
        receiver.stop()


def _exporter_objects(plane: ControlPlane, namespace: str) -> list[str]:
    found = []
    for kind in ("deployments", "serviceaccounts", "leases", "roles", "rolebindings"):
        listed = plane.json("get", kind, "-n", namespace, "-l", "app.kubernetes.io/component=exporter")
        found += [f"{kind}/{item['metadata']['name']}" for item in listed["items"]]
    for kind in ("clusterroles", "clusterrolebindings"):
        if plane.run("get", kind, "coreio:export-events", check=False).returncode == 0:
            found.append(f"{kind}/coreio:export-events")
    return sorted(found)


async def _keep(plane: ControlPlane, keeper_of: Any, steps: list[tuple[Any, Any]]) -> list[list[str]]:
    """Runs the operator's exporter upkeep (exporting.Keeper, with the admin's credentials) once
    after each step's change to the cluster; what exists after each."""
    client = KubeClient(load_kubeconfig(plane.kubeconfig))
    keeper = keeper_of(client)
    seen = []
    try:
        for change, inst in steps:
            change()
            keeper.changed.clear()
            await keeper.step(inst)
            if inst.spec.event_export.exporters.deploy:
                await asyncio.wait_for(keeper.changed.wait(), timeout=30)  # the watch saw it
                await keeper.step(inst)
            seen.append(_exporter_objects(plane, KEPT))
    finally:
        await keeper.stop()
        await client.close()
    return seen


def test_the_operator_keeps_an_exporter_for_each_export_and_prunes_what_none_wants(
    control_plane: ControlPlane, serves_exports: AggregatedCoreio
) -> None:
    """The operator's upkeep against the real kube-apiserver (no controller-manager: Deployments
    stay unscheduled; tests/e2e/test_operator_on_node.py runs them): an export of every namespace
    gets the cluster-wide binding; changed to its own namespace, a RoleBinding there instead; a
    second export its own objects; deleted, its objects go; deployment turned off, all go."""
    spec = {"eventExport": {"enabled": True}}
    inst = Installation("coreio-system", "coreio", "u-1", parse_spec({"image": "coreio:e2e", **spec}))
    off = Installation(
        "coreio-system", "coreio", "u-1", parse_spec({"eventExport": {"exporters": {"deploy": False}}})
    )
    sink = {"jsonLines": {"path": "-"}}

    control_plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KEPT}})

    def put(name: str, namespaces: list[str]) -> Any:
        obj = export(name, sink) | {"metadata": {"name": name, "namespace": KEPT}}
        obj["spec"]["namespaces"] = namespaces
        return lambda: control_plane.apply(obj)

    def delete(name: str) -> Any:
        return lambda: control_plane.run("delete", "eventexport", name, "-n", KEPT)

    seen = asyncio.run(
        _keep(
            control_plane,
            lambda client: exporting.Keeper(client, [KEPT], resync=0.0),
            [
                (put("kept", ["*"]), inst),
                (put("kept", [KEPT]), inst),
                (put("other", []), inst),
                (delete("other"), inst),
                (lambda: None, off),
            ],
        )
    )
    kept = [f"{kind}/coreio-export-kept" for kind in ("deployments", "leases", "roles", "serviceaccounts")]
    other = [f"{kind}/coreio-export-other" for kind in ("deployments", "leases", "roles", "serviceaccounts")]
    reader = ["clusterroles/coreio:export-events"]
    cluster_binding = ["clusterrolebindings/coreio:export-events"]
    assert seen[0] == sorted([*kept, *reader, *cluster_binding, "rolebindings/coreio-export-kept"])
    bound_here = [f"rolebindings/coreio-export:{KEPT}:kept", "rolebindings/coreio-export-kept"]
    assert seen[1] == sorted([*kept, *reader, *bound_here])
    other_bound = [f"rolebindings/coreio-export:{KEPT}:other", "rolebindings/coreio-export-other"]
    assert seen[2] == sorted([*kept, *other, *reader, *bound_here, *other_bound])
    assert seen[3] == seen[1]
    assert seen[4] == []
    control_plane.run("delete", "eventexport", "kept", "-n", KEPT)
