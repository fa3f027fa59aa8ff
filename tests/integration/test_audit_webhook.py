"""The audit webhook (--audit-webhook-config-file) of a real server, POSTing to a real HTTPS
service on loopback (its own CA, a client certificate from the kubeconfig): the service gets the
very events the audit log holds; a service that fails at first gets them on a retry; one that is
down slows no request in batch mode, and in blocking-strict mode a request is refused; a kubeconfig
that cannot be used stops the server with one line."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support.api import RB_PATH, Api
from tests.support.audit_receiver import CLIENT_NAME, AuditReceiver
from tests.support.auditlog import logged_events
from tests.support.server import ServerProcess, start_server

NAMESPACE = "audited"
POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "rules": [
        {"level": "None", "nonResourceURLs": ["/readyz*", "/livez*", "/healthz*", "/metrics"]},
        {"level": "RequestResponse", "resources": [{"group": "rbac.authorization.core.io"}]},
        {"level": "Metadata"},
    ],
}
FAST = ["--audit-webhook-batch-max-wait", "0.2s", "--audit-webhook-initial-backoff", "0.1s", "--workers", "1"]


def binding(name: str) -> dict[str, object]:
    return {
        "apiVersion": "rbac.authorization.core.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "alice"}],
    }


def audited_server(directory: Path, kubeconfig: Path, *flags: str) -> ServerProcess:
    policy = directory / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY))
    args = ["--audit-policy-file", str(policy), "--audit-log-path", str(directory / "audit.log")]
    return start_server(directory / "data", [*args, "--audit-webhook-config-file", str(kubeconfig), *flags])


@pytest.fixture(scope="module")
def receiver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuditReceiver]:
    service = AuditReceiver(tmp_path_factory.mktemp("audit-receiver")).start()
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, receiver: AuditReceiver) -> Iterator[ServerProcess]:
    process = audited_server(tmp_path_factory.mktemp("coreio-audit-webhook"), receiver.kubeconfig(), *FAST)
    try:
        yield process
    finally:
        process.stop()


def audit_log(server: ServerProcess) -> Path:
    return server.data_dir.parent / "audit.log"


def requests(api: Api, name: str) -> set[str]:
    """A create, a get, a refused get and a list; their audit IDs."""
    answers = [
        api.post(f"{RB_PATH}/namespaces/{NAMESPACE}/rolebindings", binding(name)),
        api.get(f"{RB_PATH}/namespaces/{NAMESPACE}/rolebindings/{name}"),
        api.get(f"{RB_PATH}/namespaces/{NAMESPACE}/rolebindings/{name}-missing"),
        api.get(f"/apis/events.core.io/v1/namespaces/{NAMESPACE}/events"),
    ]
    assert [answer.status for answer in answers] == [201, 200, 404, 200]
    return {answer.headers["Audit-Id"] for answer in answers}


def metric(server: ServerProcess, name: str, **labels: str) -> float:
    """The sample's value, summed over the server's workers."""
    body = Api(server).get("/metrics").body.decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


def test_the_service_gets_the_events_the_log_holds(server: ServerProcess, receiver: AuditReceiver) -> None:
    ids = requests(Api(server), "sent")
    taken, logged = receiver.settled(audit_log(server), ids)
    assert taken == logged
    summary = [
        (e["verb"], e["stage"], e["responseStatus"]["code"] if "responseStatus" in e else None)
        for e in logged
    ]
    assert sorted(summary, key=str) == sorted(
        [
            ("create", "RequestReceived", None),
            ("create", "ResponseComplete", 201),
            ("get", "RequestReceived", None),
            ("get", "ResponseComplete", 200),
            ("get", "RequestReceived", None),
            ("get", "ResponseComplete", 404),
            ("list", "RequestReceived", None),
            ("list", "ResponseComplete", 200),
        ],
        key=str,
    )
    created = next(e for e in taken if e["verb"] == "create" and e["stage"] == "ResponseComplete")
    assert created["user"]["username"] == "coreio-admin"
    assert created["objectRef"]["name"] == "sent" and created["objectRef"]["namespace"] == NAMESPACE
    assert created["responseObject"]["metadata"]["name"] == "sent"
    assert {cn for cn, _status, _body in receiver.posts} == {CLIENT_NAME}
    assert all(
        body["kind"] == "EventList" and body["apiVersion"] == "audit.k8s.io/v1" for *_, body in receiver.posts
    )
    assert metric(server, "apiserver_audit_event_total") >= len(logged)


def test_a_service_failing_at_first_gets_the_events_on_a_retry(
    server: ServerProcess, receiver: AuditReceiver
) -> None:
    receiver.fail_next = 2
    failed_before = metric(server, "apiserver_audit_error_total", plugin="webhook")
    ids = requests(Api(server), "retried")
    taken, logged = receiver.settled(audit_log(server), ids)
    assert taken == logged
    assert sum(1 for _cn, status, _body in receiver.posts if status == 500) >= 2
    assert metric(server, "apiserver_audit_error_total", plugin="webhook") == failed_before


def closed_port() -> int:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        return int(closed.getsockname()[1])


def test_a_service_that_is_down_slows_no_request_in_batch_mode(
    tmp_path: Path, receiver: AuditReceiver
) -> None:
    """Retried an hour later, the events would hold a blocking request past its client's patience;
    in batch mode every request is answered, and the server still stops (its flush bounded)."""
    flags = ["--audit-webhook-initial-backoff", "1h", "--audit-webhook-batch-max-wait", "0.1s"]
    server = audited_server(tmp_path, receiver.kubeconfig(closed_port()), *flags)
    try:
        api = Api(server)
        ids = set().union(*(requests(api, f"unheard-{index}") for index in range(10)))
        # Logged all the same (RequestReceived, written before the request is handled).
        logged = logged_events(audit_log(server))
        assert ids <= {event["auditID"] for event in logged if event["stage"] == "RequestReceived"}
    finally:
        server.stop()
    assert server.process is not None and server.process.returncode == 0


def test_blocking_strict_refuses_a_request_whose_event_cannot_be_sent(
    tmp_path: Path, receiver: AuditReceiver
) -> None:
    flags = ["--audit-webhook-mode", "blocking-strict", "--audit-webhook-initial-backoff", "0.01s"]
    server = audited_server(tmp_path, receiver.kubeconfig(closed_port()), *flags)
    try:
        answer = Api(server).get(f"{RB_PATH}/namespaces/{NAMESPACE}/rolebindings")
        assert answer.status == 500
        path = f"{RB_PATH}/namespaces/{NAMESPACE}/rolebindings"
        assert answer.body.decode() == f'Internal Server Error: "{path}": failed to store audit event\n'
        assert metric(server, "apiserver_audit_requests_rejected_total") == 1
        assert metric(server, "apiserver_audit_error_total", plugin="webhook") == 1
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("kubeconfig", "error"),
    [
        ("missing.kubeconfig", "initializing audit webhook: stat {path}: no such file or directory"),
        ("empty.kubeconfig", "initializing audit webhook: {path}: kubeconfig has no context ''"),
    ],
)
def test_a_kubeconfig_that_cannot_be_used_stops_the_server_with_one_line(
    tmp_path: Path, kubeconfig: str, error: str
) -> None:
    path = tmp_path / kubeconfig
    if kubeconfig == "empty.kubeconfig":
        path.write_text("kind: Config\n")
    with pytest.raises(RuntimeError, match="exited") as caught:
        start_server(tmp_path / "data", ["--audit-webhook-config-file", str(path)])
    errors = [line for line in str(caught.value).splitlines() if "error:" in line]
    assert errors == ["coreio-apiserver: error: " + error.format(path=path)]


def test_a_bad_batch_option_stops_the_server_with_upstreams_words(
    tmp_path: Path, receiver: AuditReceiver
) -> None:
    flags = ["--audit-webhook-config-file", str(receiver.kubeconfig()), "--audit-webhook-batch-max-size", "0"]
    with pytest.raises(RuntimeError, match="exited") as caught:
        start_server(tmp_path / "data", flags)
    errors = [line for line in str(caught.value).splitlines() if "error:" in line]
    assert errors == [
        "coreio-apiserver: error: invalid audit batch webhook max batch size 0, must be a positive number"
    ]
