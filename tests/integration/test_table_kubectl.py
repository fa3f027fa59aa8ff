"""Server-side printing with the real kubectl (`get`, `-o wide`, `-w`, labels, sorting) and the Table,
PartialObjectMetadata and gzip responses over HTTPS, on both backends."""

from __future__ import annotations

import gzip
import json
import subprocess
import threading
from collections.abc import Generator, Iterator
from typing import Any

import pytest
import yaml

from tests.support.api import Api, ev_path, event, rb_path, rolebinding
from tests.support.kubectl import EV, RB, Kubectl, event_yaml, rolebinding_yaml
from tests.support.metrics import wait_for_watchers, watchers
from tests.support.server import ServerProcess
from tests.support.waiting import wait_until

pytestmark = pytest.mark.tools

TABLE_V1 = "application/json;as=Table;v=v1;g=meta.k8s.io"
TABLE_V1BETA1 = "application/json;as=Table;v=v1beta1;g=meta.k8s.io"
KUBECTL_ACCEPT = f"{TABLE_V1},{TABLE_V1BETA1},application/json"
POM = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
POM_LIST = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
SUBJECTS = [
    {"kind": "Group", "name": "devs"},
    {"kind": "User", "name": "alice"},
    {"kind": "ServiceAccount", "name": "bot", "namespace": "ci"},
    {"kind": "User", "name": "bob"},
]


@pytest.fixture(scope="module")
def printed(kubectl_cli: Kubectl) -> None:
    """A RoleBinding with every kind of subject and an Event, in namespace `printed`."""
    kubectl_cli.run("create", "-f", "-", input=rolebinding_yaml("readers", "printed", SUBJECTS))
    kubectl_cli.run("create", "-f", "-", input=rolebinding_yaml("admins", "printed"))
    kubectl_cli.run("create", "-f", "-", input=event_yaml("web-0.started", "printed"))


def table_lines(output: str) -> list[list[str]]:
    """kubectl's table as rows of cells (columns are separated by at least two spaces)."""
    return [[cell for cell in line.split("  ") if cell.strip()] for line in output.splitlines() if line]


def cells(output: str) -> list[list[str]]:
    return [[cell.strip() for cell in row] for row in table_lines(output)]


# ----------------------------------------------------------------------------- kubectl get


def test_get_rolebindings(kubectl_cli: Kubectl, printed: None) -> None:
    out = kubectl_cli.run("get", RB, "-n", "printed").stdout
    header, *rows = cells(out)
    assert header == ["NAME", "ROLE", "AGE"]
    assert [row[:2] for row in rows] == [["admins", "ClusterRole/view"], ["readers", "ClusterRole/view"]]
    assert all(row[2].endswith("s") or row[2].endswith("m") for row in rows)


def test_get_rolebindings_wide(kubectl_cli: Kubectl, printed: None) -> None:
    out = kubectl_cli.run("get", RB, "readers", "-n", "printed", "-o", "wide").stdout
    header, row = cells(out)
    assert header == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    assert row[:2] == ["readers", "ClusterRole/view"]
    assert row[3:] == ["alice, bob", "devs", "ci/bot"]


def test_get_events(kubectl_cli: Kubectl, printed: None) -> None:
    out = kubectl_cli.run("get", EV, "-n", "printed").stdout
    header, row = cells(out)
    assert header == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert row[1:] == ["Normal", "Started", "pod/web-0", "container started"]


def test_get_events_wide(kubectl_cli: Kubectl, printed: None) -> None:
    out = kubectl_cli.run("get", EV, "-n", "printed", "-o", "wide").stdout
    lines = out.splitlines()
    header = cells(out)[0]
    assert header == [
        "LAST SEEN",
        "TYPE",
        "REASON",
        "OBJECT",
        "SUBOBJECT",
        "SOURCE",
        "MESSAGE",
        "FIRST SEEN",
        "COUNT",
        "NAME",
    ]
    # SUBOBJECT is empty, so place cells by the header's column offsets.
    starts = [lines[0].index(name) for name in header]
    row = lines[1]
    by_column = {
        name: row[start : (starts[i + 1] if i + 1 < len(starts) else None)].strip()
        for i, (name, start) in enumerate(zip(header, starts, strict=True))
    }
    assert by_column["OBJECT"] == "pod/web-0"
    assert by_column["SUBOBJECT"] == ""
    assert by_column["SOURCE"] == "example.com/controller, controller-1"
    assert by_column["MESSAGE"] == "container started"
    assert by_column["COUNT"] == "1"
    assert by_column["NAME"] == "web-0.started"
    assert by_column["FIRST SEEN"] == by_column["LAST SEEN"]


