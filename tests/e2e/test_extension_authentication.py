"""In a cluster, coreio takes its client CA, front-proxy CA, allowed names and header names from
kube-system/extension-apiserver-authentication and follows changes of that ConfigMap
(`--extension-authentication-refresh-interval`, 1 s here).

A coreio of its own (delegated like the session's, on the shared control plane, under another etcd
prefix, not registered as an APIService): the test changes the cluster's ConfigMap, which every
extension server of the cluster reads. The change only adds (a username header, an allowed name),
so the aggregator, which sends `X-Remote-User` from its own flags, is never cut off; kube-apiserver
keeps the ConfigMap as the union of what it holds and what kube-apiserver's flags say, so the
addition stays until the test puts the original values back.
"""

from __future__ import annotations

import http.client
import json
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from apiserver import pki
from tests.support.aggregation import AggregatedCoreio
from tests.support.controlplane import ControlPlane
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

CONFIGMAP = ("configmap", "extension-apiserver-authentication", "-n", "kube-system")
USERNAME_HEADERS = "requestheader-username-headers"
ALLOWED_NAMES = "requestheader-allowed-names"
REFRESH_INTERVAL = 1.0
RELOAD_TIMEOUT = 15.0
SECOND_PROXY = "second-front-proxy"


@pytest.fixture(scope="module")
def reloading_coreio(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AggregatedCoreio]:
    coreio = AggregatedCoreio(
        control_plane,
        tmp_path_factory.mktemp("coreio-reload"),
        extra_args=[f"--extension-authentication-refresh-interval={REFRESH_INTERVAL}"],
        etcd_prefix="/coreio-reload",
    )
    coreio.start()
    try:
        yield coreio
    finally:
        coreio.stop()


def _who(coreio: AggregatedCoreio, cert: tuple[Path, Path], headers: dict[str, str]) -> tuple[int, str]:
    """GET coreio directly with a client certificate and headers: (status, the user coreio saw,
    from its audit log; "" for nobody)."""
    context = ssl.create_default_context(cafile=str(coreio.pki_dir / "ca.crt"))
    context.load_cert_chain(str(cert[0]), str(cert[1]))
    marker = f"reload-{time.monotonic_ns()}"
    connection = http.client.HTTPSConnection("127.0.0.1", coreio.server.port, context=context, timeout=30)
    try:
        connection.request(
            "GET", f"/apis/events.core.io/v1/namespaces/{marker}/events", headers={**headers, "Accept": "*/*"}
        )
        response = connection.getresponse()
        response.read()
        status = response.status
    finally:
        connection.close()
    (entry,) = wait_until(
        lambda: [e for e in coreio.audit_events() if marker in e["requestURI"]],
        timeout=5,
        message=f"an audit entry for {marker}",
    )
    return status, entry["user"].get("username", "")


def _wait_for_who(
    coreio: AggregatedCoreio, cert: tuple[Path, Path], headers: dict[str, str], wanted: tuple[int, str]
) -> float:
    started = time.monotonic()
    seen: list[tuple[int, str]] = []

    def who() -> bool:
        seen[:] = [_who(coreio, cert, headers)]
        return seen[0] == wanted

    wait_until(who, timeout=RELOAD_TIMEOUT, interval=0.2, message=lambda: f"{wanted}, still {seen}")
    return time.monotonic() - started


def _patch(kc: ControlPlane, data: dict[str, str]) -> None:
    kc.run("patch", *CONFIGMAP, "--type=merge", "-p", json.dumps({"data": data}))


def test_header_and_allowed_names_follow_the_configmap(
    reloading_coreio: AggregatedCoreio, control_plane: ControlPlane, tmp_path: Path
) -> None:
    kc, coreio = control_plane, reloading_coreio
    original = kc.json("get", *CONFIGMAP)["data"]
    assert json.loads(original[USERNAME_HEADERS]) == ["X-Remote-User"]
    assert json.loads(original[ALLOWED_NAMES]) == ["front-proxy-client"]

    fp = control_plane.pki.path
    front_proxy = (fp("front-proxy-client.crt"), fp("front-proxy-client.key"))
    second = pki.issue_client_certificate(control_plane.pki.front_proxy_ca, SECOND_PROXY)
    second.save(tmp_path / "second.crt", tmp_path / "second.key")
    second_proxy = (tmp_path / "second.crt", tmp_path / "second.key")
    other_header = {"X-Other-User": "frank"}
    from_second = {"X-Remote-User": "grace"}

    # As published at start: X-Other-User names no one, the second proxy is not allowed to assert.
    assert _who(coreio, front_proxy, {"X-Remote-User": "erin"}) == (403, "erin")
    assert _who(coreio, front_proxy, other_header) == (401, "")
    assert _who(coreio, second_proxy, from_second) == (401, "")

    added = {
        USERNAME_HEADERS: json.dumps(["X-Remote-User", "X-Other-User"]),
        ALLOWED_NAMES: json.dumps(["front-proxy-client", SECOND_PROXY]),
    }
    _patch(kc, added)
    try:
        # Authenticated (then refused by authorization: frank has no grant) once coreio re-read it.
        reloaded_after = _wait_for_who(coreio, front_proxy, other_header, (403, "frank"))
        assert _who(coreio, second_proxy, from_second) == (403, "grace")
        # The old header still works, and the cluster kept the addition.
        assert _who(coreio, front_proxy, {"X-Remote-User": "erin"}) == (403, "erin")
        # (Compared as JSON: kube-apiserver's own controller may write the lists back compact meanwhile.)
        kept = kc.json("get", *CONFIGMAP)["data"]
        assert {k: json.loads(kept[k]) for k in added} == {k: json.loads(v) for k, v in added.items()}
        assert "front-proxy settings reloaded from extension-apiserver-authentication" in (
            coreio.server.log_file.read_text()
        )
    finally:
        _patch(kc, {USERNAME_HEADERS: original[USERNAME_HEADERS], ALLOWED_NAMES: original[ALLOWED_NAMES]})

    # The original values back: so is coreio.
    restored_after = _wait_for_who(coreio, front_proxy, other_header, (401, ""))
    assert _who(coreio, second_proxy, from_second) == (401, "")
    assert _who(coreio, front_proxy, {"X-Remote-User": "erin"}) == (403, "erin")
    print(
        f"refresh every {REFRESH_INTERVAL:.0f}s: added names honoured after {reloaded_after:.2f}s, "
        f"removed after {restored_after:.2f}s"
    )
