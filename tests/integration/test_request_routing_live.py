"""The routing property of tests/unit/test_request_routing.py against a live server, over TLS, as an
ordinary user (issue 20): carol may `get` anything of events.core.io in team-a (`resources: ["*"]`,
the grant of the report), one object at a time: no list, no watch, no write, nothing of team-b.
Whatever path and query Hypothesis bends, an answer that is not refused is one Event of team-a, and
nothing is ever written."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings

from tests.support.api import Api, ev_path, event, rb_path, rolebinding
from tests.support.rawhttp import serving_cleanly, user_context
from tests.support.requestpaths import NAMESPACES, requests
from tests.support.server import ServerProcess
from tests.support.waiting import wait_until

NAMES = ("visible", "secret")
ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "getter"},
    "rules": [{"apiGroups": ["events.core.io"], "resources": ["*"], "verbs": ["get"]}],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("routing")
    (base / "roles.yaml").write_text(yaml.safe_dump(ROLE))
    with serving_cleanly(
        base / "server", ["--authorization-roles-file", str(base / "roles.yaml")]
    ) as process:
        yield process


@pytest.fixture(scope="module")
def stored(server: ServerProcess) -> dict[str, tuple[str, str]]:
    """The four Events ((uid, resourceVersion) by namespace/name) and carol's binding in team-a."""
    admin = Api(server)
    uids = {}
    for namespace in NAMESPACES:
        for name in NAMES:
            created = admin.post(ev_path(namespace), event(name, namespace))
            assert created.status == 201, created.body
            meta = created.json["metadata"]
            uids[f"{namespace}/{name}"] = (meta["uid"], meta["resourceVersion"])
    binding = rolebinding(
        "carol-visible",
        roleRef={"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": "getter"},
        subjects=[{"kind": "User", "name": "carol", "apiGroup": "rbac.authorization.core.io"}],
    )
    assert admin.post(rb_path("team-a"), binding).status == 201
    return uids


@pytest.fixture(scope="module")
def carol(
    server: ServerProcess, stored: dict[str, tuple[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> Api:
    api = Api(server, client_cert=False)
    api.context = user_context(server, tmp_path_factory.mktemp("carol"), "carol")
    wait_until(
        lambda: api.get(ev_path("team-a", "visible")).status == 200, timeout=10, message="carol's binding"
    )
    return api


def _shown(response_body: bytes) -> list[str]:
    """What an answer shows: `kind namespace/name` of an object, a list's items or a watch's events,
    and `List` for a list itself."""
    shown = []
    for line in response_body.splitlines():
        document = json.loads(line) if line.strip() else None
        if not isinstance(document, dict):
            continue
        if document.get("type") and isinstance(document.get("object"), dict):
            shown.append("WatchEvent")
            document = document["object"]
        if document.get("kind", "").endswith("List"):
            shown.append("List")
            documents = document.get("items", [])
        else:
            documents = [document] if document.get("kind") not in (None, "Status") else []
        shown += [
            f"{d.get('kind')} {d['metadata'].get('namespace')}/{d['metadata']['name']}" for d in documents
        ]
    return shown


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=requests(NAMES))
@example(case=("GET", "/apis/events.core.io/v1/namespaces/team-a//events", ["watch=1"]))
@example(case=("DELETE", "/apis/events.core.io/v1/namespaces/team-a//events", []))
def test_carol_sees_only_what_she_was_granted(carol: Api, case: tuple[str, str, list[str]]) -> None:
    method, path, terms = case
    url = path + "?" + "&".join([*terms, "timeoutSeconds=1"])
    body = event("visible", "team-a") if method in ("POST", "PUT", "PATCH") else None
    response = carol.request(method, url, body)
    assert response.status < 500, (method, url, response.status, response.body[:300])
    if 200 <= response.status < 300:
        assert method in ("GET", "HEAD"), (method, url, response.status)
        shown = _shown(response.body)
        assert shown in ([], ["Event team-a/visible"], ["Event team-a/secret"]), (method, url, shown)


def test_nothing_was_written(server: ServerProcess, stored: dict[str, tuple[str, str]], carol: Api) -> None:
    """After every bent request above (this module's order): all four Events, unchanged."""
    admin = Api(server)
    for key, written in stored.items():
        namespace, name = key.split("/")
        found = admin.get(ev_path(namespace, name))
        assert found.status == 200, key
        assert (found.json["metadata"]["uid"], found.json["metadata"]["resourceVersion"]) == written, key


def test_the_bypass_of_issue_20_is_refused(carol: Api) -> None:
    """The requests of the report, as carol: refused (403, as the authorizer judges an object named
    `events`), never the namespace's list."""
    for namespace in NAMESPACES:
        for method in ("GET", "DELETE"):
            response = carol.request(method, f"/apis/events.core.io/v1/namespaces/{namespace}//events")
            assert response.status in (403, 404), (method, namespace, response.status, response.body[:300])
            assert _shown(response.body) == []