def test_get_all_namespaces_adds_namespace(kubectl_cli: Kubectl, printed: None) -> None:
    header, *rows = cells(kubectl_cli.run("get", RB, "--all-namespaces").stdout)
    assert header == ["NAMESPACE", "NAME", "ROLE", "AGE"]
    assert ["printed", "readers", "ClusterRole/view"] in [row[:3] for row in rows]


def test_show_labels_and_label_columns(kubectl_cli: Kubectl, printed: None) -> None:
    header, *rows = cells(kubectl_cli.run("get", RB, "-n", "printed", "--show-labels").stdout)
    assert header == ["NAME", "ROLE", "AGE", "LABELS"]
    assert {row[-1] for row in rows} == {"app=demo"}
    header, *rows = cells(kubectl_cli.run("get", RB, "-n", "printed", "-L", "app").stdout)
    assert header == ["NAME", "ROLE", "AGE", "APP"]
    assert {row[-1] for row in rows} == {"demo"}


def test_sort_by(kubectl_cli: Kubectl, printed: None) -> None:
    # --sort-by asks for includeObject=Object and sorts on the full objects (Group before User).
    out = kubectl_cli.run("get", RB, "-n", "printed", "--sort-by", "{.subjects[0].kind}").stdout
    assert [row[0] for row in cells(out)[1:]] == ["readers", "admins"]
    out = kubectl_cli.run("get", RB, "-n", "printed", "--sort-by", ".metadata.name").stdout
    assert [row[0] for row in cells(out)[1:]] == ["admins", "readers"]


def test_name_and_custom_columns(kubectl_cli: Kubectl, printed: None) -> None:
    out = kubectl_cli.run("get", RB, "-n", "printed", "-o", "name").stdout
    assert out.split() == [
        "rolebinding.rbac.authorization.core.io/admins",
        "rolebinding.rbac.authorization.core.io/readers",
    ]
    out = kubectl_cli.run(
        "get", EV, "-n", "printed", "-o", "custom-columns=NAME:.metadata.name,NOTE:.note,KIND:.regarding.kind"
    ).stdout
    assert cells(out) == [["NAME", "NOTE", "KIND"], ["web-0.started", "container started", "Pod"]]


def test_no_resources(kubectl_cli: Kubectl) -> None:
    result = kubectl_cli.run("get", EV, "-n", "nothing-here")
    assert result.stdout == ""
    assert "No resources found in nothing-here namespace." in result.stderr


# ----------------------------------------------------------------------------- kubectl get -w


