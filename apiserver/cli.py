"""`coreio-apiserver`: flags -> Settings, handed to the run loop (`apiserver.server`).

The flags are a table: each names the Settings field it sets (by default its own name, dashes as
underscores), how its value is read, and its help; --help adds the field's default. A flag not
given leaves the field's default. Where kube-apiserver has a flag of the same meaning, this one
takes its name (a former name stays as an alias).
The served kinds add their own (an expiring kind's TTL, as `--event-ttl`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from apiserver import __version__, logs, server, supervisor
from apiserver.config import ADMISSION_PLUGINS, Settings
from apiserver.http.limits import QuietMalformedRequests
from apiserver.machinery import memory
from apiserver.machinery.gofmt import parse_go_duration
from apiserver.resources import SERVABLE_KINDS, runtime_config
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


def _seconds(value: str) -> float:
    """A time kube-apiserver takes as a number of seconds (`--min-request-timeout`): read as for
    `_duration`, and its default shown as a number."""
    return _duration(value)


# The parsers whose defaults --help shows as Go durations (`1h0m0s`), as kube-apiserver does.
_GO_DURATIONS: frozenset[Callable[[str], Any]] = frozenset({_duration, _whole_seconds})


def go_duration(seconds: float) -> str:
    """Go's time.Duration.String() of `seconds` (`1h0m0s`, `1m30s`, `10s`, `500ms`, `0s`)."""
    if 0 < seconds < 1:
        return f"{seconds * 1000:g}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{secs:g}s"
    if hours or minutes:
        text = f"{minutes:.0f}m{text}"
    return f"{hours:.0f}h{text}" if hours else text


@dataclass(frozen=True)
class Flag:
    """One command-line flag: its name (and older ones still read), help and value parser, and the
    Settings field it sets, whose default --help shows."""

    name: str
    help: str
    parse: Callable[[str], Any] = str
    # The Settings field; empty: the flag's name, its dashes made underscores.
    setting: str = ""
    choices: tuple[str, ...] = ()
    # A rule the value must keep, and the error line when it does not.
    check: Callable[[Any], bool] | None = None
    check_error: str = ""
    # Other names of the flag (this server's own, from before it took kube-apiserver's name).
    aliases: tuple[str, ...] = ()
    # Given more than once, the values are joined with commas (a map flag, as upstream's
    # ConfigurationMap: of one key, the later value wins); else the last one is taken.
    joined: bool = False
    # The default --help shows when the flag sets no Settings field of its own (a kind's TTL).
    default: Any = None

    @property
    def metavar(self) -> str:
        return self.name.removeprefix("--").replace("-", "_").upper()

    @property
    def dest(self) -> str:
        return self.setting or self.metavar.lower()

    def shown_default(self, settings: Settings) -> str:
        """The default as --help shows it: lists comma-joined, times as Go durations (or seconds,
        as kube-apiserver shows them), booleans as Go's; empty when there is none."""
        value = self.default if self.default is not None else getattr(settings, self.dest)
        if value is None or value == "" or value == []:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, list):
            return ",".join(value)
        if self.parse in _GO_DURATIONS:
            return go_duration(value)
        return f"{value:g}" if isinstance(value, float) else str(value)

    def help_line(self, settings: Settings) -> str:
        """The help with the default (argparse %-formats it: a `%` is doubled)."""
        shown = self.shown_default(settings)
        text = f"{self.help} (default: {shown})" if shown else self.help
        return text.replace("%", "%%")


