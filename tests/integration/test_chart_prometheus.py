"""The chart's objects for the Prometheus Operator (metrics.*), rendered by the real Helm: off by
default; when on, a ServiceMonitor that selects the Service the operator makes (`children.service`)
and verifies the server as the operator issues its certificate (the name, the serving Secret's trust
bundle), a PodMonitor on the operator's metrics port, a PrometheusRule whose alert on a storm of
Warnings reads the counter the server exposes (its PromQL parsed), and the ClusterRole a scraper
needs; every value given reaches them, and what the schema cannot take is refused. That the monitors
are what the real CRDs take, and that the ClusterRole lets a scraper in, is checked against a real
kube-apiserver in tests/e2e/test_chart_monitors.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import promql_parser
import pytest
from prometheus_client import CollectorRegistry

from apiserver.http.eventmetrics import EventsWritten
from apiserver_operator import certificates, children
from apiserver_operator.children import Installation
from apiserver_operator.spec import InstallationSpec
from coreio_export.metrics import ExportMetrics
from coreio_export.progress import Progress
from tests.support.chart import (
    CHART,
    NAMESPACE,
    RELEASE,
    REPOSITORY,
    ChartHelm,
    gitops_problems,
    only,
    render,
)

pytestmark = pytest.mark.tools

Obj = dict[str, Any]
SERVICE_MONITOR = "metrics.serviceMonitor.enabled=true"
POD_MONITOR = "metrics.podMonitor.enabled=true"
OPERATOR = f"{RELEASE}-coreio-operator"
READER = f"{RELEASE}-coreio-metrics-reader"
TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
MONITOR_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
RULE = "metrics.prometheusRule.enabled=true"
STANDARD_LABELS = {
    "app.kubernetes.io/name": "coreio",
    "app.kubernetes.io/instance": RELEASE,
    "app.kubernetes.io/managed-by": "Helm",
    "helm.sh/chart": "coreio-0.1.0",
}
RELABELINGS = [
    {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node", "action": "replace"}
]
METRIC_RELABELINGS = [{"sourceLabels": ["__name__"], "regex": "go_.*", "action": "drop"}]
EVERYTHING = (
    SERVICE_MONITOR,
    POD_MONITOR,
    "metrics.serviceMonitor.labels.release=kube-prometheus-stack",
    "metrics.serviceMonitor.interval=30s",
    "metrics.serviceMonitor.scrapeTimeout=10s",
    f"metrics.serviceMonitor.relabelings={json.dumps(RELABELINGS)}",
    f"metrics.serviceMonitor.metricRelabelings={json.dumps(METRIC_RELABELINGS)}",
    "metrics.serviceMonitor.prometheusServiceAccount.name=prometheus-k8s",
    "metrics.serviceMonitor.prometheusServiceAccount.namespace=monitoring",
    "metrics.podMonitor.namespace=monitoring",
    "metrics.podMonitor.labels.release=kube-prometheus-stack",
    "metrics.podMonitor.interval=1m",
    "metrics.podMonitor.scrapeTimeout=15s",
    RULE,
    "metrics.prometheusRule.labels.release=kube-prometheus-stack",
    f"metrics.podMonitor.relabelings={json.dumps(RELABELINGS)}",
    f"metrics.podMonitor.metricRelabelings={json.dumps(METRIC_RELABELINGS)}",
)


@pytest.fixture(scope="module")
def chart(helm: Path, tmp_path_factory: pytest.TempPathFactory) -> ChartHelm:
    return ChartHelm(helm, tmp_path_factory.mktemp("helm-home"))


def endpoint(objs: list[Obj]) -> Obj:
    (found,) = only(objs, "ServiceMonitor")["spec"]["endpoints"]
    result: Obj = found
    return result


def installation(name: str = "coreio") -> Installation:
    return Installation(NAMESPACE, name, "uid", InstallationSpec())


def test_off_by_default(chart: ChartHelm) -> None:
    objs = render(chart)
    assert [o for o in objs if o["kind"] in MONITOR_KINDS] == []
    assert [o for o in objs if o["metadata"]["name"] == READER] == []


@pytest.mark.parametrize("name", ["coreio", "prod"])
def test_service_monitor_scrapes_the_operators_service(chart: ChartHelm, name: str) -> None:
    objs = render(chart, SERVICE_MONITOR, f"installation.name={name}")
    monitor = only(objs, "ServiceMonitor", name)
    assert monitor["metadata"]["namespace"] == NAMESPACE
    service = children.service(installation(name))
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert not selector.items() <= children.service(installation("other"))["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [service["metadata"]["namespace"]]}
    scraped = endpoint(objs)
    assert scraped["port"] in [port["name"] for port in service["spec"]["ports"]]
    assert (scraped["scheme"], scraped["path"]) == ("https", "/metrics")


@pytest.mark.parametrize("name", ["coreio", "prod"])
def test_service_monitor_verifies_the_server_as_the_operator_issues_it(chart: ChartHelm, name: str) -> None:
    """The certificate's name, and the CA from the operator's serving Secret: its ca.crt is the trust
    bundle the operator keeps (every CA a pod may present during a rollover)."""
    inst = installation(name)
    tls = endpoint(render(chart, SERVICE_MONITOR, f"installation.name={name}"))["tlsConfig"]
    assert tls["serverName"] == f"{name}.{NAMESPACE}.svc"
    assert tls["serverName"] in inst.serving_hosts()
    assert tls["ca"] == {"secret": {"name": inst.serving_secret, "key": certificates.TRUST_BUNDLE}}
    assert "insecureSkipVerify" not in tls


def test_service_monitor_trusts_the_serving_secret_with_the_users_own_too(chart: ChartHelm) -> None:
    """With installation.spec.certificates.secretName the operator issues nothing, but copies the
    user's Secret into the serving Secret the pods mount (once the aggregator trusts it): its
    ca.crt verifies them in both modes, and a ServiceMonitor in the Secret's namespace reads it."""
    objs = render(chart, SERVICE_MONITOR, "installation.spec.certificates.secretName=coreio-tls")
    assert only(objs, "Installation")["spec"]["certificates"] == {"secretName": "coreio-tls"}
    assert endpoint(objs)["tlsConfig"]["ca"] == {"secret": {"name": "coreio-serving", "key": "ca.crt"}}