class Lines:
    """A process's stdout lines as they arrive, read in a thread."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, count: int, timeout: float = 20) -> list[str]:
        """The lines, once there are `count`."""
        wait_until(lambda: len(self.lines) >= count, timeout=timeout, message=f"{count} lines")
        return list(self.lines)


@pytest.fixture
def watch(kubectl_cli: Kubectl) -> Iterator[Any]:
    processes: list[subprocess.Popen[str]] = []

    def start(*args: str) -> Lines:
        process = subprocess.Popen(
            kubectl_cli.command("get", *args, "--watch"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        processes.append(process)
        return Lines(process)

    yield start
    for process in processes:
        process.terminate()
        process.wait(timeout=10)


def test_watch_rolebindings(kubectl_cli: Kubectl, watch: Any) -> None:
    kubectl_cli.run("create", "-f", "-", input=rolebinding_yaml("before", "watch-rb"))
    lines = watch(RB, "-n", "watch-rb", "-o", "wide")
    assert len(lines.wait_for(2)) == 2  # header and the existing binding
    kubectl_cli.run(
        "create", "-f", "-", input=rolebinding_yaml("after", "watch-rb", [{"kind": "Group", "name": "ops"}])
    )
    kubectl_cli.run("label", RB, "after", "-n", "watch-rb", "stage=two")
    seen = cells("\n".join(lines.wait_for(4)))
    assert lines.process.poll() is None
    assert seen[0] == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    assert seen[1][0] == "before"
    assert [row[0] for row in seen[2:4]] == ["after", "after"]
    assert seen[2][1] == "ClusterRole/view" and seen[2][3] == "ops"
    # The header is printed once: later events carry no column definitions.
    assert sum(1 for row in seen if row[0] == "NAME") == 1


def test_watch_events_with_event_types(kubectl_cli: Kubectl, watch: Any, server: ServerProcess) -> None:
    open_before = watchers(server, "Event")
    lines = watch(EV, "-n", "watch-ev", "--output-watch-events")
    wait_for_watchers(server, "Event", above=open_before)  # kubectl listed (nothing) and watches
    kubectl_cli.run("create", "-f", "-", input=event_yaml("web-0.created", "watch-ev"))
    kubectl_cli.run("delete", EV, "web-0.created", "-n", "watch-ev")
    seen = cells("\n".join(lines.wait_for(3)))
    assert seen[0] == ["EVENT", "LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert [row[0] for row in seen[1:3]] == ["ADDED", "DELETED"]
    assert seen[1][3:] == ["Started", "pod/web-0", "container started"]


# ----------------------------------------------------------------------------- HTTPS


@pytest.fixture(scope="module")
def objects(api: Api) -> None:
    for name in ("one", "two"):
        assert api.post(rb_path("https-table"), rolebinding(name)).status == 201
    assert api.post(ev_path("https-table"), event("web-0.a", "https-table")).status == 201


def test_list_as_table(api: Api, objects: None) -> None:
    response = api.get(rb_path("https-table"), headers={"Accept": KUBECTL_ACCEPT})
    assert response.status == 200
    assert response.headers["Content-Type"] == "application/json"
    body = response.json
    assert list(body) == ["kind", "apiVersion", "metadata", "columnDefinitions", "rows"]
    assert (body["kind"], body["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert body["metadata"]["resourceVersion"].isdigit()
    assert [c["name"] for c in body["columnDefinitions"]] == [
        "Name",
        "Role",
        "Age",
        "Users",
        "Groups",
        "ServiceAccounts",
    ]
    name_column = body["columnDefinitions"][0]
    assert list(name_column) == ["name", "type", "format", "description", "priority"]
    assert (name_column["type"], name_column["format"], name_column["priority"]) == ("string", "name", 0)
    assert body["columnDefinitions"][3]["priority"] == 1
    assert [row["cells"][:2] for row in body["rows"]] == [
        ["one", "ClusterRole/view"],
        ["two", "ClusterRole/view"],
    ]
    assert [row["cells"][3] for row in body["rows"]] == ["alice", "alice"]
    first = body["rows"][0]["object"]
    assert (first["kind"], first["apiVersion"]) == ("PartialObjectMetadata", "meta.k8s.io/v1")
    assert first["metadata"]["name"] == "one"
    assert first["metadata"]["uid"]


def test_table_v1beta1_and_pagination(api: Api, objects: None) -> None:
    response = api.get(
        rb_path("https-table") + "?limit=1", headers={"Accept": f"{TABLE_V1BETA1},application/json"}
    )
    body = response.json
    assert body["apiVersion"] == "meta.k8s.io/v1beta1"
    assert body["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"
    assert body["metadata"]["continue"]
    assert body["metadata"]["remainingItemCount"] == 1
    rest = api.get(
        rb_path("https-table") + f"?limit=1&continue={body['metadata']['continue']}",
        headers={"Accept": TABLE_V1},
    ).json
    assert [row["cells"][0] for row in rest["rows"]] == ["two"]
    assert "continue" not in rest["metadata"]


@pytest.mark.parametrize(
    ("include", "expected"),
    [("None", None), ("Metadata", "PartialObjectMetadata"), ("Object", "RoleBinding")],
)
def test_include_object(api: Api, objects: None, include: str, expected: str | None) -> None:
    response = api.get(
        rb_path("https-table", "one") + f"?includeObject={include}", headers={"Accept": TABLE_V1}
    )
    body = response.json
    assert list(body["metadata"]) == ["resourceVersion"]
    [row] = body["rows"]
    assert row["cells"][0] == "one"
    assert "object" in row
    if expected is None:
        assert row["object"] is None
    else:
        assert row["object"]["kind"] == expected
    if include == "Object":
        assert row["object"]["apiVersion"] == "rbac.authorization.core.io/v1"
        assert row["object"]["roleRef"]["name"] == "view"


def test_include_object_invalid(api: Api, objects: None) -> None:
    response = api.get(rb_path("https-table") + "?includeObject=Everything", headers={"Accept": TABLE_V1})
    assert response.status == 400
    assert response.json["reason"] == "BadRequest"
    assert response.json["message"].startswith("Unable to convert to Table as requested: includeObject:")


def test_event_table_cells(api: Api, objects: None) -> None:
    body = api.get(ev_path("https-table"), headers={"Accept": KUBECTL_ACCEPT}).json
    assert [c["name"] for c in body["columnDefinitions"]] == [
        "Last Seen",
        "Type",
        "Reason",
        "Object",
        "Subobject",
        "Source",
        "Message",
        "First Seen",
        "Count",
        "Name",
    ]
    [row] = body["rows"]
    assert row["cells"][1:7] == [
        "Normal",
        "Started",
        "pod/web-0",
        "",
        "example.com/controller, controller-1",
        "container started",
    ]
    assert row["cells"][8:] == [1, "web-0.a"]


def test_partial_object_metadata(api: Api, objects: None) -> None:
    single = api.get(rb_path("https-table", "one"), headers={"Accept": f"{POM},application/json"}).json
    assert list(single) == ["kind", "apiVersion", "metadata"]
    assert (single["kind"], single["apiVersion"]) == ("PartialObjectMetadata", "meta.k8s.io/v1")
    assert single["metadata"]["name"] == "one"
    listed = api.get(rb_path("https-table"), headers={"Accept": f"{POM_LIST},application/json"}).json
    assert (listed["kind"], listed["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
    assert listed["metadata"]["resourceVersion"].isdigit()
    assert [item["metadata"]["name"] for item in listed["items"]] == ["one", "two"]
    assert {item["kind"] for item in listed["items"]} == {"PartialObjectMetadata"}


def test_partial_object_metadata_of_the_wrong_shape(api: Api, objects: None) -> None:
    response = api.get(rb_path("https-table"), headers={"Accept": POM})
    assert response.status == 406
    assert response.json["reason"] == "NotAcceptable"
    assert "is a list" in response.json["message"]
    response = api.get(rb_path("https-table", "one"), headers={"Accept": POM_LIST})
    assert response.status == 406
    assert "is not a list" in response.json["message"]


def test_only_unsupported_transformations_are_not_acceptable(api: Api, objects: None) -> None:
    response = api.get(
        rb_path("https-table"), headers={"Accept": "application/json;as=Table;v=v9;g=meta.k8s.io"}
    )
    assert response.status == 406
    assert response.json["kind"] == "Status"
    assert response.json["reason"] == "NotAcceptable"
    # Discovery serves no transformation: a Table-only Accept is refused, a fallback honoured.
    assert api.get("/apis", headers={"Accept": TABLE_V1}).status == 406
    assert (
        api.get("/apis/events.core.io/v1", headers={"Accept": KUBECTL_ACCEPT}).json["kind"]
        == "APIResourceList"
    )


def test_errors_stay_status(api: Api, objects: None) -> None:
    response = api.get(rb_path("https-table", "missing"), headers={"Accept": KUBECTL_ACCEPT})
    assert response.status == 404
    assert response.json["kind"] == "Status"
    assert response.json["reason"] == "NotFound"


def test_writes_answer_in_the_negotiated_form(api: Api) -> None:
    # Upstream's create, update, patch and delete handlers convert their responses too.
    created = api.post(rb_path("https-writes"), rolebinding("w"), headers={"Accept": KUBECTL_ACCEPT})
    assert created.status == 201
    assert created.json["kind"] == "Table"
    assert created.json["rows"][0]["cells"][0] == "w"
    deleted = api.delete(rb_path("https-writes", "w"), headers={"Accept": KUBECTL_ACCEPT})
    assert deleted.status == 200
    assert deleted.json["kind"] == "Status"  # a Status is never converted
    # An unacceptable Accept is refused before anything is written.
    refused = api.post(rb_path("https-writes"), rolebinding("never"), headers={"Accept": "text/html"})
    assert refused.status == 406
    assert api.get(rb_path("https-writes", "never")).status == 404


def test_gzip(api: Api) -> None:
    big = rolebinding("big")
    big["metadata"]["annotations"] = {"example.com/blob": "x" * 150_000}
    assert api.post(rb_path("https-gzip"), big).status == 201
    assert api.post(rb_path("https-gzip"), rolebinding("small")).status == 201
    plain = api.get(rb_path("https-gzip", "big"))
    assert "Content-Encoding" not in plain.headers
    zipped = api.get(rb_path("https-gzip", "big"), headers={"Accept-Encoding": "gzip"})
    assert zipped.status == 200
    assert zipped.headers["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in zipped.headers.get_all("Vary", [])
    assert len(zipped.body) < len(plain.body)
    assert json.loads(gzip.decompress(zipped.body)) == plain.json
    listed = api.get(rb_path("https-gzip"), headers={"Accept-Encoding": "gzip"})
    assert listed.headers["Content-Encoding"] == "gzip"
    assert [i["metadata"]["name"] for i in json.loads(gzip.decompress(listed.body))["items"]] == [
        "big",
        "small",
    ]
    # Below the threshold it goes out as it is: one small object, or the list as a Table of cells.
    small = api.get(rb_path("https-gzip", "small"), headers={"Accept-Encoding": "gzip"})
    assert "Content-Encoding" not in small.headers
    assert small.json["metadata"]["name"] == "small"
    as_table = api.get(
        rb_path("https-gzip") + "?includeObject=None", headers={"Accept-Encoding": "gzip", "Accept": TABLE_V1}
    )
    assert "Content-Encoding" not in as_table.headers
    assert as_table.json["kind"] == "Table"


# ----------------------------------------------------------------------------- HTTPS watch


def watch_lines(api: Api, path: str, accept: str) -> Generator[dict[str, Any]]:
    """A watch's events as they arrive; asking for gzip, which upstream does not apply to watches."""
    conn = api.connection(timeout=30)
    conn.request("GET", path, headers={"Accept": accept, "Accept-Encoding": "gzip"})
    response = conn.getresponse()
    assert response.status == 200, response.read()
    assert response.headers.get("Content-Encoding") is None
    try:
        while line := response.readline():
            yield json.loads(line)
    finally:
        conn.close()


