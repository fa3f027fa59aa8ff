"""`coreio-apiserver`: flags -> Settings, handed to the run loop (`apiserver.server`).

The flags are a table: each names the Settings field it sets (by default its own name, dashes as
underscores), how its value is read, and its help. A flag not given leaves the field's default.
The served kinds add their own (an expiring kind's TTL, as `--event-ttl`).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apiserver import logs, server, supervisor
from apiserver.config import NAMESPACE_LIFECYCLE, Settings
from apiserver.http.limits import QuietMalformedRequests
from apiserver.machinery.gofmt import parse_go_duration
from apiserver.resources import KINDS
from apiserver.resources.base import ResourceKind

PROG = "coreio-apiserver"
# Where the served kinds' TTL flags land in the parsed arguments, before they join the Settings.
_EXPIRY_DEST = "expiry:"


def _comma_list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _duration(value: str) -> float:
    """Seconds: a number, or a Go duration as kube-apiserver's flag takes it (`1m0s`)."""
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parse_go_duration(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {value}")
    return seconds


_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def _bool(value: str) -> bool:
    """A boolean as Go's strconv.ParseBool reads one (kube-apiserver's `--watch-cache=false`)."""
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f'strconv.ParseBool: parsing "{value}": invalid syntax')


def _whole_seconds(value: str) -> int:
    """A storage TTL: whole seconds (etcd leases count no less), given as for `_duration`."""
    return int(_duration(value))


@dataclass(frozen=True)
class Flag:
    """One command-line flag: its name, help and value parser, and the Settings field it sets."""

    name: str
    help: str = ""
    parse: Callable[[str], Any] = str
    # The Settings field; empty: the flag's name, its dashes made underscores.
    setting: str = ""
    choices: tuple[str, ...] = ()
    # A rule the value must keep, and the error line when it does not.
    check: Callable[[Any], bool] | None = None
    check_error: str = ""

    @property
    def metavar(self) -> str:
        return self.name.removeprefix("--").replace("-", "_").upper()

    @property
    def dest(self) -> str:
        return self.setting or self.metavar.lower()


_REQUESTHEADER_CA_HELP = (
    "CA of the front proxy (the aggregator): only a client certificate it issued may assert a user in"
    " the --requestheader-*-headers"
)
_REFRESH_HELP = (
    "seconds between re-reads of kube-system/extension-apiserver-authentication (CAs, front-proxy"
    " header and allowed names), when they come from the cluster"
)
_REQUEST_TIMEOUT_HELP = (
    "seconds (or a Go duration, 1m0s) before a request other than a watch is answered 504; idle or"
    " slow connections and stalled watches are closed after it too (0: no limit)"
)
_SHUTDOWN_DELAY_HELP = (
    "at SIGTERM, how long (seconds or a Go duration) the server keeps serving with /readyz failing,"
    " so that load balancers stop sending it requests, before it stops listening (default 0)"
)
_WATCH_GRACE_HELP = (
    "then, over how long (at most) the open watches are ended, so that their clients do not all come"
    " back at once (default 0: all at once); requests in flight get --request-timeout to finish"
)