def test_the_scraper_sends_prometheus_own_token_unless_told_otherwise(chart: ChartHelm) -> None:
    scraped = endpoint(render(chart, SERVICE_MONITOR))
    assert scraped["bearerTokenFile"] == TOKEN_FILE
    assert "authorization" not in scraped
    given = {"type": "Bearer", "credentials": {"name": "prometheus-token", "key": "token"}}
    scraped = endpoint(
        render(chart, SERVICE_MONITOR, f"metrics.serviceMonitor.authorization={json.dumps(given)}")
    )
    assert scraped["authorization"] == given
    assert "bearerTokenFile" not in scraped
    other = endpoint(
        render(chart, SERVICE_MONITOR, "metrics.serviceMonitor.bearerTokenFile=/etc/prometheus/token")
    )
    assert other["bearerTokenFile"] == "/etc/prometheus/token"


def test_values_reach_the_monitors(chart: ChartHelm) -> None:
    objs = render(chart, *EVERYTHING)
    service_monitor, pod_monitor = only(objs, "ServiceMonitor"), only(objs, "PodMonitor")
    for monitor in (service_monitor, pod_monitor):
        assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    scraped = endpoint(objs)
    assert (scraped["interval"], scraped["scrapeTimeout"]) == ("30s", "10s")
    assert (scraped["relabelings"], scraped["metricRelabelings"]) == (RELABELINGS, METRIC_RELABELINGS)
    (operator,) = pod_monitor["spec"]["podMetricsEndpoints"]
    assert (operator["interval"], operator["scrapeTimeout"]) == ("1m", "15s")
    assert (operator["relabelings"], operator["metricRelabelings"]) == (RELABELINGS, METRIC_RELABELINGS)
    # Another namespace for the PodMonitor; the pods it selects stay in the release namespace.
    assert pod_monitor["metadata"]["namespace"] == "monitoring"
    assert pod_monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    # Unset, Prometheus' own defaults apply: nothing is rendered for them.
    plain = render(chart, SERVICE_MONITOR, POD_MONITOR)
    (operator,) = only(plain, "PodMonitor")["spec"]["podMetricsEndpoints"]
    for rendered in (endpoint(plain), operator):
        assert not {"interval", "scrapeTimeout", "relabelings", "metricRelabelings"} & set(rendered)


def test_the_chart_labels_win_over_given_ones(chart: ChartHelm) -> None:
    objs = render(chart, *EVERYTHING, "metrics.serviceMonitor.labels.app\\.kubernetes\\.io/name=other")
    for obj in objs:
        if obj["kind"] in MONITOR_KINDS:
            labels = obj["metadata"]["labels"]
            assert labels.items() >= STANDARD_LABELS.items(), obj["kind"]


def alerts(objs: list[Obj], group_name: str) -> list[Obj]:
    groups = {group["name"]: group for group in only(objs, "PrometheusRule")["spec"]["groups"]}
    assert set(groups) == {"coreio-events", "coreio-event-export"}
    return list(groups[group_name]["rules"])


def storm_alert(objs: list[Obj]) -> Obj:
    (alert,) = alerts(objs, "coreio-events")
    assert alert["alert"] == "CoreioEventWarningStorm"
    return dict(alert)


