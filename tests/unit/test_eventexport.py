"""EventExport (events.core.io/v1alpha1): defaults, validation (each mistake named by its path),
the status kept from writes of the object, generation, printing, the author's rights, and which
kinds --runtime-config serves."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from apiserver import cli
from apiserver.machinery.errors import StatusError
from apiserver.machinery.user import UserInfo
from apiserver.registry import strategy
from apiserver.resources import KINDS, SERVABLE_KINDS, runtime_config
from apiserver.resources.base import Admission
from apiserver.resources.eventexport import EventExportKind, secrets_read, sink_name
from tests.support.thirdkind import GadgetKind

KIND = EventExportKind()
NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def export(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "events.core.io/v1alpha1",
        "kind": "EventExport",
        "metadata": {"name": "to-hook", "namespace": "shop"},
        "spec": {"sink": {"webhook": {"url": "https://hooks.example.com/k8s"}}, **spec},
    }
    return body


def decoded(body: dict[str, Any]) -> dict[str, Any]:
    return KIND.decode(copy.deepcopy(body)).obj


def errors(body: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(e.field, e.type.value[0], e.detail) for e in KIND.validate(decoded(body))]


def test_defaults_are_set_on_decode() -> None:
    spec = decoded(export())["spec"]
    assert spec["sink"]["webhook"]["format"] == "JSON"
    assert spec["batch"] == {"maxEvents": 100, "maxWait": "1s"}
    assert (spec["series"], spec["maxLag"]) == ("Every", "1h")
    assert errors(export()) == []
    given = decoded(export(batch={"maxEvents": 5}, series="Changes", maxLag="10m"))["spec"]
    assert (given["batch"], given["series"], given["maxLag"]) == (
        {"maxEvents": 5, "maxWait": "1s"},
        "Changes",
        "10m",
    )


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"namespaces": ["*", "shop"]}, ("spec.namespaces", "FieldValueInvalid", "must be the only entry")),
        ({"namespaces": ["Shop"]}, ("spec.namespaces[0]", "FieldValueInvalid", "a lowercase RFC 1123")),
        ({"namespaces": ["a", "a"]}, ("spec.namespaces[1]", "FieldValueInvalid", "must not be listed twice")),
        (
            {"match": [{"reason": "(unclosed"}]},
            (
                "spec.match[0].reason",
                "FieldValueInvalid",
                "must be a valid regular expression: error parsing regexp: missing closing ): `(unclosed`",
            ),
        ),
        (  # RE2, as Go's regexp: no lookaround, no backreference, nothing that backtracks
            {"match": [{"note": "(?=x)"}]},
            ("spec.match[0].note", "FieldValueInvalid", "invalid or unsupported Perl syntax: `(?=`"),
        ),
        ({"drop": [{}]}, ("spec.drop[0]", "FieldValueRequired", "a rule must set at least one field")),
        (
            {"drop": [{"labels": {"app": "["}}]},
            ("spec.drop[0].labels[app]", "FieldValueInvalid", "missing closing ]"),
        ),
        (
            {"batch": {"maxEvents": 20000}},
            ("spec.batch.maxEvents", "FieldValueInvalid", "must be between 1 and 10000, inclusive"),
        ),
        (
            {"batch": {"maxWait": "2m"}},
            ("spec.batch.maxWait", "FieldValueInvalid", "must be between 0s and 60s, inclusive"),
        ),
        ({"batch": {"maxWait": "soon"}}, ("spec.batch.maxWait", "FieldValueInvalid", "a duration")),
        ({"series": "Some"}, ("spec.series", "FieldValueNotSupported", 'supported values: "Changes"')),
        ({"maxLag": "30s"}, ("spec.maxLag", "FieldValueInvalid", "at least 60s")),
        ({"maxLagRevisions": 10}, ("spec.maxLagRevisions", "FieldValueInvalid", "0 or at least 1000")),
        ({"sink": {}}, ("spec.sink", "FieldValueRequired", "a sink must be given")),
        (
            {"sink": {"webhook": {"url": "https://h.example"}, "jsonLines": {"path": "-"}}},
            ("spec.sink", "FieldValueInvalid", "exactly one sink must be given"),
        ),
        (
            {"sink": {"webhook": {"url": "ftp://h.example"}}},
            ("spec.sink.webhook.url", "FieldValueInvalid", "http"),
        ),
        (
            {"sink": {"webhook": {"url": "https://u:p@h.example"}}},
            ("spec.sink.webhook.url", "FieldValueForbidden", "must not hold credentials"),
        ),
        (
            {"sink": {"webhook": {"url": "https://h.example", "format": "XML"}}},
            ("spec.sink.webhook.format", "FieldValueNotSupported", '"CloudEvents", "JSON"'),
        ),
        (
            {"sink": {"jsonLines": {"path": "events.jsonl"}}},
            ("spec.sink.jsonLines.path", "FieldValueInvalid", "must be an absolute path"),
        ),
        (
            {"sink": {"jsonLines": {"path": "/var/log/../../etc/passwd"}}},
            ("spec.sink.jsonLines.path", "FieldValueInvalid", "without .. or //"),
        ),
        (
            {"sink": {"jsonLines": {"path": "-", "maxFiles": 3}}},
            ("spec.sink.jsonLines.maxFiles", "FieldValueForbidden", "standard output is not rotated"),
        ),
        (
            {"sink": {"webhook": {"url": "https://h.example/a b"}}},
            ("spec.sink.webhook.url", "FieldValueInvalid", "must not hold spaces or control characters"),
        ),
        (
            {"sink": {"webhook": {"url": "https://h.example:99999/"}}},
            ("spec.sink.webhook.url", "FieldValueInvalid", "must be an absolute http or https URL"),
        ),
        (
            {"sink": {"webhook": {"url": "https://[::1/"}}},
            ("spec.sink.webhook.url", "FieldValueInvalid", "must be an absolute http or https URL"),
        ),
        (
            {"sink": {"otlp": {"endpoint": "http://otel:4317", "protocol": "http/json"}}},
            ("spec.sink.otlp.protocol", "FieldValueNotSupported", '"grpc", "http/protobuf"'),
        ),
        (
            {"sink": {"otlp": {"endpoint": "http://otel:4317/v1", "protocol": "grpc"}}},
            ("spec.sink.otlp.endpoint", "FieldValueInvalid", "must have no path for the grpc protocol"),
        ),
        (
            {"sink": {"otlp": {"endpoint": "https://otel:4318/?q=1"}}},
            ("spec.sink.otlp.endpoint", "FieldValueInvalid", "must have no query or fragment"),
        ),
        (
            {"sink": {"otlp": {"endpoint": "otel:4317"}}},
            ("spec.sink.otlp.endpoint", "FieldValueInvalid", "must be an absolute http or https URL"),
        ),
        (
            {"sink": {"otlp": {"endpoint": "https://otel:4318", "headersFrom": {"name": "Bad_Name"}}}},
            ("spec.sink.otlp.headersFrom.name", "FieldValueInvalid", "RFC 1123"),
        ),
        (
            {"sink": {"otlp": {"endpoint": "https://otel:4318"}, "jsonLines": {"path": "-"}}},
            ("spec.sink", "FieldValueInvalid", "exactly one sink must be given"),
        ),
        (
            {"sink": {"kafka": {"topic": "events"}}},
            ("spec.sink.kafka.brokers", "FieldValueRequired", ""),
        ),
        (
            {"sink": {"kafka": {"brokers": ["kafka-0"], "topic": "events"}}},
            ("spec.sink.kafka.brokers[0]", "FieldValueInvalid", "must be host:port"),
        ),
        (
            {"sink": {"kafka": {"brokers": ["kafka-0:\u00b2"], "topic": "events"}}},  # a superscript digit
            ("spec.sink.kafka.brokers[0]", "FieldValueInvalid", "must be host:port"),
        ),
        (
            {"sink": {"kafka": {"brokers": ["kafka-0:9092"], "topic": "k8s events"}}},
            ("spec.sink.kafka.topic", "FieldValueInvalid", "must be 1 to 249 letters"),
        ),
        (
            {"sink": {"kafka": {"brokers": ["kafka-0:9092"], "topic": ".."}}},
            ("spec.sink.kafka.topic", "FieldValueInvalid", "and not . or .."),
        ),
        (
            {"sink": {"kafka": {"brokers": ["kafka-0:9092"], "topic": "e", "caBundle": "PEM"}}},
            ("spec.sink.kafka.caBundle", "FieldValueForbidden", "only with tls: true"),
        ),
        (
            {"sink": {"kafka": {"brokers": ["k:9092"], "topic": "e", "saslFrom": {"name": "A"}}}},
            ("spec.sink.kafka.saslFrom.name", "FieldValueInvalid", "RFC 1123"),
        ),
        (
            {"sink": {"loki": {"url": "loki:3100"}}},
            ("spec.sink.loki.url", "FieldValueInvalid", "must be an absolute http or https URL"),
        ),
        (
            {"sink": {"loki": {"url": "http://loki:3100", "tenant": "team a"}}},
            ("spec.sink.loki.tenant", "FieldValueInvalid", "must be 1 to 150 letters"),
        ),
        (
            {"sink": {"jsonLines": {"path": "-", "maxSizeMiB": 10}}},
            ("spec.sink.jsonLines.maxSizeMiB", "FieldValueForbidden", "standard output is not rotated"),
        ),
    ],
)
def test_each_mistake_is_named_by_its_path(spec: dict[str, Any], expected: tuple[str, str, str]) -> None:
    found = errors(export(**spec))
    assert len(found) == 1, found
    (path, kind, detail) = found[0]
    assert (path, kind) == expected[:2]
    assert expected[2] in detail, detail


def test_a_pattern_too_deep_or_too_large_is_no_crash() -> None:
    deep = "(" * 3000 + "a" + ")" * 3000
    for pattern in (deep, "a{4294967296}", "x{1001}"):
        errors(export(match=[{"note": pattern}]))  # refused or taken, never an exception
    assert errors(export(match=[{"note": "x{1001}"}]))[0][2].endswith("invalid repeat count: `{1001}`")


def test_otlp_defaults_to_http_protobuf_and_its_secret_is_a_right_its_author_needs() -> None:
    body = export(sink={"otlp": {"endpoint": "https://otel.example:4318", "headersFrom": {"name": "otel"}}})
    assert decoded(body)["spec"]["sink"]["otlp"]["protocol"] == "http/protobuf"
    assert errors(body) == []
    grpc = export(sink={"otlp": {"endpoint": "http://otel.example:4317/", "protocol": "grpc"}})
    assert errors(grpc) == []
    assert secrets_read(decoded(body)) == ["otel"]
    assert sink_name(decoded(body)) == "otlp"
    kafka = export(sink={"kafka": {"brokers": ["k:9092"], "topic": "e", "saslFrom": {"name": "sasl"}}})
    assert errors(kafka) == []
    assert (secrets_read(decoded(kafka)), sink_name(decoded(kafka))) == (["sasl"], "kafka")
    loki = export(
        sink={"loki": {"url": "https://logs.example/base", "tenant": "team-a", "headersFrom": {"name": "l"}}}
    )
    assert errors(loki) == []
    assert (secrets_read(decoded(loki)), sink_name(decoded(loki))) == (["l"], "loki")


def test_a_webhook_url_is_required_and_the_sink_too() -> None:
    body = export()
    del body["spec"]["sink"]["webhook"]["url"]
    assert [e[:2] for e in errors(body)] == [("spec.sink.webhook.url", "FieldValueRequired")]


def test_the_status_is_the_exporters_and_a_spec_change_is_a_new_generation() -> None:
    created = decoded(export())
    created["status"] = {"position": "99"}
    KIND.prepare_for_create(created)
    assert "status" not in created and created["metadata"]["generation"] == 1
    stored = {**created, "status": {"position": "12", "counts": {"sent": 3}}}
    stored["metadata"] = created["metadata"] | {"resourceVersion": "7"}
    same = decoded(export())
    same["metadata"]["generation"] = 1
    same["status"] = {"position": "1000"}  # a write of the object does not move the position
    strategy.prepare_update(KIND, same, stored)
    assert same["status"] == {"position": "12", "counts": {"sent": 3}}
    assert same["metadata"]["generation"] == 1
    changed = decoded(export(maxLag="2h"))
    changed["metadata"]["generation"] = 1
    strategy.prepare_update(KIND, changed, stored)
    assert changed["metadata"]["generation"] == 2


def test_the_row_shows_sink_position_lag_and_ready() -> None:
    obj = decoded(export())
    obj["metadata"]["creationTimestamp"] = "2026-11-27T11:00:00Z"
    assert KIND.table_row(obj, NOW) == ["to-hook", "webhook", "<none>", "<none>", "<none>", "60m"]
    obj["status"] = {
        "position": "4711",
        "lag": {"seconds": 90},
        "conditions": [{"type": "Lagging", "status": "False"}, {"type": "Ready", "status": "True"}],
    }
    assert KIND.table_row(obj, NOW)[1:5] == ["webhook", "4711", "90s", "True"]
    assert [column.name for column in KIND.table_columns] == [
        "Name",
        "Sink",
        "Position",
        "Lag",
        "Ready",
        "Age",
    ]


class FakeChecks:
    """ServerChecks whose authorizer allows exactly the rights listed (a fake, for unit tests)."""

    def __init__(self, allowed: set[tuple[str, str, str, str, str]]) -> None:
        self.allowed = allowed
        self.asked: list[tuple[str, str, str, str, str]] = []

    @property
    def escalation_check(self) -> Admission:
        raise AssertionError("not asked")

    async def allows(
        self, user: UserInfo, verb: str, group: str, resource: str, namespace: str, name: str = ""
    ) -> bool:
        self.asked.append((verb, group, resource, namespace, name))
        return (verb, group, resource, namespace, name) in self.allowed


READ_SHOP = {
    ("list", "events.core.io", "events", "shop", ""),
    ("watch", "events.core.io", "events", "shop", ""),
}
ADA = UserInfo(name="ada", groups=())


async def admit(checks: FakeChecks, body: dict[str, Any]) -> StatusError | None:
    guard = KIND.admission(checks)
    assert guard is not None
    try:
        await guard(ADA, "shop", decoded(body), None)
    except StatusError as error:
        return error
    return None


async def test_the_author_must_read_the_events_it_exports() -> None:
    assert await admit(FakeChecks(READ_SHOP), export()) is None
    refused = await admit(FakeChecks(READ_SHOP), export(namespaces=["*"]))
    assert refused is not None and refused.code == 403
    assert refused.message == (
        'eventexports.events.core.io "to-hook" is forbidden: user "ada" cannot list events cluster-wide,'
        " which it would export"
    )
    other = await admit(FakeChecks(READ_SHOP), export(namespaces=["shop", "bank"]))
    assert other is not None and 'cannot list events in the namespace "bank"' in other.message


async def test_a_write_that_leaves_the_spec_as_it_was_asks_nothing() -> None:
    body = decoded(export(namespaces=["*"]))
    checks = FakeChecks(set())
    guard = KIND.admission(checks)
    assert guard is not None
    relabelled = copy.deepcopy(body)
    relabelled["metadata"]["labels"] = {"team": "a"}
    await guard(ADA, "shop", relabelled, body)  # a controller removing a finalizer, say
    assert checks.asked == []
    with pytest.raises(StatusError):
        await guard(ADA, "shop", decoded(export(namespaces=["*"], maxLag="2h")), body)


async def test_the_author_must_read_the_secret_its_sink_reads() -> None:
    body = export(sink={"webhook": {"url": "https://h.example", "headersFrom": {"name": "token"}}})
    refused = await admit(FakeChecks(READ_SHOP), body)
    assert refused is not None and refused.code == 403
    assert refused.message.endswith('user "ada" cannot get the secret "token", which its sink reads')
    checks = FakeChecks(READ_SHOP | {("get", "", "secrets", "shop", "token")})
    assert await admit(checks, body) is None
    assert checks.asked[-1] == ("get", "", "secrets", "shop", "token")


# --- --runtime-config ---------------------------------------------------------------------------


def served(text: str) -> list[str]:
    return [kind.api_version for kind in runtime_config.enabled_kinds((*SERVABLE_KINDS, GadgetKind()), text)]


def test_alpha_versions_are_off_unless_enabled() -> None:
    ga = ["rbac.authorization.core.io/v1", "events.core.io/v1"]
    assert served("") == ga
    assert served("events.core.io/v1alpha1=true") == [*ga, "events.core.io/v1alpha1"]
    assert served("events.core.io/v1alpha1") == [*ga, "events.core.io/v1alpha1"]  # a key alone: true
    assert served("events.core.io/v1alpha1=t") == [*ga, "events.core.io/v1alpha1"]  # Go's ParseBool
    assert served("api/alpha=true") == [*ga, "events.core.io/v1alpha1", "gadgets.example.com/v1alpha1"]
    assert served("api/alpha=true,gadgets.example.com/v1alpha1=false") == [*ga, "events.core.io/v1alpha1"]
    assert served("api/all=true,api/alpha=false") == ga
    assert [kind.api_version for kind in KINDS] == ga
    assert [runtime_config.stability(v) for v in ("v1", "v2beta3", "v1alpha1", "v1rc1")] == [
        "ga",
        "beta",
        "alpha",
        "",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("apps/v1=true", "group version apps/v1 that has not been registered"),
        ("events.core.io/v1alpha1=yes", "invalid value events.core.io/v1alpha1=yes"),
        ("api/alpha", "invalid value api/alpha="),  # an api/ key takes true or false, given
        ("api/all=1", "invalid value api/all=1"),
        (
            "api/all=false,events.core.io/v1alpha1=true",
            "cannot disable events.core.io/v1, rbac.authorization.core.io/v1: coreio always serves its GA"
            " versions",
        ),
    ],
)
def test_a_wrong_runtime_config_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        runtime_config.enabled_kinds(SERVABLE_KINDS, text)
    assert str(raised.value) == message


def test_each_write_changes_only_what_its_subresource_may() -> None:
    """Applied before fields are tracked and again after mutating admission (a webhook may not
    change the spec through /status, nor the status through the object)."""
    old = decoded(export()) | {"status": {"position": "12"}}
    old["metadata"] |= {"labels": {"a": "b"}, "resourceVersion": "5", "managedFields": [{"manager": "m"}]}
    through_status = decoded(export(maxLag="9h")) | {"status": {"position": "13"}}
    through_status["metadata"] |= {"labels": {"a": "c"}, "resourceVersion": "4", "managedFields": []}
    KIND.keep_to_subresource(through_status, old, "status")
    assert through_status["status"] == {"position": "13"}
    assert (through_status["spec"]["maxLag"], through_status["metadata"]["labels"]) == ("1h", {"a": "b"})
    # The request's own resourceVersion (a precondition) and managedFields stay the request's.
    assert (through_status["metadata"]["resourceVersion"], through_status["metadata"]["managedFields"]) == (
        "4",
        [],
    )
    of_object = decoded(export(maxLag="9h")) | {"status": {"position": "99"}}
    KIND.keep_to_subresource(of_object, old, "")
    assert (of_object["status"], of_object["spec"]["maxLag"]) == ({"position": "12"}, "9h")


def test_runtime_config_given_twice_is_merged_the_later_value_of_a_key_winning() -> None:
    settings = cli.parse_args(
        ["--runtime-config=events.core.io/v1alpha1=true", "--runtime-config=api/beta=false"]
    )
    assert settings.runtime_config == "events.core.io/v1alpha1=true,api/beta=false"
    served = runtime_config.enabled_kinds(SERVABLE_KINDS, settings.runtime_config)
    assert "events.core.io/v1alpha1" in {kind.api_version for kind in served}
    again = cli.parse_args(
        ["--runtime-config=events.core.io/v1alpha1=true", "--runtime-config=events.core.io/v1alpha1=false"]
    )
    off = runtime_config.enabled_kinds(SERVABLE_KINDS, again.runtime_config)
    assert "events.core.io/v1alpha1" not in {kind.api_version for kind in off}
