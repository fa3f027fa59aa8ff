"""Fuzzing the real server over TLS (issue #5, item 8): schemathesis generates requests from the
server's own OpenAPI v3 documents (valid and invalid ones, for every operation, at random names and
at existing objects), and hypothesis generates patch documents of every patch type against existing
objects. Thousands of requests; the invariants: no 5xx, every error body a Status, no traceback in
the server's log, and /readyz still answers at the end. Counts are printed (`pytest -s` shows them).

The runs are seeded (COREIO_FUZZ_SEED, default 5) so CI is repeatable; set another seed, or raise
COREIO_FUZZ_EXAMPLES, to explore further.
"""

from __future__ import annotations

import collections
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import hypothesis
import pytest
import requests
import schemathesis
import yaml
from hypothesis import HealthCheck, Phase, given
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.core.result import Err
from schemathesis.schemas import APIOperation

from tests.support.api import EV_PATH, RB_PATH, Api, ev_path, event, rb_path, rolebinding
from tests.support.rawhttp import assert_no_tracebacks
from tests.support.server import ServerProcess, start_server

SEED = int(os.environ.get("COREIO_FUZZ_SEED", "5"))
# Examples per operation and way of generating (four times as many patch documents per patch type
# and kind): about 4 600 requests in all at the default.
EXAMPLES = int(os.environ.get("COREIO_FUZZ_EXAMPLES", "40"))
NAMESPACE = "fuzz"
# What clients ask for besides plain JSON (None: the generated request's own Accept).
ACCEPT = st.sampled_from(
    [
        None,
        None,
        "application/yaml",
        "application/json;as=Table;v=v1;g=meta.k8s.io",
        "application/json;as=Table;v=v1;g=meta.k8s.io, application/json",
        "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
        "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
        "application/vnd.kubernetes.protobuf, application/json",
        "application/json;stream=watch",
        "application/json;pretty=1",
        "text/html",
        "*/*;q=0",
    ]
)
SEED_NAME = "seed"


@dataclass
class Tally:
    """What the fuzzer sent and what came back."""

    sent: int = 0
    not_sent: int = 0  # refused by the client library itself (a header it will not encode)
    statuses: collections.Counter[int] = field(default_factory=collections.Counter)
    failures: list[str] = field(default_factory=list)

    def report(self, title: str, started: float) -> str:
        codes = ", ".join(f"{code}: {count}" for code, count in sorted(self.statuses.items()))
        return (
            f"\n{title}: {self.sent} requests in {time.monotonic() - started:.1f}s "
            f"({self.not_sent} refused by the client library); responses {{{codes}}}; "
            f"{len(self.failures)} failures"
        )


@dataclass
class Target:
    server: ServerProcess
    session: requests.Session

    def send(self, tally: Tally, method: str, url: str, **kwargs: Any) -> None:
        try:
            response = self.session.request(
                method,
                url,
                stream=True,
                timeout=30,
                verify=str(self.server.ca_file),
                cert=(str(self.server.admin_cert[0]), str(self.server.admin_cert[1])),
                **kwargs,
            )
        except (requests.exceptions.InvalidHeader, requests.exceptions.InvalidURL, UnicodeEncodeError):
            tally.not_sent += 1
            return
        except requests.RequestException as exc:
            tally.sent += 1
            tally.failures.append(f"{method} {url}: no response: {exc!r}")
            return
        tally.sent += 1
        tally.statuses[response.status_code] += 1
        with response:
            if response.status_code == 200 and "chunked" in response.headers.get("Transfer-Encoding", ""):
                return  # a watch: its headers are all we wait for
            body = response.content
        content_type = response.headers.get("Content-Type", "")
        problem = _problem(response.status_code, content_type, body)
        if problem:
            problem = f"{problem} ({content_type})"
            sent_body = kwargs.get("json", kwargs.get("data"))
            tally.failures.append(
                f"{method} {url} {problem}: {body[:300]!r} (body sent: {str(sent_body)[:300]})"
            )


def _problem(status: int, content_type: str, body: bytes) -> str:
    if status < 400:
        return ""
    if status == 400 and content_type.startswith("text/plain"):
        return ""  # refused by aiohttp's HTTP parser before any handler (a malformed header)
    try:
        decoded = yaml.safe_load(body) if content_type.startswith("application/yaml") else json.loads(body)
    except ValueError:
        return f"{status} with a body that is no JSON"
    except yaml.YAMLError:
        return f"{status} with a body that is no YAML"
    if not isinstance(decoded, dict) or decoded.get("kind") != "Status" or decoded.get("code") != status:
        return f"{status} with a body that is no Status"
    if status >= 500:
        causes = [c.get("reason") for c in decoded.get("details", {}).get("causes", [])]
        if status == 504 and causes == ["ResourceVersionTooLarge"]:
            return ""  # upstream's deliberate 504 for a resourceVersion the store has not reached
        return f"{status}"
    return ""


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    server = start_server(tmp_path_factory.mktemp("fuzz"))
    session = requests.Session()
    session.trust_env = False  # no proxies, no CA bundle from the environment
    try:
        yield Target(server, session)
        assert Api(server).get("/readyz").status == 200, "the server stopped answering"
    finally:
        session.close()
        server.stop()
    assert_no_tracebacks(server)


def _seed(api: Api) -> None:
    """The objects the pinned cases aim at (re-created when a case deleted them)."""
    api.put(rb_path(NAMESPACE, SEED_NAME), rolebinding(SEED_NAME))
    if api.get(ev_path(NAMESPACE, SEED_NAME)).status == 404:
        api.post(ev_path(NAMESPACE), event(SEED_NAME, NAMESPACE))