def counter_name() -> str:
    """The name the server exposes its count of stored Events under (a counter's samples: `_total`,
    and `_created` unless disabled)."""
    written = EventsWritten(CollectorRegistry())
    written.stored({"type": "Warning", "reason": "BackOff", "metadata": {"namespace": "a"}})
    (name,) = {s.name for m in written.counter.collect() for s in m.samples if s.name.endswith("_total")}
    return name


@pytest.mark.parametrize(
    ("sets", "threshold", "window", "hold", "severity"),
    [
        ((), 1.0, 300, "10m", "warning"),
        (
            (
                'metrics.prometheusRule.warningStorm={"perSecond":0.25,"window":"15m","for":"1h","severity":"critical"}',
            ),
            0.25,
            900,
            "1h",
            "critical",
        ),
    ],
    ids=["defaults", "given"],
)
def test_the_warning_storm_alert_reads_the_servers_counter_by_namespace(
    chart: ChartHelm, sets: tuple[str, ...], threshold: float, window: int, hold: str, severity: str
) -> None:
    alert = storm_alert(render(chart, RULE, *sets))
    expr = promql_parser.parse(alert["expr"])
    assert isinstance(expr, promql_parser.BinaryExpr) and str(expr.op) == ">"
    assert float(str(expr.rhs)) == threshold
    summed = expr.lhs
    assert isinstance(summed, promql_parser.AggregateExpr)
    assert (str(summed.op), str(summed.modifier)) == ("sum", "by (namespace)")
    rate = summed.expr
    assert isinstance(rate, promql_parser.Call) and rate.func.name == "rate"
    (selector,) = rate.args
    assert isinstance(selector, promql_parser.MatrixSelector)
    assert selector.range.total_seconds() == window
    assert selector.vector_selector.name == counter_name()
    assert str(selector.vector_selector.matchers) == '{type="Warning"}'
    assert (alert["for"], alert["labels"]) == (hold, {"severity": severity})
    assert "$labels.namespace" in alert["annotations"]["summary"]


def exporter_samples() -> set[str]:
    """The sample names coreio-export exposes (a counter's: `_total`, and `_created`)."""
    metrics = ExportMetrics("shop", "warnings")
    metrics.sink("webhook")
    metrics.gap()
    metrics.observe(Progress(generation=1, position=5, newest=9, lag_seconds=3.0))
    return {s.name for m in metrics.registry.collect() for s in m.samples}


@pytest.mark.parametrize(
    ("sets", "seconds", "hold", "severity"),
    [
        ((), 600.0, "10m", "warning"),
        (
            ('metrics.prometheusRule.exportLagging={"seconds":60,"for":"2m","severity":"critical"}',),
            60.0,
            "2m",
            "critical",
        ),
    ],
    ids=["defaults", "given"],
)
def test_the_export_alerts_read_the_exporters_lag_and_gaps_by_export(
    chart: ChartHelm, sets: tuple[str, ...], seconds: float, hold: str, severity: str
) -> None:
    lagging, gap = alerts(render(chart, RULE, *sets), "coreio-event-export")
    assert (lagging["alert"], gap["alert"]) == ("CoreioEventExportLagging", "CoreioEventExportGap")
    expr = promql_parser.parse(lagging["expr"])
    assert isinstance(expr, promql_parser.BinaryExpr) and float(str(expr.rhs)) == seconds
    assert isinstance(expr.lhs, promql_parser.AggregateExpr)
    assert str(expr.lhs.modifier) == "by (export_namespace, export)"
    assert isinstance(expr.lhs.expr, promql_parser.VectorSelector)
    assert expr.lhs.expr.name == "coreio_export_lag_seconds" and expr.lhs.expr.name in exporter_samples()
    assert (lagging["for"], lagging["labels"]) == (hold, {"severity": severity})
    gaps = promql_parser.parse(gap["expr"])
    assert isinstance(gaps, promql_parser.BinaryExpr) and isinstance(gaps.lhs, promql_parser.AggregateExpr)
    increase = gaps.lhs.expr
    assert isinstance(increase, promql_parser.Call) and increase.func.name == "increase"
    (selector,) = increase.args
    assert isinstance(selector, promql_parser.MatrixSelector)
    assert selector.vector_selector.name == "coreio_export_gaps_total"
    assert selector.vector_selector.name in exporter_samples()
    assert "$labels.export" in lagging["annotations"]["summary"]


def test_the_service_monitor_keeps_the_servers_namespace_label(chart: ChartHelm) -> None:
    """The alert groups by the Events' namespace: the scrape must not rename it exported_namespace."""
    assert endpoint(render(chart, SERVICE_MONITOR))["honorLabels"] is True


