"""A test server's /metrics, and the waits that read it: for a RoleBinding to grant (every worker's
binding index has followed the store to its write) and for a client's watch to be open."""

from __future__ import annotations

import http.client

from prometheus_client.parser import text_string_to_metric_families

from apiserver.supervisor import cores
from tests.support.api import RB_PATH, Api
from tests.support.server import ServerProcess
from tests.support.waiting import wait_until

BINDING_INDEX = "coreio_rbac_binding_index_resource_version"
WATCHERS = "apiserver_registered_watchers"
REQUESTS = "apiserver_request_total"


def scrape(server: ServerProcess) -> str:
    """/metrics, read with the admin's certificate; empty unless it answers 200 (a full in-flight
    limit answers 429)."""
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=server.ssl_context(), timeout=10)
    try:
        conn.request("GET", "/metrics")
        answer = conn.getresponse()
        text = answer.read().decode()
    finally:
        conn.close()
    return text if answer.status == 200 else ""


def metric(server: ServerProcess, name: str, labels: str = "") -> float:
    """The sum of the samples of `name` on /metrics whose labels contain `labels` (as written in
    the text format, e.g. `verb="WATCH"`); 0 when there are none."""
    total = 0.0
    for line in scrape(server).splitlines():
        key, _, value = line.rpartition(" ")
        if not line.startswith("#") and key.split("{", 1)[0] == name and labels in key:
            total += float(value)
    return total


def samples(server: ServerProcess, name: str) -> list[tuple[dict[str, str], float]]:
    """Each sample of the family `name` (one a worker, labelled `worker`, with several): labels, value."""
    return [
        (sample.labels, sample.value)
        for family in text_string_to_metric_families(scrape(server))
        for sample in family.samples
        if sample.name == name
    ]


def requests_answered(server: ServerProcess, resource: str) -> float:
    """How many requests about `resource` (its plural, e.g. events) the server has answered."""
    return sum(value for labels, value in samples(server, REQUESTS) if labels.get("resource") == resource)


def workers(server: ServerProcess) -> int:
    """How many worker processes serve `server` (its --workers; 0 or none: one a core)."""
    args = server.extra_args
    for index, arg in enumerate(args):
        if arg == "--workers":
            return int(args[index + 1]) or cores()
        if arg.startswith("--workers="):
            return int(arg.partition("=")[2]) or cores()
    return cores()


def wait_for_bindings(
    server: ServerProcess, resource_version: str | int | None = None, timeout: float = 10
) -> None:
    """Until every worker's RBAC binding index has reached `resource_version` (a RoleBinding's
    write; by default the newest of the RoleBindings stored now): from then on what is written
    grants, whichever worker a request reaches."""
    if resource_version is None:
        resource_version = max(_stored_binding_versions(server), default=0)
    wanted, count = int(resource_version), workers(server)

    def reached() -> list[float] | None:
        versions = [value for _, value in samples(server, BINDING_INDEX)]
        return versions if len(versions) == count and min(versions) >= wanted else None

    wait_until(reached, timeout=timeout, message=f"every worker's binding index at resourceVersion {wanted}")


def _stored_binding_versions(server: ServerProcess) -> list[int]:
    listed = Api(server).get(f"{RB_PATH}/rolebindings")
    assert listed.status == 200, listed.body
    return [int(item["metadata"]["resourceVersion"]) for item in listed.json["items"]]


def watchers(server: ServerProcess, kind: str) -> float:
    """How many watches of `kind` (its Kind, e.g. RoleBinding) the server has open."""
    return metric(server, WATCHERS, f'kind="{kind}"')


def wait_for_watchers(server: ServerProcess, kind: str, above: float, timeout: float = 20) -> None:
    """Until more than `above` watches of `kind` are open: a client started since `watchers` read
    `above` (`kubectl get --watch`, say) has listed and begun watching."""
    wait_until(
        lambda: watchers(server, kind) > above,
        timeout=timeout,
        message=f"a watch of {kind} to open (besides {above:g})",
    )
