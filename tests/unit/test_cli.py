"""The command line: each flag sets its Settings field and nothing else, the served kinds add
their own flags, and a mistake is one clear line."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from apiserver.cli import FLAGS, parse_args
from apiserver.config import Settings
from apiserver.resources import KINDS, EventKind, RoleBindingKind
from apiserver.server import storage_options
from tests.support.thirdkind import SERVED, GadgetKind

# For every flag of the table: what is typed, and what the field holds then.
GIVEN: dict[str, tuple[str, Any]] = {
    "--data-dir": ("/srv/coreio", Path("/srv/coreio")),
    "--bind-address": ("0.0.0.0", "0.0.0.0"),
    "--secure-port": ("9443", 9443),
    "--etcd-servers": (" http://a:2379 , http://b:2379,", ["http://a:2379", "http://b:2379"]),
    "--etcd-prefix": ("/coreio", "/coreio"),
    "--etcd-cafile": ("ca.pem", "ca.pem"),
    "--etcd-certfile": ("cert.pem", "cert.pem"),
    "--etcd-keyfile": ("key.pem", "key.pem"),
    "--tls-cert-file": ("tls.crt", "tls.crt"),
    "--tls-private-key-file": ("tls.key", "tls.key"),
    "--client-ca-file": ("client-ca.crt", "client-ca.crt"),
    "--token-auth-file": ("tokens.csv", "tokens.csv"),
    "--requestheader-client-ca-file": ("proxy-ca.crt", "proxy-ca.crt"),
    "--requestheader-allowed-names": ("front-proxy, aggregator", ["front-proxy", "aggregator"]),
    "--requestheader-username-headers": ("X-User,X-Remote-User", ["X-User", "X-Remote-User"]),
    "--requestheader-uid-headers": ("X-Remote-Uid", ["X-Remote-Uid"]),
    "--requestheader-group-headers": ("", []),
    "--requestheader-extra-headers-prefix": ("X-Extra-", ["X-Extra-"]),
    "--kubeconfig": ("cluster.kubeconfig", "cluster.kubeconfig"),
    "--authentication-kubeconfig": ("authn.kubeconfig", "authn.kubeconfig"),
    "--authorization-kubeconfig": ("authz.kubeconfig", "authz.kubeconfig"),
    "--authorization-mode": ("AlwaysAllow", "AlwaysAllow"),
    "--authorization-roles-file": ("roles.yaml", "roles.yaml"),
    "--admission-config-file": ("admission.yaml", "admission.yaml"),
    "--authorize-endpoint-users": ("kube-apiserver", ["kube-apiserver"]),
    "--authorize-endpoint-groups": ("a,b", ["a", "b"]),
    "--disable-admission-plugins": ("NamespaceLifecycle", ["NamespaceLifecycle"]),
    "--authentication-token-webhook-cache-ttl": ("2.5", 2.5),
    "--extension-authentication-refresh-interval": ("30", 30.0),
    "--authorization-webhook-cache-ttl": ("7", 7.0),
    "--audit-log-path": ("-", "-"),
    "--audit-policy-file": ("policy.yaml", "policy.yaml"),
    "--audit-log-maxage": ("7", 7),
    "--audit-log-maxbackup": ("3", 3),
    "--audit-log-maxsize": ("1", 1),
    "--audit-log-format": ("json", "json"),
    "--audit-webhook-config-file": ("webhook.kubeconfig", "webhook.kubeconfig"),
    "--audit-webhook-mode": ("blocking", "blocking"),
    "--audit-webhook-batch-buffer-size": ("5", 5),
    "--audit-webhook-batch-max-size": ("2", 2),
    "--audit-webhook-batch-max-wait": ("1m0s", 60.0),
    "--audit-webhook-batch-throttle-enable": ("false", False),
    "--audit-webhook-batch-throttle-qps": ("2.5", 2.5),
    "--audit-webhook-batch-throttle-burst": ("3", 3),
    "--audit-webhook-initial-backoff": ("1s", 1.0),
    "--audit-webhook-truncate-enabled": ("true", True),
    "--audit-webhook-truncate-max-batch-size": ("2048", 2048),
    "--audit-webhook-truncate-max-event-size": ("1024", 1024),
    "--audit-webhook-version": ("audit.k8s.io/v1", "audit.k8s.io/v1"),
    "--min-request-timeout": ("10", 10.0),
    "--watch-bookmark-interval": ("1.5", 1.5),
    "--max-requests-inflight": ("3", 3),
    "--max-mutating-requests-inflight": ("0", 0),
    "--request-timeout": ("1m30s", 90.0),
    "--etcd-compaction-interval": ("0", 0.0),
    "--watch-cache": ("false", False),
    "--default-watch-cache-size": ("100", 100),
    "--workers": ("3", 3),
    "--worker-hang-timeout": ("1m30s", 90.0),
    "--logging-format": ("json", "json"),
    "--etcd-count-metric-poll-period": ("1m0s", 60.0),
    "--events-metric-max-reasons": ("7", 7),
    "--events-metric-max-namespaces": ("0", 0),
    "--shutdown-delay-duration": ("5s", 5.0),
    "--shutdown-watch-termination-grace-period": ("1.5", 1.5),
    "--runtime-config": ("events.core.io/v1alpha1=true", "events.core.io/v1alpha1=true"),
}
# The fields no flag of the table sets: the kinds' flags fill this one.
KIND_SET = {"expiry_seconds"}
# The flags that take a time: each a number of seconds or a Go duration.
TIME_FLAGS = (
    "--authentication-token-webhook-cache-ttl",
    "--extension-authentication-refresh-interval",
    "--authorization-webhook-cache-ttl",
    "--min-request-timeout",
    "--watch-bookmark-interval",
    "--request-timeout",
    "--etcd-compaction-interval",
    "--etcd-count-metric-poll-period",
    "--worker-hang-timeout",
    "--shutdown-delay-duration",
    "--shutdown-watch-termination-grace-period",
    "--event-ttl",
    "--audit-webhook-batch-max-wait",
    "--audit-webhook-initial-backoff",
)
# Settings held as floats that are not times.
RATES = frozenset({"audit_webhook_batch_throttle_qps"})


def test_no_flags_keep_every_default() -> None:
    assert parse_args([]) == Settings()


@pytest.mark.parametrize("flag", FLAGS, ids=lambda flag: flag.name)
def test_each_flag_sets_its_field_and_nothing_else(flag: Any) -> None:
    typed, held = GIVEN[flag.name]
    settings = parse_args([flag.name, typed])
    assert getattr(settings, flag.dest) == held
    assert dataclasses.replace(settings, **{flag.dest: getattr(Settings(), flag.dest)}) == Settings()


def test_the_table_covers_every_setting() -> None:
    assert sorted(GIVEN) == sorted(flag.name for flag in FLAGS)
    fields = {field.name for field in dataclasses.fields(Settings)}
    assert {flag.dest for flag in FLAGS} == fields - KIND_SET


def test_the_old_names_still_work() -> None:
    """Flags renamed to kube-apiserver's names keep their former ones."""
    assert parse_args(["--compaction-interval", "9"]) == parse_args(["--etcd-compaction-interval", "9"])
    assert parse_args(["--log-format=json"]).log_format == "json"


