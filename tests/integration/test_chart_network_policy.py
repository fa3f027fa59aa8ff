"""The chart's NetworkPolicies (networkPolicy.*), rendered by the real Helm: off by default; when on,
one for the API server's pods, selecting exactly the pods the operator makes (`children.deployment`)
and opening their port to the aggregator, scrapers and the operator, and one for the operator's pods;
egress to DNS, kube-apiserver, etcd on the ports its endpoints name, and the API server's pods. Each
value given reaches the policy. That they are valid Kubernetes 1.33 objects is checked with every
other object of the chart (test_chart.py's "network-policy" variant) and by a real kube-apiserver
(tests/e2e/test_chart_monitors.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from apiserver_operator import children
from apiserver_operator.children import Installation
from apiserver_operator.spec import InstallationSpec
from tests.support.chart import NAMESPACE, RELEASE, ChartHelm, only, render

pytestmark = pytest.mark.tools

Obj = dict[str, Any]
ON = "networkPolicy.enabled=true"
OPERATOR = f"{RELEASE}-coreio-operator"
DNS = {("UDP", 53), ("TCP", 53)}
KUBE_APISERVER = {("TCP", 443), ("TCP", 6443)}


@pytest.fixture(scope="module")
def chart(helm: Path, tmp_path_factory: pytest.TempPathFactory) -> ChartHelm:
    return ChartHelm(helm, tmp_path_factory.mktemp("helm-home"))


def policies(objs: list[Obj]) -> dict[str, Obj]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == "NetworkPolicy"}


def api_server_pods(objs: list[Obj], namespace: str = NAMESPACE) -> Obj:
    """The pod template of the Deployment the operator makes from the rendered Installation."""
    installation = only(objs, "Installation")
    spec = InstallationSpec.model_validate(installation["spec"])
    inst = Installation(namespace, installation["metadata"]["name"], "uid", spec)
    template: Obj = children.deployment(inst)["spec"]["template"]
    return template


def operator_pods(objs: list[Obj]) -> Obj:
    template: Obj = only(objs, "Deployment", OPERATOR)["spec"]["template"]
    return template


def selects(selector: Obj, pod: Obj) -> bool:
    labels = pod["metadata"]["labels"]
    return bool(selector["matchLabels"].items() <= labels.items()) and set(selector) == {"matchLabels"}


def ports(rules: list[Obj]) -> set[tuple[str, int | str]]:
    return {(p["protocol"], p["port"]) for rule in rules for p in rule.get("ports", [])}


def as_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def container_port(pod: Obj, name: str) -> int:
    (port,) = [p for c in pod["spec"]["containers"] for p in c["ports"] if p["name"] == name]
    number: int = port["containerPort"]
    return number


def test_off_by_default(chart: ChartHelm) -> None:
    assert policies(render(chart)) == {}


def test_each_policy_selects_its_own_pods_only(chart: ChartHelm) -> None:
    objs = render(chart, ON, "installation.name=prod")
    found = policies(objs)
    assert set(found) == {"prod", OPERATOR}
    apiserver, operator = found["prod"]["spec"], found[OPERATOR]["spec"]
    for spec in (apiserver, operator):
        assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert selects(apiserver["podSelector"], api_server_pods(objs))
    assert not selects(apiserver["podSelector"], operator_pods(objs))
    assert selects(operator["podSelector"], operator_pods(objs))
    assert not selects(operator["podSelector"], api_server_pods(objs))
    # Another Installation's pods in the namespace are not this one's.
    other = children.deployment(Installation(NAMESPACE, "coreio", "uid", InstallationSpec()))
    assert not selects(apiserver["podSelector"], other["spec"]["template"])


@pytest.mark.parametrize("port", [None, 9443])
def test_the_api_server_port_is_the_pods(chart: ChartHelm, port: int | None) -> None:
    """installation.spec.pod.port (8443 by default) is what the pods listen on, and what the policies
    open: the API server's ingress, and the operator's egress to it."""
    sets = (ON,) if port is None else (ON, f"installation.spec.pod.port={port}")
    objs = render(chart, *sets)
    listening = container_port(api_server_pods(objs), "https")
    assert listening == (port or 8443)
    found = policies(objs)
    assert ports(found["coreio"]["spec"]["ingress"]) == {("TCP", listening)}
    to_api_server = [r for r in found[OPERATOR]["spec"]["egress"] if "to" in r]
    assert ports(to_api_server) == {("TCP", listening)}


def test_everyone_may_reach_the_api_server_unless_from_says_otherwise(chart: ChartHelm) -> None:
    """By default the port is open to every source (the aggregator's address differs per cluster).
    A `from` list narrows it, and the operator, which checks the pods' certificates, stays allowed."""
    objs = render(chart, ON)
    ingress = policies(objs)["coreio"]["spec"]["ingress"]
    assert [rule for rule in ingress if "from" not in rule] == [
        {"ports": [{"port": 8443, "protocol": "TCP"}]}
    ]
    peers = [{"ipBlock": {"cidr": "10.0.0.0/8"}}, {"namespaceSelector": {"matchLabels": {"team": "obs"}}}]
    objs = render(chart, ON, f"networkPolicy.apiserver.from={as_json(peers)}")
    ingress = policies(objs)["coreio"]["spec"]["ingress"]
    assert all("from" in rule for rule in ingress)
    assert [rule["from"] for rule in ingress if rule["from"] == peers] == [peers]
    (operator_rule,) = [rule for rule in ingress if rule["from"] != peers]
    (peer,) = operator_rule["from"]
    assert set(peer) == {"podSelector"} and selects(peer["podSelector"], operator_pods(objs))
    assert ports([operator_rule]) == {("TCP", 8443)}


def test_the_operator_is_reachable_on_its_health_and_metrics_ports(chart: ChartHelm) -> None:
    objs = render(chart, ON)
    (rule,) = policies(objs)[OPERATOR]["spec"]["ingress"]
    named = {port for _, port in ports([rule])}
    assert named == {"health", "metrics"}
    for name in named:  # named ports resolve against the pod's own: they must exist there
        container_port(operator_pods(objs), str(name))
    assert "from" not in rule
    peers = [{"podSelector": {"matchLabels": {"app": "prometheus"}}}]
    narrowed = policies(render(chart, ON, f"networkPolicy.operator.from={as_json(peers)}"))
    assert narrowed[OPERATOR]["spec"]["ingress"][0]["from"] == peers


def test_egress_to_dns_and_kube_apiserver(chart: ChartHelm) -> None:
    found = policies(render(chart, ON))
    assert ports(found["coreio"]["spec"]["egress"]) == DNS | KUBE_APISERVER  # SQLite: nothing else
    assert ports(found[OPERATOR]["spec"]["egress"]) == DNS | KUBE_APISERVER | {("TCP", 8443)}
    for policy in found.values():  # to any address: neither has one that holds in every cluster
        cluster = [rule for rule in policy["spec"]["egress"] if ports([rule]) <= DNS | KUBE_APISERVER]
        assert len(cluster) == 2 and all("to" not in rule for rule in cluster)
    other = policies(render(chart, ON, "networkPolicy.kubeAPIServerPorts=[8443]"))
    assert ports(other["coreio"]["spec"]["egress"]) == DNS | {("TCP", 8443)}


@pytest.mark.parametrize(
    ("endpoints", "expected"),
    [
        (["https://etcd-0.etcd:2379", "https://etcd-1.etcd:2379"], [2379]),
        (
            ["https://etcd.example.com:12379", "http://etcd-b", "https://[fd00::1]:22379"],
            [12379, 2379, 22379],
        ),
    ],
)
def test_etcd_egress_follows_its_endpoints(
    chart: ChartHelm, endpoints: list[str], expected: list[int]
) -> None:
    spec = {"replicas": 2, "storage": {"type": "etcd", "etcd": {"endpoints": endpoints}}}
    found = policies(render(chart, ON, f"installation.spec={as_json(spec)}"))
    egress = found["coreio"]["spec"]["egress"]
    (etcd,) = [rule for rule in egress if not ports([rule]) <= DNS | KUBE_APISERVER]
    assert etcd == {"ports": [{"port": port, "protocol": "TCP"} for port in expected]}
    assert not [r for r in found[OPERATOR]["spec"]["egress"] if ("TCP", expected[0]) in ports([r])]


def test_the_operator_reaches_the_api_servers_of_every_namespace_it_manages(chart: ChartHelm) -> None:
    objs = render(chart, ON, 'operator.watchNamespaces=["team-a"]')
    (rule,) = [r for r in policies(objs)[OPERATOR]["spec"]["egress"] if "to" in r]
    (peer,) = rule["to"]
    (expression,) = peer["namespaceSelector"]["matchExpressions"]
    assert expression == {
        "key": "kubernetes.io/metadata.name",
        "operator": "In",
        "values": [NAMESPACE, "team-a"],
    }
    # Any Installation's pods there, whatever its name.
    elsewhere = Installation("team-a", "other", "uid", InstallationSpec())
    assert selects(peer["podSelector"], children.deployment(elsewhere)["spec"]["template"])
    assert not selects(peer["podSelector"], operator_pods(objs))


def test_extra_egress_is_added(chart: ChartHelm) -> None:
    extra = [{"to": [{"ipBlock": {"cidr": "192.0.2.0/24"}}], "ports": [{"port": 5432, "protocol": "TCP"}]}]
    found = policies(
        render(
            chart,
            ON,
            f"networkPolicy.apiserver.extraEgress={as_json(extra)}",
            f"networkPolicy.operator.extraEgress={as_json(extra)}",
        )
    )
    for policy in found.values():
        assert policy["spec"]["egress"][-1:] == extra


def test_without_an_installation_only_the_operator_is_covered(chart: ChartHelm) -> None:
    assert set(policies(render(chart, ON, "installation.create=false"))) == {OPERATOR}


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ('networkPolicy.apiserver.from=[{"ipblock":{"cidr":"10.0.0.0/8"}}]', "'ipblock'"),
        (
            'networkPolicy.apiserver.from=[{"ipBlock":{"except":["10.1.0.0/16"]}}]',
            "/networkPolicy/apiserver/from/0",
        ),
        ("networkPolicy.kubeAPIServerPorts=[0]", "/networkPolicy/kubeAPIServerPorts/0"),
        ('networkPolicy.operator.extraEgress=[{"ports":[{"port":53,"protocol":"ICMP"}]}]', "/protocol"),
        ("networkPolicy.egress=[]", "'egress'"),
    ],
)
def test_schema_refuses(chart: ChartHelm, value: str, field: str) -> None:
    result = chart.template(value, check=False)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert field in result.stderr