FLAGS = (
    Flag("--data-dir", "where SQLite data and credentials live", Path),
    Flag("--bind-address", "address to serve HTTPS on"),
    Flag("--secure-port", "port to serve HTTPS on", int),
    Flag(
        "--etcd-servers", "comma-separated etcd endpoints; storage switches from SQLite to etcd", _comma_list
    ),
    Flag("--etcd-prefix", "key prefix in etcd (default: none, keys start /registry)"),
    Flag("--etcd-cafile"),
    Flag("--etcd-certfile"),
    Flag("--etcd-keyfile"),
    Flag("--tls-cert-file", "serving certificate (default: created in the data dir)"),
    Flag("--tls-private-key-file"),
    Flag("--client-ca-file", "CA that client certificates must chain to"),
    Flag("--token-auth-file", "static bearer tokens, kube-apiserver's CSV format"),
    Flag("--requestheader-client-ca-file", _REQUESTHEADER_CA_HELP),
    Flag(
        "--requestheader-allowed-names",
        "comma-separated CNs of front-proxy client certificates allowed (default: any of that CA)",
        _comma_list,
    ),
    Flag("--requestheader-username-headers", parse=_comma_list),
    Flag("--requestheader-uid-headers", "e.g. X-Remote-Uid (default: UIDs not read)", _comma_list),
    Flag("--requestheader-group-headers", parse=_comma_list),
    Flag("--requestheader-extra-headers-prefix", parse=_comma_list),
    Flag("--kubeconfig", "kubeconfig of the cluster to delegate to (both authentication and authorization)"),
    Flag(
        "--authentication-kubeconfig",
        "kubeconfig for TokenReviews and kube-system/extension-apiserver-authentication"
        " (CAs and header names not given as flags are read from it)",
    ),
    Flag("--authorization-kubeconfig", "kubeconfig for SubjectAccessReviews"),
    Flag(
        "--authorization-mode",
        "RBAC over the stored RoleBindings (default), or allow every authenticated request",
        choices=("RBAC", "AlwaysAllow"),
    ),
    Flag(
        "--authorization-roles-file",
        "standalone: Roles and ClusterRoles (YAML or JSON) besides the default ClusterRoles",
    ),
    Flag("--authorize-endpoint-users", "comma-separated users who may call /authorize", _comma_list),
    Flag("--authorize-endpoint-groups", "comma-separated groups who may call /authorize", _comma_list),
    Flag(
        "--disable-admission-plugins",
        "admission plugins that should be disabled (in a cluster: NamespaceLifecycle)",
        _comma_list,
        check=lambda names: set(names) <= {NAMESPACE_LIFECYCLE},
        check_error=f"--disable-admission-plugins: only {NAMESPACE_LIFECYCLE} can be disabled",
    ),
    Flag("--authentication-token-webhook-cache-ttl", parse=float, setting="authentication_cache_ttl"),
    Flag(
        "--extension-authentication-refresh-interval",
        _REFRESH_HELP,
        float,
        check=lambda seconds: seconds > 0,
        check_error="--extension-authentication-refresh-interval must be positive",
    ),
    Flag("--authorization-webhook-cache-ttl", parse=float, setting="authorization_cache_ttl"),
    Flag(
        "--audit-log-path",
        "write one audit.k8s.io/v1 Event (level Metadata) per request as a JSON line; - for stdout",
    ),
    Flag("--min-request-timeout", parse=float),
    Flag("--watch-bookmark-interval", parse=float),
    Flag(
        "--max-requests-inflight",
        "most read-only requests served at once, watches aside (0: no limit); more get 429",
        int,
    ),
    Flag(
        "--max-mutating-requests-inflight",
        "most mutating requests served at once (0: no limit); more get 429",
        int,
    ),
    Flag("--request-timeout", _REQUEST_TIMEOUT_HELP, _duration),
    Flag("--compaction-interval", "seconds between compactions (0: never)", float),
    Flag("--watch-cache", "serve lists and watches from a cache of each resource in memory", _bool),
    Flag(
        "--default-watch-cache-size",
        "how many recent changes each resource's watch cache keeps for watches to start from",
        int,
        check=lambda size: size > 0,
        check_error="--default-watch-cache-size must be positive",
    ),
    Flag(
        "--workers",
        "worker processes serving the port, each with its own watch cache (0: one per core)",
        int,
        check=lambda count: count >= 0,
        check_error="--workers must not be negative",
    ),
    Flag("--log-format", "log lines as text, or as one JSON object each", choices=("text", "json")),
    Flag(
        "--etcd-count-metric-poll-period",
        "how often (seconds, or a Go duration) the stored objects of each resource are counted for"
        " apiserver_storage_objects (0: never)",
        _duration,
    ),
    Flag("--shutdown-delay-duration", _SHUTDOWN_DELAY_HELP, _duration),
    Flag("--shutdown-watch-termination-grace-period", _WATCH_GRACE_HELP, _duration),
)


def kind_flags(kinds: Sequence[ResourceKind]) -> list[Flag]:
    """The flags the served kinds declare: how long an expiring kind's objects live."""
    return [
        Flag(
            kind.expiry.flag, kind.expiry.help, _whole_seconds, setting=f"{_EXPIRY_DEST}{kind.group_resource}"
        )
        for kind in kinds
        if kind.expiry is not None
    ]


def _describe(kinds: Sequence[ResourceKind]) -> str:
    served = [f"{kind.kind}s ({kind.api_version})" for kind in kinds]
    listed = (", ".join(served[:-1]) + " and " + served[-1]) if len(served) > 1 else "".join(served)
    return f"Serves {listed}."


def parse_args(argv: Sequence[str] | None = None, kinds: Sequence[ResourceKind] = KINDS) -> Settings:
    """Settings from the command line; a mistake ends the process with a usage line and one error."""
    flags = [*FLAGS, *kind_flags(kinds)]
    # Flags not given are left out, so that they keep the Settings' defaults.
    parser = argparse.ArgumentParser(
        prog=PROG, description=_describe(kinds), argument_default=argparse.SUPPRESS
    )
    for flag in flags:
        parser.add_argument(
            flag.name,
            dest=flag.dest,
            type=flag.parse,
            help=flag.help,
            # Named as argparse names them, or listing the choices.
            metavar=None if flag.choices else flag.metavar,
            choices=flag.choices or None,
        )
    given = vars(parser.parse_args(argv))
    for flag in flags:
        if flag.check is not None and flag.dest in given and not flag.check(given[flag.dest]):
            parser.error(flag.check_error)
    expiry = {
        dest.removeprefix(_EXPIRY_DEST): given.pop(dest)
        for dest in list(given)
        if dest.startswith(_EXPIRY_DEST)
    }
    return Settings(**given, expiry_seconds=expiry)


def main(argv: Sequence[str] | None = None, kinds: Sequence[ResourceKind] = KINDS) -> None:
    """The console script: serves `kinds` (a program serving more kinds passes its own list)."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    logging.getLogger("aiohttp.server").addFilter(QuietMalformedRequests())
    settings = parse_args(argv, kinds)
    logs.configure(settings.log_format)
    try:
        supervisor.run(settings, kinds)
    except server.StartError as exc:
        # One line and status 1, as kube-apiserver ends when it cannot start.
        sys.exit(f"{PROG}: error: {exc}")