_TLS_CERT_HELP = (
    "file containing the x509 certificate for HTTPS (CA cert, if any, concatenated after the server"
    " cert); if not given, the server stands alone and creates its own in --data-dir"
)
_REQUESTHEADER_CA_HELP = (
    "CA of the front proxy (the aggregator): only a client certificate it issued may assert a user in"
    " the --requestheader-*-headers"
)
_ALLOWED_NAMES_HELP = (
    "list of client certificate common names allowed to assert a user in the --requestheader-*-headers;"
    " if empty, any certificate issued by --requestheader-client-ca-file is allowed"
)
_REFRESH_HELP = (
    "how often (seconds, or a Go duration) kube-system/extension-apiserver-authentication is re-read"
    " (CAs, front-proxy header and allowed names), when they come from the cluster"
)
_MIN_REQUEST_TIMEOUT_HELP = (
    "the minimum number of seconds a handler must keep a request open before timing it out: watches"
    " without timeoutSeconds end after a random time between it and twice it"
)
_REQUEST_TIMEOUT_HELP = (
    "seconds (or a Go duration, 1m0s) before a request other than a watch is answered 504; idle or"
    " slow connections and stalled watches are closed after it too (0: no limit)"
)
_SHUTDOWN_DELAY_HELP = (
    "at SIGTERM, how long (seconds or a Go duration) the server keeps serving with /readyz failing,"
    " so that load balancers stop sending it requests, before it stops listening"
)
_WATCH_GRACE_HELP = (
    "then, over how long (at most) the open watches are ended, so that their clients do not all come"
    " back at once (0: all at once); requests in flight get --request-timeout to finish"
)

