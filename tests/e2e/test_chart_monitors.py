"""The chart's objects for Prometheus and its NetworkPolicies against the real thing.

A kube-apiserver 1.33 of this module's own, with the Prometheus Operator's CRDs (generated from its
published API module by `tests.support.prometheus_crds`), takes the ServiceMonitor, the PodMonitor,
the PrometheusRule, the NetworkPolicies and the metrics reader's RBAC with `kubectl apply --dry-run=server
--validate=strict`: an unknown or misspelt field, a wrong type, enum or pattern is refused there, as
the tests below show it is. And the ClusterRole is what a scraper following the ServiceMonitor
needs: coreio, delegating authentication and authorization to that cluster, answers /metrics over
TLS verified for the ServiceMonitor's serverName to the token of the ServiceAccount the chart binds,
and 403 to another one.
"""

from __future__ import annotations

import copy
import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import prometheus_crds
from tests.support.aggregation import AggregatedCoreio
from tests.support.chart import NAMESPACE, RELEASE, ChartHelm, render
from tests.support.controlplane import ControlPlane, skip_without_control_plane, start_control_plane
from tests.support.gobuild import GoUnavailable
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
READER = f"{RELEASE}-coreio-metrics-reader"
PROMETHEUS = ("prometheus", "monitoring")  # the ServiceAccount the chart binds: name, namespace
ENABLED = (
    "metrics.serviceMonitor.enabled=true",
    "metrics.podMonitor.enabled=true",
    "metrics.prometheusRule.enabled=true",
    "networkPolicy.enabled=true",
    f"metrics.serviceMonitor.prometheusServiceAccount.name={PROMETHEUS[0]}",
    f"metrics.serviceMonitor.prometheusServiceAccount.namespace={PROMETHEUS[1]}",
)
RELABELINGS = [
    {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node", "action": "replace"},
    {"sourceLabels": ["__address__"], "modulus": 4, "targetLabel": "__tmp_hash", "action": "hashmod"},
]
CUSTOMISED = (
    *ENABLED,
    "installation.name=prod",
    'installation.spec={"replicas":3,"certificates":{"secretName":"prod-tls"},"pod":{"port":9443},'
    '"storage":{"type":"etcd","etcd":{"endpoints":["https://etcd-0.etcd:2379","https://etcd.example:12379"]}}}',
    "metrics.serviceMonitor.labels.release=kube-prometheus-stack",
    "metrics.serviceMonitor.interval=30s",
    "metrics.serviceMonitor.scrapeTimeout=10s",
    f"metrics.serviceMonitor.relabelings={json.dumps(RELABELINGS)}",
    f"metrics.serviceMonitor.metricRelabelings={json.dumps(RELABELINGS)}",
    'metrics.serviceMonitor.authorization={"type":"Bearer","credentials":{"name":"scraper","key":"token"}}',
    "metrics.podMonitor.namespace=monitoring",
    "metrics.podMonitor.labels.release=kube-prometheus-stack",
    "metrics.podMonitor.interval=1m",
    "metrics.podMonitor.scrapeTimeout=20s",
    f"metrics.podMonitor.relabelings={json.dumps(RELABELINGS)}",
    f"metrics.podMonitor.metricRelabelings={json.dumps(RELABELINGS)}",
    "metrics.prometheusRule.namespace=monitoring",
    "metrics.prometheusRule.labels.release=kube-prometheus-stack",
    'metrics.prometheusRule.warningStorm={"perSecond":0.5,"window":"15m","for":"1h","severity":"critical"}',
    "networkPolicy.kubeAPIServerPorts=[443,6443,8443]",
    'networkPolicy.apiserver.from=[{"ipBlock":{"cidr":"10.0.0.0/8","except":["10.1.0.0/16"]}},'
    '{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}},'
    '"podSelector":{"matchLabels":{"app.kubernetes.io/name":"prometheus"}}}]',
    'networkPolicy.apiserver.extraEgress=[{"to":[{"ipBlock":{"cidr":"192.0.2.0/24"}}],'
    '"ports":[{"port":30000,"endPort":30100,"protocol":"TCP"}]}]',
    'networkPolicy.operator.from=[{"podSelector":{"matchLabels":{"app":"prometheus"}}}]',
    'networkPolicy.operator.extraEgress=[{"ports":[{"port":"https","protocol":"TCP"}]}]',
    'operator.watchNamespaces=["team-a"]',
)
VARIANTS = {"defaults": ENABLED, "customised": CUSTOMISED}
RBAC_TIMEOUT = 30.0
CHECKED = {
    "ServiceMonitor",
    "PodMonitor",
    "PrometheusRule",
    "NetworkPolicy",
    "ClusterRole",
    "ClusterRoleBinding",
}


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    skip_without_control_plane()
    try:
        crds = prometheus_crds.monitoring_crds(("servicemonitors", "podmonitors", "prometheusrules"))
    except GoUnavailable as exc:
        pytest.skip(f"no Prometheus Operator CRDs: {exc}")
    directory = Path(tempfile.mkdtemp(prefix="coreio-monitors-"))
    plane = start_control_plane(directory / "cp")
    try:
        plane.apply(*crds)
        names = [f"crd/{crd['metadata']['name']}" for crd in crds]
        plane.run("wait", "--for=condition=Established", *names, "--timeout=60s")
        plane.apply(
            *(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
                for n in (NAMESPACE, "monitoring")
            )
        )
        yield plane
    finally:
        plane.stop()
        if not os.environ.get("COREIO_KEEP_CONTROLPLANE"):
            shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def chart(helm: Path, tmp_path_factory: pytest.TempPathFactory) -> ChartHelm:
    return ChartHelm(helm, tmp_path_factory.mktemp("helm-home"))


def checked(objs: list[Obj]) -> list[Obj]:
    """What the values above add to the chart: the monitors, the policies, the metrics reader."""
    return [
        o
        for o in objs
        if o["kind"] in CHECKED
        and (o["kind"] not in {"ClusterRole", "ClusterRoleBinding"} or o["metadata"]["name"] == READER)
    ]


def dry_run(plane: ControlPlane, objs: list[Obj]) -> subprocess.CompletedProcess[str]:
    # One document each (a List would be checked by kubectl against the published OpenAPI first).
    args = ("apply", "--dry-run=server", "--validate=strict", "-f", "-")
    return plane.run(*args, input=yaml.safe_dump_all(objs), check=False)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_real_schemas_take_what_the_chart_renders(
    plane: ControlPlane, chart: ChartHelm, variant: str
) -> None:
    objs = checked(render(chart, *VARIANTS[variant]))
    kinds = sorted(o["kind"] for o in objs)
    assert kinds == [
        "ClusterRole",
        "ClusterRoleBinding",
        "NetworkPolicy",
        "NetworkPolicy",
        "PodMonitor",
        "PrometheusRule",
        "ServiceMonitor",
    ]
    done = dry_run(plane, objs)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("(server dry run)") == len(objs), done.stdout


def _endpoint(objs: list[Obj]) -> Obj:
    (monitor,) = [o for o in objs if o["kind"] == "ServiceMonitor"]
    found: Obj = monitor["spec"]["endpoints"][0]
    return found


def _of_kind(kind: str) -> Callable[[list[Obj]], Obj]:
    def pick(objs: list[Obj]) -> Obj:
        found: Obj = next(o for o in objs if o["kind"] == kind)
        return found

    return pick


BROKEN: dict[str, tuple[Callable[[list[Obj]], None], str]] = {
    "misspelt field": (
        lambda o: _endpoint(o)["tlsConfig"].update(serverNmae="coreio.coreio-system.svc"),
        'unknown field "spec.endpoints[0].tlsConfig.serverNmae"',
    ),
    "duration pattern": (lambda o: _endpoint(o).update(interval="30sec"), "spec.endpoints[0].interval"),
    "enum": (
        lambda o: _of_kind("PodMonitor")(o)["spec"]["podMetricsEndpoints"][0].update(scheme="tcp"),
        'spec.podMetricsEndpoints[0].scheme: Unsupported value: "tcp"',
    ),
    "type": (
        lambda o: _of_kind("ServiceMonitor")(o)["spec"]["namespaceSelector"].update(
            matchNames="coreio-system"
        ),
        "spec.namespaceSelector.matchNames",
    ),
    "rule's duration": (
        lambda o: _of_kind("PrometheusRule")(o)["spec"]["groups"][0]["rules"][0].update(
            {"for": "ten minutes"}
        ),
        "spec.groups[0].rules[0].for",
    ),
    "built-in kind": (
        lambda o: _of_kind("NetworkPolicy")(o)["spec"]["ingress"][0]["ports"][0].update(port=0),
        "spec.ingress[0].ports[0].port",
    ),
}


@pytest.mark.parametrize("breakage", list(BROKEN))
def test_a_wrong_field_is_refused(plane: ControlPlane, chart: ChartHelm, breakage: str) -> None:
    """The check above can fail: the same objects, each with one mistake, are refused by name."""
    objs = copy.deepcopy(checked(render(chart, *ENABLED)))
    breaking, message = BROKEN[breakage]
    breaking(objs)
    done = dry_run(plane, objs)
    assert done.returncode != 0
    assert message in done.stderr, done.stderr


# ----------------------------------------------------------------------------- scraping


@pytest.fixture(scope="module")
def coreio(plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AggregatedCoreio]:
    """coreio delegating to the module's cluster, serving a certificate for coreio.coreio-system.svc
    (not registered as an APIService: the scraper talks to it directly, as Prometheus to a pod)."""
    server = AggregatedCoreio(plane, tmp_path_factory.mktemp("coreio-scraped"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


class _Dialled(http.client.HTTPConnection):
    """HTTPS to `address`, verifying the certificate for `server_name`: Prometheus dials a pod's
    address and checks the name tlsConfig.serverName gives."""

    def __init__(self, address: str, port: int, server_name: str, context: ssl.SSLContext) -> None:
        super().__init__(server_name, port, timeout=30)
        self.address = address
        self.context = context

    def connect(self) -> None:
        raw = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self.context.wrap_socket(raw, server_hostname=self.host)


def scrape(coreio: AggregatedCoreio, endpoint: Obj, token: str) -> tuple[int, str]:
    """What Prometheus does for the ServiceMonitor's endpoint, with the token its token file holds.
    The CA stands for the serving Secret's ca.crt: the CA of the fixture's serving certificate."""
    assert endpoint["scheme"] == "https"
    context = ssl.create_default_context(cafile=str(coreio.pki_dir / "ca.crt"))
    connection = _Dialled("127.0.0.1", coreio.server.port, endpoint["tlsConfig"]["serverName"], context)
    try:
        connection.request("GET", endpoint["path"], headers={"Authorization": f"Bearer {token}"})
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def can_get_metrics(plane: ControlPlane, user: str) -> bool:
    done = plane.run("auth", "can-i", "get", "/metrics", f"--as={user}", check=False)
    return done.stdout.strip() == "yes"


def test_the_metrics_reader_lets_the_bound_scraper_in(
    plane: ControlPlane, chart: ChartHelm, coreio: AggregatedCoreio
) -> None:
    objs = checked(render(chart, *ENABLED))
    plane.apply(*[o for o in objs if o["metadata"]["name"] == READER])
    bound = plane.create_token(*PROMETHEUS)
    other = plane.create_token("grafana", PROMETHEUS[1])
    user = f"system:serviceaccount:{PROMETHEUS[1]}:{PROMETHEUS[0]}"
    # kube-apiserver's RBAC sees the binding once its informer has it: ask before coreio does, or
    # coreio would keep the cluster's early "no" for a while (as upstream's delegated authorizer).
    wait_until(lambda: can_get_metrics(plane, user), timeout=RBAC_TIMEOUT, message=f"{user} may get /metrics")
    endpoint = _endpoint(objs)
    status, body = scrape(coreio, endpoint, bound)
    assert status == 200, body
    assert "apiserver_request_total" in body
    status, body = scrape(coreio, endpoint, other)
    assert status == 403, body
    assert json.loads(body)["reason"] == "Forbidden"