def test_the_prometheus_rule_goes_where_it_is_told(chart: ChartHelm) -> None:
    rule = only(render(chart, *EVERYTHING, "metrics.prometheusRule.namespace=monitoring"), "PrometheusRule")
    assert rule["metadata"]["name"] == f"{RELEASE}-coreio"
    assert rule["metadata"]["namespace"] == "monitoring"
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert only(render(chart, RULE), "PrometheusRule")["metadata"]["namespace"] == NAMESPACE


def test_pod_monitor_scrapes_the_operators_metrics_port(chart: ChartHelm) -> None:
    """The port the operator serves /metrics on, in plain HTTP (--metrics-address has no TLS), on
    the operator's pods only."""
    objs = render(chart, POD_MONITOR)
    monitor = only(objs, "PodMonitor", OPERATOR)
    pod = only(objs, "Deployment", OPERATOR)["spec"]["template"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    (scraped,) = monitor["spec"]["podMetricsEndpoints"]
    (container,) = pod["spec"]["containers"]
    (port,) = [p for p in container["ports"] if p["name"] == scraped["port"]]
    assert f"--metrics-address=0.0.0.0:{port['containerPort']}" in container["args"]
    assert (scraped["scheme"], scraped["path"]) == ("http", "/metrics")
    api_server_pod = children.deployment(installation())["spec"]["template"]["metadata"]["labels"]
    assert not monitor["spec"]["selector"]["matchLabels"].items() <= api_server_pod.items()


def test_metrics_reader_grants_get_on_metrics_and_nothing_else(chart: ChartHelm) -> None:
    objs = render(chart, SERVICE_MONITOR)
    role = only(objs, "ClusterRole", READER)
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert [o for o in objs if o["kind"] == "ClusterRoleBinding" and o["roleRef"]["name"] == READER] == []
    binding = only(render(chart, *EVERYTHING), "ClusterRoleBinding", READER)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": READER,
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}
    ]


def test_no_service_monitor_without_the_charts_installation(chart: ChartHelm) -> None:
    """It selects the Service named after the Installation: without one there is nothing to name. The
    ClusterRole stays, for a scraper of an Installation of one's own, and NOTES say so."""
    objs = render(chart, SERVICE_MONITOR, "installation.create=false")
    assert [o for o in objs if o["kind"] == "ServiceMonitor"] == []
    only(objs, "ClusterRole", READER)
    args = ["install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client"]
    args += ["--set", f"image.repository={REPOSITORY}", "--set", "installation.create=false"]
    notes = chart.run(*args, "--set", SERVICE_MONITOR).stdout.partition("NOTES:")[2]
    assert "No ServiceMonitor was rendered" in notes and READER in notes
    assert "ServiceMonitor" not in chart.run(*args).stdout.partition("NOTES:")[2]


def test_monitors_are_gitops_safe(chart: ChartHelm) -> None:
    for variant in (EVERYTHING, (SERVICE_MONITOR, POD_MONITOR)):
        objs = [
            o
            for o in render(chart, *variant)
            if o["kind"] in MONITOR_KINDS or o["metadata"]["name"] == READER
        ]
        assert len(objs) == (5 if variant is EVERYTHING else 3)
        assert [problem for obj in objs for problem in gitops_problems(obj)] == []


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ("metrics.serviceMonitor.interval=30sec", "/metrics/serviceMonitor/interval"),
        ("metrics.podMonitor.scrapeTimeout=1.5s", "/metrics/podMonitor/scrapeTimeout"),
        ("metrics.serviceMonitor.additionalLabels.a=b", "'additionalLabels'"),
        (
            'metrics.serviceMonitor.relabelings=[{"action":"rename"}]',
            "/metrics/serviceMonitor/relabelings/0/action",
        ),
        ('metrics.podMonitor.metricRelabelings=[{"sourcelabels":["a"]}]', "'sourcelabels'"),
        (
            "metrics.serviceMonitor.prometheusServiceAccount.name=prometheus",
            "prometheusServiceAccount/namespace",
        ),
        ("metrics.serviceMonitor.bearerTokenFile=token", "/metrics/serviceMonitor/bearerTokenFile"),
        ('metrics.serviceMonitor.authorization={"credentials":{"name":"t"}}', "'key'"),
        ("metrics.podMonitor.namespace=Monitoring", "/metrics/podMonitor/namespace"),
        ("metrics.prometheusRule.warningStorm.perSecond=0", "/metrics/prometheusRule/warningStorm/perSecond"),
        ("metrics.prometheusRule.warningStorm.window=", "/metrics/prometheusRule/warningStorm/window"),
        ("metrics.prometheusRule.warningStorm.for=1 hour", "/metrics/prometheusRule/warningStorm/for"),
        (
            "metrics.prometheusRule.warningStorm.severity=very bad",
            "/metrics/prometheusRule/warningStorm/severity",
        ),
    ],
)
def test_schema_refuses(chart: ChartHelm, value: str, field: str) -> None:
    result = chart.template(value, check=False)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert field in result.stderr