FLAGS = (
    Flag(
        "--data-dir",
        "directory of the SQLite data and of the credentials the server creates or keeps",
        Path,
    ),
    Flag("--bind-address", "the IP address on which to listen for the --secure-port port"),
    Flag("--secure-port", "the port on which to serve HTTPS with authentication and authorization", int),
    Flag(
        "--etcd-servers",
        "list of etcd servers to connect with (scheme://ip:port), comma separated; if none, the data is"
        " kept in SQLite in --data-dir",
        _comma_list,
    ),
    Flag("--etcd-prefix", "the prefix to prepend to every etcd key (keys start /registry after it)"),
    Flag("--etcd-cafile", "SSL Certificate Authority file used to secure etcd communication"),
    Flag("--etcd-certfile", "SSL certification file used to secure etcd communication"),
    Flag("--etcd-keyfile", "SSL key file used to secure etcd communication"),
    Flag("--tls-cert-file", _TLS_CERT_HELP),
    Flag("--tls-private-key-file", "file containing the x509 private key matching --tls-cert-file"),
    Flag(
        "--client-ca-file",
        "client certificates issued by a CA in this file authenticate as their CommonName",
    ),
    Flag("--token-auth-file", "file of static bearer tokens, in kube-apiserver's CSV format"),
    Flag("--requestheader-client-ca-file", _REQUESTHEADER_CA_HELP),
    Flag("--requestheader-allowed-names", _ALLOWED_NAMES_HELP, _comma_list),
    Flag("--requestheader-username-headers", "list of request headers to inspect for usernames", _comma_list),
    Flag(
        "--requestheader-uid-headers",
        "list of request headers to inspect for UIDs, X-Remote-Uid is suggested; if empty, none is read",
        _comma_list,
    ),
    Flag("--requestheader-group-headers", "list of request headers to inspect for groups", _comma_list),
    Flag(
        "--requestheader-extra-headers-prefix",
        "list of request header prefixes to inspect for the user's extra attributes",
        _comma_list,
    ),
    Flag(
        "--kubeconfig",
        "kubeconfig of the cluster to delegate to, for authentication and authorization both (where"
        " --authentication-kubeconfig or --authorization-kubeconfig is not given)",
    ),
    Flag(
        "--authentication-kubeconfig",
        "kubeconfig for TokenReviews and kube-system/extension-apiserver-authentication"
        " (CAs and header names not given as flags are read from it)",
    ),
    Flag("--authorization-kubeconfig", "kubeconfig for SubjectAccessReviews"),
    Flag(
        "--authorization-mode",
        "RBAC over the stored RoleBindings, or allow every authenticated request",
        choices=("RBAC", "AlwaysAllow"),
    ),
    Flag(
        "--authorization-roles-file",
        "standalone: Roles and ClusterRoles (YAML or JSON) besides the default ClusterRoles",
    ),
    Flag(
        "--authorize-endpoint-users",
        "comma-separated users who may call /authorize, besides system:masters",
        _comma_list,
    ),
    Flag(
        "--authorize-endpoint-groups",
        "comma-separated groups who may call /authorize, besides system:masters",
        _comma_list,
    ),
    Flag(
        "--disable-admission-plugins",
        f"admission plugins that should be disabled: {', '.join(ADMISSION_PLUGINS)}",
        _comma_list,
        check=lambda names: set(names) <= set(ADMISSION_PLUGINS),
        check_error=f"--disable-admission-plugins: only {', '.join(ADMISSION_PLUGINS)} can be disabled",
    ),
    Flag(
        "--admission-config-file",
        "ValidatingAdmissionPolicies, their bindings and params, and admission webhook "
        "configurations (YAML or JSON) to apply instead of the cluster's",
    ),
    Flag(
        "--authentication-token-webhook-cache-ttl",
        "the duration to cache responses from the TokenReview (webhook token) authenticator",
        _duration,
        setting="authentication_cache_ttl",
    ),
    Flag(
        "--extension-authentication-refresh-interval",
        _REFRESH_HELP,
        _duration,
        check=lambda seconds: seconds > 0,
        check_error="--extension-authentication-refresh-interval must be positive",
    ),
    Flag(
        "--authorization-webhook-cache-ttl",
        "the duration to cache both 'authorized' and 'unauthorized' SubjectAccessReview responses",
        _duration,
        setting="authorization_cache_ttl",
    ),
    Flag(
        "--audit-log-path",
        "if set, requests are logged to this file as audit.k8s.io/v1 Events, one JSON line each;"
        " - means standard out",
    ),
    Flag(
        "--audit-policy-file",
        "path to the file that defines the audit policy configuration (audit.k8s.io/v1 Policy); without"
        " it, --audit-log-path logs every request at level Metadata when it completes",
    ),
    Flag(
        "--audit-log-maxage",
        "the maximum number of days to retain old audit log files based on the timestamp encoded in"
        " their filename",
        int,
        check=lambda days: days >= 0,
        check_error="--audit-log-maxage can't be a negative number",
    ),
    Flag(
        "--audit-log-maxbackup",
        "the maximum number of old audit log files to retain (0: no restriction)",
        int,
        check=lambda count: count >= 0,
        check_error="--audit-log-maxbackup can't be a negative number",
    ),
    Flag(
        "--audit-log-maxsize",
        "the maximum size in megabytes of the audit log file before it gets rotated (0: 100)",
        int,
        check=lambda size: size >= 0,
        check_error="--audit-log-maxsize can't be a negative number",
    ),
    Flag("--audit-log-format", "format of saved audits: structured JSON", choices=("json",)),
    # The audit webhook: values checked as upstream checks them, at start (see audit.webhook.backend).
    Flag(
        "--audit-webhook-config-file",
        "path to a kubeconfig formatted file that defines the audit webhook configuration",
    ),
    Flag(
        "--audit-webhook-mode",
        "strategy for sending audit events: blocking makes the answer wait for the webhook, batch buffers"
        " and sends asynchronously, blocking-strict also refuses a request whose first event fails",
        choices=("batch", "blocking", "blocking-strict"),
    ),
    Flag(
        "--audit-webhook-batch-buffer-size",
        "events buffered before batching (batch mode; more are dropped)",
        int,
    ),
    Flag("--audit-webhook-batch-max-size", "the maximum size of a batch (batch mode)", int),
    Flag(
        "--audit-webhook-batch-max-wait",
        "how long to wait before sending a batch that is not full (batch mode)",
        _duration,
    ),
    Flag("--audit-webhook-batch-throttle-enable", "whether batches are throttled (batch mode)", _bool),
    Flag("--audit-webhook-batch-throttle-qps", "the most batches a second, on average (batch mode)", float),
    Flag(
        "--audit-webhook-batch-throttle-burst",
        "the most batches at once if the QPS was not used before (batch mode)",
        int,
    ),
    Flag(
        "--audit-webhook-initial-backoff",
        "the amount of time to wait before retrying the first failed request",
        _duration,
        aliases=("--audit-webhook-batch-initial-backoff",),
    ),
    Flag("--audit-webhook-truncate-enabled", "whether event and batch truncating is enabled", _bool),
    Flag(
        "--audit-webhook-truncate-max-batch-size",
        "the largest batch sent, in bytes; larger ones are split",
        int,
    ),
    Flag(
        "--audit-webhook-truncate-max-event-size",
        "the largest event sent, in bytes; a larger one loses its request and response bodies, then is"
        " dropped",
        int,
    ),
    Flag("--audit-webhook-version", "API group and version of the events sent", choices=("audit.k8s.io/v1",)),
    Flag("--min-request-timeout", _MIN_REQUEST_TIMEOUT_HELP, _seconds),
    Flag(
        "--watch-bookmark-interval",
        "the interval of the storage's progress notices, which watch bookmarks ride on (capped at 5s)",
        _duration,
    ),
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
    Flag(
        "--etcd-compaction-interval",
        "the interval of compactions of the stored history, in etcd or SQLite (0: never)",
        _duration,
        setting="compaction_interval",
        aliases=("--compaction-interval",),
    ),
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
    Flag(
        "--worker-hang-timeout",
        "with several workers: how long (seconds, or a Go duration) a worker serving the port may go"
        " without turning its event loop before the supervisor aborts it (its stack is logged) and"
        " ends the server, for whatever restarts it (0: never)",
        _duration,
    ),
    Flag(
        "--logging-format",
        "sets the log format: text, or one JSON object a line",
        setting="log_format",
        choices=("text", "json"),
        aliases=("--log-format",),
    ),
    Flag(
        "--events-metric-max-reasons",
        "how many reasons of stored Events coreio_events_written_total names, in each worker (later"
        " ones are counted as other)",
        int,
        check=lambda count: count >= 0,
        check_error="--events-metric-max-reasons must not be negative",
    ),
    Flag(
        "--events-metric-max-namespaces",
        "how many namespaces of stored Events coreio_events_written_total names, in each worker"
        " (later ones are counted as other)",
        int,
        check=lambda count: count >= 0,
        check_error="--events-metric-max-namespaces must not be negative",
    ),
    Flag(
        "--etcd-count-metric-poll-period",
        "how often (seconds, or a Go duration) the stored objects of each resource are counted for"
        " apiserver_storage_objects (0: never)",
        _duration,
    ),
    Flag("--shutdown-delay-duration", _SHUTDOWN_DELAY_HELP, _duration),
    Flag("--shutdown-watch-termination-grace-period", _WATCH_GRACE_HELP, _duration),
    Flag(
        "--runtime-config",
        "key=value pairs that enable or disable served APIs: <group>/<version>=true|false, or "
        "api/all, api/ga, api/beta, api/alpha=true|false (alpha and beta versions are off by default); "
        "given more than once, the pairs are merged (of one key, the later value wins)",
        joined=True,
    ),
)