def test_every_time_setting_has_a_time_flag() -> None:
    floats = {
        field.name
        for field in dataclasses.fields(Settings)
        if isinstance(getattr(Settings(), field.name), float) and field.name not in RATES
    }
    assert {flag.dest for flag in FLAGS if flag.name in TIME_FLAGS} == floats


def time_held(name: str, typed: str) -> float:
    """The seconds the time flag `name` holds, given `typed`."""
    settings = parse_args([name, typed])
    if name == "--event-ttl":
        return settings.ttl_seconds(EventKind())
    return float(getattr(settings, next(flag.dest for flag in FLAGS if flag.name == name)))


@pytest.mark.parametrize("name", TIME_FLAGS)
def test_each_time_flag_takes_seconds_or_a_go_duration(name: str) -> None:
    assert [time_held(name, typed) for typed in ("1m30s", "90", "1.5m", "1m29.5s500ms")] == [90.0] * 4


@pytest.mark.parametrize("name", TIME_FLAGS)
def test_a_bad_duration_is_one_line_naming_the_flag(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args([f"{name}=5 minutes"])
    assert exited.value.code == 2
    # One line naming the flag (and its old name, if it has one): no usage, no traceback.
    [message] = capsys.readouterr().err.splitlines()
    assert message.startswith(f"coreio-apiserver: error: argument {name}")
    assert message.endswith(
        ': time: unknown unit " minutes" in duration "5 minutes" (see coreio-apiserver --help)'
    )


def test_event_ttl_takes_an_hour() -> None:
    assert parse_args(["--event-ttl", "1h"]).expiry_seconds == {"events.events.core.io": 3600}


def test_an_expiring_kind_brings_its_ttl_flag() -> None:
    assert parse_args([]).ttl_seconds(EventKind()) == 3600
    assert parse_args(["--event-ttl", "7200"]).ttl_seconds(EventKind()) == 7200
    assert parse_args(["--event-ttl=60"]).expiry_seconds == {"events.events.core.io": 60}
    # A Go duration, as kube-apiserver's --event-ttl takes it (the operator's extraArgs pass it on).
    assert parse_args(["--event-ttl=2h"]).expiry_seconds == {"events.events.core.io": 7200}
    assert parse_args(["--event-ttl", "1h30m0.5s"]).ttl_seconds(EventKind()) == 5400
    # A kind that does not expire has no TTL, flag or not.
    assert parse_args(["--event-ttl", "7200"]).ttl_seconds(RoleBindingKind()) == 0


def test_a_served_kind_adds_its_flag_to_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    settings = parse_args(["--gadget-ttl", "60", "--event-ttl", "5"], kinds=SERVED)
    assert (settings.ttl_seconds(GadgetKind()), settings.ttl_seconds(EventKind())) == (60, 5)
    assert parse_args([], kinds=SERVED).ttl_seconds(GadgetKind()) == 7 * 24 * 3600
    with pytest.raises(SystemExit):
        parse_args(["--gadget-ttl", "60"], kinds=KINDS)
    assert capsys.readouterr().err.splitlines() == [
        "coreio-apiserver: error: unrecognized arguments: --gadget-ttl 60 (see coreio-apiserver --help)"
    ]


def test_help_names_the_served_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "Serves RoleBindings (rbac.authorization.core.io/v1), Events (events.core.io/v1) and EventExports"
        " (events.core.io/v1alpha1, alpha: off by default)." in out
    )
    assert "--event-ttl EVENT_TTL" in out
    assert "--authentication-token-webhook-cache-ttl AUTHENTICATION_TOKEN_WEBHOOK_CACHE_TTL" in out
    assert "--authorization-mode {RBAC,AlwaysAllow}" in out
    with pytest.raises(SystemExit):
        parse_args(["--help"], kinds=SERVED)
    out = " ".join(capsys.readouterr().out.split())
    assert "RoleBindings (rbac.authorization.core.io/v1), Events (events.core.io/v1) and Gadgets" in out


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            ["--extension-authentication-refresh-interval", "0"],
            "--extension-authentication-refresh-interval must be positive",
        ),
        (["--request-timeout", "abc"], 'argument --request-timeout: time: invalid duration "abc"'),
        (["--request-timeout=-5"], "argument --request-timeout: must not be negative: -5"),
        (
            ["--authorization-mode", "ABAC"],
            "argument --authorization-mode: invalid choice: 'ABAC' (choose from 'RBAC', 'AlwaysAllow')",
        ),
        (["--secure-port", "x"], "argument --secure-port: invalid int value: 'x'"),
        (["--event-ttl", "an hour"], 'argument --event-ttl: time: invalid duration "an hour"'),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (
            ["--watch-cache=maybe"],
            'argument --watch-cache: strconv.ParseBool: parsing "maybe": invalid syntax',
        ),
        (["--default-watch-cache-size", "0"], "--default-watch-cache-size must be positive"),
        (["--workers", "-1"], "--workers must not be negative"),
        (["--events-metric-max-reasons", "-1"], "--events-metric-max-reasons must not be negative"),
        (
            ["--disable-admission-plugins", "AlwaysPullImages"],
            "--disable-admission-plugins: only NamespaceLifecycle, MutatingAdmissionWebhook, "
            "ValidatingAdmissionPolicy, ValidatingAdmissionWebhook can be disabled",
        ),
    ],
)
def test_a_mistake_is_one_line(argv: list[str], error: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    assert exited.value.code == 2
    # One line, without argparse's usage (dozens of lines, left to --help).
    assert capsys.readouterr().err.splitlines() == [
        f"coreio-apiserver: error: {error} (see coreio-apiserver --help)"
    ]


def test_storage_options() -> None:
    sqlite = storage_options(parse_args(["--data-dir", "/d", "--watch-bookmark-interval", "2"]))
    assert (sqlite.sqlite_path, sqlite.etcd_servers, sqlite.progress_interval) == (
        Path("/d/coreio.db"),
        (),
        2.0,
    )
    etcd = storage_options(
        parse_args(["--etcd-servers", "http://e:2379", "--etcd-cafile", "ca", "--compaction-interval", "9"])
    )
    assert (etcd.etcd_servers, etcd.etcd_ca_file, etcd.compaction_interval) == (("http://e:2379",), "ca", 9.0)
    # Bookmarks ride on progress notices, which come at least every 5 seconds.
    assert etcd.progress_interval == 5.0


def test_the_watch_cache_covers_every_served_kind_unless_turned_off() -> None:
    cached = storage_options(parse_args(["--default-watch-cache-size", "50"]), KINDS)
    assert cached.cache_roots == (
        "/registry/rbac.authorization.core.io/rolebindings/",
        "/registry/events.core.io/events/",
    )
    assert cached.watch_cache_size == 50
    for off in ("--watch-cache=false", "--watch-cache=0", "--watch-cache=F"):
        assert storage_options(parse_args([off]), KINDS).cache_roots == ()
    assert storage_options(parse_args(["--watch-cache=true"]), KINDS).cache_roots


def test_workers_share_the_sqlite_file_only_when_there_are_several() -> None:
    assert not storage_options(parse_args(["--workers", "1"])).sqlite_shared
    assert storage_options(parse_args(["--workers", "2"])).sqlite_shared