def test_watch_as_table(api: Api) -> None:
    assert api.post(rb_path("https-watch"), rolebinding("first")).status == 201
    events = watch_lines(api, rb_path("https-watch") + "?watch=true&timeoutSeconds=20", TABLE_V1)
    added = next(events)
    assert added["type"] == "ADDED"
    assert added["object"]["kind"] == "Table"
    assert len(added["object"]["columnDefinitions"]) == 6
    assert added["object"]["rows"][0]["cells"][0] == "first"
    assert added["object"]["metadata"]["resourceVersion"].isdigit()
    assert api.post(rb_path("https-watch"), rolebinding("second")).status == 201
    second = next(events)
    assert second["type"] == "ADDED"
    assert "columnDefinitions" in second["object"] and second["object"]["columnDefinitions"] is None
    assert second["object"]["rows"][0]["cells"][0] == "second"
    assert second["object"]["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert api.delete(rb_path("https-watch", "second")).status == 200
    deleted = next(events)
    assert deleted["type"] == "DELETED"
    assert deleted["object"]["rows"][0]["cells"][0] == "second"
    events.close()


def test_watch_initial_events_bookmark_as_table(api: Api) -> None:
    assert api.post(ev_path("https-watch-list"), event("web-0.b", "https-watch-list")).status == 201
    query = (
        "?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"
        "&resourceVersion=0&includeObject=None&timeoutSeconds=20"
    )
    events = watch_lines(api, ev_path("https-watch-list") + query, f"{TABLE_V1},application/json")
    added, bookmark = next(events), next(events)
    assert added["type"] == "ADDED"
    assert added["object"]["rows"][0]["object"] is None
    assert added["object"]["rows"][0]["cells"][3] == "pod/web-0"
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"]["kind"] == "Table"
    assert bookmark["object"]["columnDefinitions"] is None
    [row] = bookmark["object"]["rows"]
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert row["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    events.close()


def test_watch_as_partial_object_metadata(api: Api) -> None:
    assert api.post(rb_path("https-watch-pom"), rolebinding("meta")).status == 201
    events = watch_lines(api, rb_path("https-watch-pom") + "?watch=true&timeoutSeconds=20", POM)
    added = next(events)
    assert added["object"]["kind"] == "PartialObjectMetadata"
    assert added["object"]["metadata"]["name"] == "meta"
    events.close()


def test_watch_in_yaml_is_not_acceptable(api: Api) -> None:
    response = api.get(rb_path("https-watch") + "?watch=true", headers={"Accept": "application/yaml"})
    assert response.status == 406
    # The Status itself is written in the format the client did accept.
    status = yaml.safe_load(response.body)
    assert status["reason"] == "NotAcceptable"
    assert "application/json;stream=watch" in status["message"]