def kind_flags(kinds: Sequence[ResourceKind]) -> list[Flag]:
    """The flags the served kinds declare: how long an expiring kind's objects live."""
    return [
        Flag(
            kind.expiry.flag,
            kind.expiry.help,
            _whole_seconds,
            setting=f"{_EXPIRY_DEST}{kind.group_resource}",
            default=kind.expiry.default_seconds,
        )
        for kind in kinds
        if kind.expiry is not None
    ]


def version() -> str:
    """The installed distribution's version, else the package's own."""
    import importlib.metadata  # here: only --version needs it

    try:
        return importlib.metadata.version("coreio")
    except importlib.metadata.PackageNotFoundError:
        return __version__


class _PrintVersion(argparse.Action):
    """--version: argparse's own action, but the version is looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kwargs: object) -> NoReturn:
        print(f"{PROG} {version()}")  # on stdout, as argparse's own
        parser.exit()


def _describe(kinds: Sequence[ResourceKind]) -> str:
    served = [f"{kind.kind}s ({kind.api_version}{_off_by_default(kind)})" for kind in kinds]
    listed = (", ".join(served[:-1]) + " and " + served[-1]) if len(served) > 1 else "".join(served)
    return f"Serves {listed}."


def _off_by_default(kind: ResourceKind) -> str:
    level = runtime_config.stability(kind.version)
    return "" if level == "ga" else f", {level or 'not GA'}: off by default"


_EPILOG = "Times are a number of seconds or a Go duration (90, 1m30s, 1h0m0s)."


class _Parser(argparse.ArgumentParser):
    """argparse, whose mistakes are one line: the flags' usage runs to dozens of lines, so it is
    left to --help."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _Joined(argparse.Action):
    """A flag given again adds its value to the one before, after a comma."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        before = getattr(namespace, self.dest, None)
        setattr(namespace, self.dest, f"{before},{values}" if before else values)


def _parser(flags: Sequence[Flag], kinds: Sequence[ResourceKind]) -> argparse.ArgumentParser:
    """The parser of `flags`, each described with its default, and --version."""
    # Flags not given are left out, so that they keep the Settings' defaults.
    parser = _Parser(
        prog=PROG, description=_describe(kinds), epilog=_EPILOG, argument_default=argparse.SUPPRESS
    )
    parser.add_argument("--version", action=_PrintVersion, help="print the version and exit")
    defaults = Settings()
    for flag in flags:
        parser.add_argument(
            flag.name,
            *flag.aliases,
            action=_Joined if flag.joined else "store",
            dest=flag.dest,
            type=flag.parse,
            help=flag.help_line(defaults),
            # Named as argparse names them, or listing the choices.
            metavar=None if flag.choices else flag.metavar,
            choices=flag.choices or None,
        )
    return parser


def parse_args(argv: Sequence[str] | None = None, kinds: Sequence[ResourceKind] = SERVABLE_KINDS) -> Settings:
    """Settings from the command line; a mistake ends the process (status 2) with one line."""
    flags = [*FLAGS, *kind_flags(kinds)]
    parser = _parser(flags, kinds)
    given = vars(parser.parse_args(argv))
    for flag in flags:
        if flag.check is not None and flag.dest in given and not flag.check(given[flag.dest]):
            parser.error(flag.check_error)
    expiry = {
        dest.removeprefix(_EXPIRY_DEST): given.pop(dest)
        for dest in list(given)
        if dest.startswith(_EXPIRY_DEST)
    }
    try:
        runtime_config.enabled_kinds(kinds, given.get("runtime_config", ""))
    except ValueError as exc:
        parser.error(f"--runtime-config: {exc}")
    return Settings(**given, expiry_seconds=expiry)


def main(argv: Sequence[str] | None = None, kinds: Sequence[ResourceKind] = SERVABLE_KINDS) -> None:
    """The console script: serves `kinds` that --runtime-config leaves on (a program serving more
    kinds passes its own list)."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    logging.getLogger("aiohttp.server").addFilter(QuietMalformedRequests())
    settings = parse_args(argv, kinds)
    logs.configure(settings.log_format)
    # Whatever the caller's umask: every file the server makes (the database and its journal, the
    # audit log, certificates, keys) is 0600 and every directory 0700, as upstream keeps its own.
    os.umask(0o077)
    memory.collect_less_often()
    try:
        supervisor.run(settings, runtime_config.enabled_kinds(kinds, settings.runtime_config))
    except server.StartError as exc:
        # One line and status 1, as kube-apiserver ends when it cannot start.
        sys.exit(f"{PROG}: error: {exc}")