def _settings(examples: int = EXAMPLES) -> hypothesis.settings:
    return hypothesis.settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate],  # failures are collected, not shrunk
        print_blob=False,
    )


def test_fuzz_every_operation_from_the_openapi_documents(target: Target) -> None:
    api = Api(target.server)
    index = api.get("/openapi/v3").json["paths"]
    operations: list[APIOperation[Any, Any, Any, Any]] = []
    for group_version in ("apis/rbac.authorization.core.io/v1", "apis/events.core.io/v1"):
        document = api.get(index[group_version]["serverRelativeURL"]).json
        schema = schemathesis.openapi.from_dict(document)
        for result in schema.get_all_operations():
            if isinstance(result, Err):
                raise result.err()
            operations.append(result.ok())
    assert len(operations) == 24
    tally = Tally()
    started = time.monotonic()
    for operation in operations:
        names = {p.name for p in operation.path_parameters}
        ways: list[dict[str, str] | None] = [None]
        if "namespace" in names:
            ways.append({"namespace": NAMESPACE, **({"name": SEED_NAME} if "name" in names else {})})
        for path_parameters in ways:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                if path_parameters:
                    _seed(api)
                strategy = operation.as_strategy(generation_mode=mode, path_parameters=path_parameters)

                @hypothesis.seed(SEED)
                @_settings()
                @given(case=strategy, accept=ACCEPT)
                def run(case: Any, accept: str | None) -> None:
                    request = case.as_transport_kwargs(base_url=target.server.url)
                    for key in ("verify", "cert", "timeout", "stream"):
                        request.pop(key, None)
                    if accept is not None:
                        request.setdefault("headers", {})["Accept"] = accept
                    target.send(tally, **request)

                run()
    print(tally.report("schemathesis", started))
    assert tally.sent > 1000
    assert not tally.failures, "\n".join(tally.failures[:30])


# ------------------------------------------------------------------------------ patch documents

_KEYS = st.sampled_from(
    [
        "metadata",
        "labels",
        "annotations",
        "name",
        "namespace",
        "finalizers",
        "ownerReferences",
        "managedFields",
        "resourceVersion",
        "uid",
        "generation",
        "subjects",
        "roleRef",
        "kind",
        "apiGroup",
        "apiVersion",
        "note",
        "series",
        "count",
        "regarding",
        "eventTime",
        "$patch",
        "$retainKeys",
        "$setElementOrder/subjects",
        "$deleteFromPrimitiveList/finalizers",
        "",
        "~1",
        "a/b",
    ]
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(["delete", "replace", "merge", "retainKeys", "User", "Group", "ServiceAccount"]),
)
_JSON = st.recursive(
    _SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(_KEYS | st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
_POINTER = st.lists(
    st.one_of(_KEYS, st.sampled_from(["0", "1", "-", "99", "~0", "~1", "~2"]), st.text(max_size=5)),
    max_size=4,
).map(lambda parts: "".join("/" + p for p in parts))
_JSON_PATCH = st.lists(
    st.fixed_dictionaries(
        {
            "op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "bogus"]),
            "path": _POINTER,
        },
        optional={"value": _JSON, "from": _POINTER},
    ),
    max_size=5,
)
_MERGE = st.dictionaries(_KEYS, _JSON, max_size=5)


def _patch(
    target: Target, tally: Tally, url: str, content_type: str, documents: st.SearchStrategy[Any]
) -> None:
    @hypothesis.seed(SEED)
    @_settings(EXAMPLES * 4)
    @given(document=documents, force=st.booleans(), dry_run=st.booleans(), accept=ACCEPT)
    def run(document: Any, force: bool, dry_run: bool, accept: str | None) -> None:
        query = {"fieldManager": "fuzz"}
        if force:
            query["force"] = "true"
        if dry_run:
            query["dryRun"] = "All"
        body = json.dumps(document).encode()
        headers = {"Content-Type": content_type, **({"Accept": accept} if accept else {})}
        target.send(tally, "PATCH", url, params=query, data=body, headers=headers)

    run()


def _over(base: dict[str, Any]) -> Callable[[Any], Any]:
    """An applied configuration made of `base` with a fuzzed document's fields mixed in."""
    return lambda extra: {**base, **extra}


def test_fuzz_patch_documents(target: Target) -> None:
    """Patches of every type aimed at objects that exist: the deepest code (json-patch pointers,
    strategic merge directives, server-side apply and managedFields)."""
    api = Api(target.server)
    tally = Tally()
    started = time.monotonic()
    kinds = [
        (f"{RB_PATH}/namespaces/{NAMESPACE}/rolebindings/{SEED_NAME}", rolebinding(SEED_NAME)),
        (f"{EV_PATH}/namespaces/{NAMESPACE}/events/{SEED_NAME}", event(SEED_NAME, NAMESPACE)),
    ]
    cases: list[tuple[str, st.SearchStrategy[Any]]] = [
        ("application/json-patch+json", _JSON_PATCH),
        ("application/merge-patch+json", _MERGE),
        ("application/strategic-merge-patch+json", _MERGE),
        ("application/apply-patch+yaml", _MERGE),
    ]
    for path, base in kinds:
        for content_type, documents in cases:
            _seed(api)
            if content_type == "application/apply-patch+yaml":
                # An applied configuration: the object itself with fuzzed fields mixed in.
                documents = documents.map(_over(base))

            _patch(target, tally, target.server.url + path, content_type, documents)
            target.send(tally, "GET", target.server.url + path)
    print(tally.report("patch documents", started))
    # The count only shows the fuzzer ran; hypothesis draws a varying number of distinct cases.
    assert tally.sent > 800
    assert not tally.failures, "\n".join(tally.failures[:30])
