"""A real kopf operator against a started server: kopf discovers the kinds, lists and watches
Events in one namespace, patches them (merge patches of its annotations, JSON patches of its
finalizer guarded by a resourceVersion test) and, because it has a deletion handler, holds every
Event with a finalizer until that handler has run. The operator runs in a thread of this process
with its own registry, and logs in with the credentials of the server's kubeconfig."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import kopf
import pytest
import yaml

from tests.support.api import Api, ev_path, event, rb_path, rolebinding
from tests.support.server import ServerProcess
from tests.support.waiting import wait_until

NAMESPACE = "kopf-ns"
FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
LAST_HANDLED = "kopf.zalando.org/last-handled-configuration"
TIMEOUT = 20.0

registry = kopf.OperatorRegistry()


@dataclass
class Seen:
    """What the handlers saw, shared with the test through kopf's `memo`."""

    server: ServerProcess
    changes: list[tuple[str, str, str]] = field(default_factory=list)  # (reason, kind, name)
    deleted: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


@kopf.on.login(registry=registry)
def login(memo: kopf.Memo, **_: Any) -> kopf.ConnectionInfo:
    """The kubeconfig the server wrote, whose certificates are inline (base64) data."""
    config = yaml.safe_load(memo.seen.server.kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    return kopf.ConnectionInfo(
        server=cluster["server"],
        ca_data=base64.b64decode(cluster["certificate-authority-data"]),
        certificate_data=base64.b64decode(user["client-certificate-data"]),
        private_key_data=base64.b64decode(user["client-key-data"]),
        default_namespace=NAMESPACE,
    )


@kopf.on.startup(registry=registry)
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # kopf reports its handlers' outcomes as core/v1 Events, which only kube-apiserver serves.
    settings.posting.enabled = False
    settings.watching.connect_timeout = 5
    settings.networking.request_timeout = 10


@kopf.on.create("events.core.io", "v1", "events", registry=registry)
@kopf.on.update("events.core.io", "v1", "events", registry=registry)
def event_seen(
    reason: str, name: str, labels: kopf.Labels, patch: kopf.Patch, memo: kopf.Memo, **_: Any
) -> None:
    patch.metadata.annotations["seen-by"] = "kopf"
    patch.metadata.annotations["seen-stage"] = labels.get("stage", "none")
    with memo.seen.lock:
        memo.seen.changes.append((str(reason), "Event", name))


@kopf.on.delete("events.core.io", "v1", "events", registry=registry)
def event_deleted(name: str, memo: kopf.Memo, **_: Any) -> None:
    with memo.seen.lock:
        memo.seen.deleted.append(name)


@kopf.on.create("rbac.authorization.core.io", "v1", "rolebindings", registry=registry)
def rolebinding_seen(name: str, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
    patch.metadata.annotations["seen-by"] = "kopf"
    with memo.seen.lock:
        memo.seen.changes.append(("create", "RoleBinding", name))


@dataclass
class Operator:
    seen: Seen
    thread: threading.Thread
    stop: threading.Event
    errors: list[BaseException]


@pytest.fixture(scope="module")
def api(server: ServerProcess) -> Api:
    return Api(server)


@pytest.fixture(scope="module")
def operator(server: ServerProcess, api: Api) -> Iterator[Operator]:
    # An Event that exists before the operator starts: kopf must find it by listing.
    assert api.post(ev_path(NAMESPACE), event("early", NAMESPACE)).status == 201

    seen = Seen(server)
    stop = threading.Event()
    ready = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(
                kopf.operator(
                    registry=registry,
                    namespaces=[NAMESPACE],
                    standalone=True,
                    memo=kopf.Memo(seen=seen),
                    stop_flag=stop,
                    ready_flag=ready,
                )
            )
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)

    thread = threading.Thread(target=run, name="kopf-operator", daemon=True)
    thread.start()
    try:
        assert ready.wait(TIMEOUT), f"kopf did not get ready: {errors}"
        yield Operator(seen, thread, stop, errors)
    finally:
        stop.set()
        thread.join(TIMEOUT)
    assert not thread.is_alive(), "kopf did not stop"
    assert not errors, errors


def annotations_of(api: Api, path: str) -> dict[str, str]:
    response = api.get(path)
    if response.status != 200:
        return {}
    return dict(response.json["metadata"].get("annotations") or {})


def test_existing_event_is_handled_at_startup(operator: Operator, api: Api) -> None:
    wait_until(
        lambda: annotations_of(api, ev_path(NAMESPACE, "early")).get("seen-by") == "kopf",
        timeout=TIMEOUT,
        message="early",
    )
    assert ("create", "Event", "early") in operator.seen.changes


def test_create_is_seen_and_persisted(operator: Operator, api: Api) -> None:
    created = api.post(ev_path(NAMESPACE), event("web-0.created", NAMESPACE))
    assert created.status == 201
    wait_until(
        lambda: annotations_of(api, ev_path(NAMESPACE, "web-0.created")).get("seen-by") == "kopf",
        timeout=TIMEOUT,
        message="the seen-by annotation",
    )
    obj = api.get(ev_path(NAMESPACE, "web-0.created")).json
    meta = obj["metadata"]
    # kopf's deletion handler needs a finalizer; its state lives in our object's annotations.
    assert meta["finalizers"] == [FINALIZER]
    assert meta["annotations"]["seen-stage"] == "none"
    essence = json.loads(meta["annotations"][LAST_HANDLED])
    assert essence["note"] == "container started" and essence["reason"] == "Started"
    assert meta["uid"] == created.json["metadata"]["uid"]
    assert ("create", "Event", "web-0.created") in operator.seen.changes


def test_update_is_seen(operator: Operator, api: Api) -> None:
    assert api.post(ev_path(NAMESPACE), event("web-0.updated", NAMESPACE)).status == 201
    wait_until(
        lambda: annotations_of(api, ev_path(NAMESPACE, "web-0.updated")).get("seen-by") == "kopf",
        timeout=TIMEOUT,
        message="creation",
    )
    patched = api.patch(ev_path(NAMESPACE, "web-0.updated"), {"metadata": {"labels": {"stage": "two"}}})
    assert patched.status == 200
    wait_until(
        lambda: annotations_of(api, ev_path(NAMESPACE, "web-0.updated")).get("seen-stage") == "two",
        timeout=TIMEOUT,
        message="the update handler's annotation",
    )
    assert ("update", "Event", "web-0.updated") in operator.seen.changes


def test_delete_waits_for_the_handler(operator: Operator, api: Api) -> None:
    assert api.post(ev_path(NAMESPACE), event("web-0.deleted", NAMESPACE)).status == 201
    wait_until(
        lambda: (
            FINALIZER
            in (api.get(ev_path(NAMESPACE, "web-0.deleted")).json["metadata"].get("finalizers") or [])
        ),
        timeout=TIMEOUT,
        message="kopf's finalizer",
    )
    response = api.delete(ev_path(NAMESPACE, "web-0.deleted"))
    # Held by kopf's finalizer: 200 with the object marked for deletion, as kube-apiserver answers a
    # held delete without orphanDependents=false (kopf cannot be quicker than the answer: it only
    # learns of the deletion from this very change).
    assert response.status == 200, response.json
    assert response.json["kind"] == "Event"
    assert response.json["metadata"]["deletionTimestamp"]
    wait_until(
        lambda: api.get(ev_path(NAMESPACE, "web-0.deleted")).status == 404,
        timeout=TIMEOUT,
        message="the object to go",
    )
    assert "web-0.deleted" in operator.seen.deleted


def test_rolebindings_get_no_finalizer_without_a_deletion_handler(operator: Operator, api: Api) -> None:
    assert api.post(rb_path(NAMESPACE), rolebinding("kopf-rb")).status == 201
    wait_until(
        lambda: annotations_of(api, rb_path(NAMESPACE, "kopf-rb")).get("seen-by") == "kopf",
        timeout=TIMEOUT,
        message="the binding",
    )
    meta = api.get(rb_path(NAMESPACE, "kopf-rb")).json["metadata"]
    assert "finalizers" not in meta
    assert api.delete(rb_path(NAMESPACE, "kopf-rb")).status == 200


def test_other_namespaces_are_left_alone(operator: Operator, api: Api) -> None:
    assert api.post(ev_path("not-kopf"), event("ignored", "not-kopf")).status == 201
    assert api.post(ev_path(NAMESPACE), event("web-0.marker", NAMESPACE)).status == 201
    # Once a later Event of the watched namespace is handled, the earlier one elsewhere would have been.
    wait_until(
        lambda: annotations_of(api, ev_path(NAMESPACE, "web-0.marker")).get("seen-by") == "kopf",
        timeout=TIMEOUT,
        message="marker",
    )
    assert annotations_of(api, ev_path("not-kopf", "ignored")) == {}
    assert not [c for c in operator.seen.changes if c[2] == "ignored"]
