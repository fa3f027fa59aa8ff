"""The authorization chain, and the assembly of coreio's authorization for a server.

Order, as upstream's union of authorizers (the first to allow wins; the reasons of those that did
not are joined for the 403):

1. system:masters (`apiserver.auth.authz.PrivilegedGroups`),
2. the webhook endpoint's callers (`WebhookCallers`; that path is decided locally, see below),
3. always-allowed paths (/healthz, /livez, /readyz, as upstream's delegated authorization),
4. standalone only: what upstream's default ClusterRoleBindings give every user (discovery:
   /api, /apis, /openapi, /version; `BootstrapDiscovery`), since no ClusterRoleBindings exist here,
5. the delegated SubjectAccessReview to the cluster (an `Authorizer`, e.g.
   `apiserver.auth.delegated.SubjectAccessReviewAuthorizer`, which caches allow and deny),
6. coreio's RBAC over the stored RoleBindings.

The delegate never sees requests for the webhook endpoint: kube-apiserver calls that endpoint while
authorizing, and asking it back would go round in circles.

Denials are answered by the middleware with `apiserver.auth.authz.forbidden` (upstream's wording).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from apiserver.auth.authz import ALLOW, AlwaysAllow, Authorizer, Decision, PrivilegedGroups
from apiserver.auth.requestinfo import RequestInfo
from apiserver.cluster.connection import ClusterConnection
from apiserver.machinery import errors
from apiserver.machinery.options import WriteOptions
from apiserver.machinery.tasks import BackgroundTasks
from apiserver.machinery.types import JSON
from apiserver.machinery.user import AUTHENTICATED_GROUP, MASTERS_GROUP, UserInfo
from apiserver.rbac.authorizer import ProblemReporter, RBACAuthorizer, rules_allow
from apiserver.rbac.bindings import BindingIndex, ProblemRecorder, RoleBindingStore
from apiserver.rbac.escalation import EscalationGuard
from apiserver.rbac.roles import (
    ACCESS_REVIEWER_RULES,
    BASIC_USER_RULES,
    DISCOVERY_RULES,
    ISSUER_DISCOVERY_RULES,
    PUBLIC_INFO_RULES,
    ClusterRoleSource,
    PolicyRule,
    RoleSource,
    StaticRoleSource,
)
from apiserver.rbac.webhook import WEBHOOK_PATH, SubjectAccessReviewWebhook, WebhookCallers
from apiserver.registry.store import ResourceStore
from apiserver.resources import KINDS, EventKind, RoleBindingKind
from apiserver.resources.base import Admission, ResourceKind
from apiserver.resources.rolebinding import ACCESS_REVIEWER

log = logging.getLogger(__name__)

UNAUTHENTICATED_GROUP = "system:unauthenticated"
SERVICE_ACCOUNTS_GROUP = "system:serviceaccounts"
ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
NO_OPINION = Decision(False)

MODE_RBAC = "RBAC"
MODE_ALWAYS_ALLOW = "AlwaysAllow"


class AuthorizerUnion:
    """The first authorizer that allows wins. Otherwise: the reasons given, one a line; and when an
    authorizer failed (raised a StatusError, e.g. the cluster could not be asked) and none allowed,
    that error, as upstream answers an authorizer error with 500 rather than 403."""

    def __init__(self, authorizers: Sequence[Authorizer]) -> None:
        self.authorizers = list(authorizers)

    async def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
        reasons: list[str] = []
        failure: errors.StatusError | None = None
        for authorizer in self.authorizers:
            try:
                decision = await authorizer.authorize(user, info)
            except errors.StatusError as exc:
                failure = failure or exc
                continue
            if decision.allowed:
                return decision
            if decision.reason:
                reasons.append(decision.reason)
        if failure is not None:
            raise failure
        return Decision(False, "\n".join(reasons))


class SkipPaths:
    """`delegate`, except for non-resource requests to `paths`, about which it has no opinion."""

    def __init__(self, delegate: Authorizer, paths: Iterable[str]) -> None:
        self.delegate = delegate
        self.paths = frozenset(paths)

    async def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
        if not info.is_resource_request and info.path in self.paths:
            return NO_OPINION
        return await self.delegate.authorize(user, info)


class AlwaysAllowPaths:
    """Non-resource paths anyone may reach (`/x` exactly, or `/x/*` as a prefix), as upstream's
    path authorizer in delegated authorization."""

    def __init__(self, paths: Iterable[str] = ALWAYS_ALLOW_PATHS) -> None:
        self.exact = frozenset(p for p in paths if not p.endswith("*"))
        self.prefixes = tuple(p.rstrip("*") for p in paths if p.endswith("*"))

    async def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
        if info.is_resource_request:
            return NO_OPINION
        if info.path in self.exact or info.path.startswith(self.prefixes):
            return ALLOW
        return NO_OPINION


@dataclass(frozen=True)
class BootstrapBinding:
    """One of the default ClusterRoleBindings a standalone server holds in code (of the ClusterRole
    of the same name), since it has no ClusterRoleBindings to store them."""

    name: str
    groups: tuple[str, ...]
    rules: tuple[PolicyRule, ...]

    def subject_group(self, user: UserInfo) -> str | None:
        """The first group of the binding's that `user` is in (upstream's subject order)."""
        return next((group for group in self.groups if group in user.groups), None)

    def reason(self, group: str) -> str:
        """Upstream's RBAC reason for what the binding allows."""
        return (
            f'RBAC: allowed by ClusterRoleBinding "{self.name}" of ClusterRole "{self.name}" to '
            f'Group "{group}"'
        )


# Upstream's system:discovery, system:basic-user, system:public-info-viewer and
# system:service-account-issuer-discovery (the OpenID paths are not served here, but the rules
# reviews answer as upstream's); and the access reviews' (kubectl coreio), which an
# operator-installed server has as a real ClusterRoleBinding.
BOOTSTRAP_BINDINGS = (
    BootstrapBinding("system:discovery", (AUTHENTICATED_GROUP,), DISCOVERY_RULES),
    BootstrapBinding("system:basic-user", (AUTHENTICATED_GROUP,), BASIC_USER_RULES),
    BootstrapBinding(
        "system:public-info-viewer", (AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP), PUBLIC_INFO_RULES
    ),
    BootstrapBinding(
        "system:service-account-issuer-discovery", (SERVICE_ACCOUNTS_GROUP,), ISSUER_DISCOVERY_RULES
    ),
    BootstrapBinding(ACCESS_REVIEWER, (AUTHENTICATED_GROUP,), ACCESS_REVIEWER_RULES),
)


class BootstrapDiscovery:
    """The `BOOTSTRAP_BINDINGS`, as an authorizer of a standalone server."""

    async def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
        return self.decide(user, info)

    @staticmethod
    def decide(user: UserInfo, info: RequestInfo) -> Decision:
        for binding in BOOTSTRAP_BINDINGS:
            group = binding.subject_group(user)
            if group is not None and rules_allow(info, binding.rules):
                return Decision(True, binding.reason(group))
        return NO_OPINION

    @staticmethod
    def rules(user: UserInfo) -> list[PolicyRule]:
        """The rules these bindings give `user` (for a rules review)."""
        return [rule for b in BOOTSTRAP_BINDINGS if b.subject_group(user) is not None for rule in b.rules]


def build_authorizer(
    rbac: Authorizer,
    *,
    delegate: Authorizer | None = None,
    webhook_callers: WebhookCallers | None = None,
    bootstrap_discovery: bool = False,
    privileged_groups: tuple[str, ...] = (MASTERS_GROUP,),
    always_allow_paths: Iterable[str] = ALWAYS_ALLOW_PATHS,
) -> Authorizer:
    """The chain in the module's order."""
    parts: list[Authorizer] = []
    if webhook_callers is not None:
        parts.append(webhook_callers)
    parts.append(AlwaysAllowPaths(always_allow_paths))
    if bootstrap_discovery:
        parts.append(BootstrapDiscovery())
    if delegate is not None:
        skipped = {webhook_callers.path if webhook_callers is not None else WEBHOOK_PATH}
        parts.append(SkipPaths(delegate, skipped))
    parts.append(rbac)
    return PrivilegedGroups(AuthorizerUnion(parts), privileged_groups)


# ----------------------------------------------------------------------------- assembly


@dataclass
class AuthorizationConfig:
    """What the command line decides."""

    mode: str = MODE_RBAC
    # Standalone: a roles file (YAML/JSON Roles and ClusterRoles) on top of the default ClusterRoles.
    roles_file: Path | None = None
    # In a cluster: where its Roles and ClusterRoles are read (list+watch); wins over roles_file.
    cluster: ClusterConnection | None = None
    # The delegated SubjectAccessReview authorizer (in a cluster).
    delegate: Authorizer | None = None
    # Standalone: grant discovery as upstream's default ClusterRoleBindings do.
    bootstrap_discovery: bool = True
    # Who may call the SubjectAccessReview webhook endpoint besides system:masters.
    webhook_users: tuple[str, ...] = ()
    webhook_groups: tuple[str, ...] = ()
    # How long start-up waits for the cluster's roles before serving anyway (requests needing a
    # role meanwhile are refused with "roles are not synced yet").
    roles_sync_timeout: float = 60.0
    # Whether this process reports RoleBindings' problems (log line, counter, Warning Event): of a
    # server's workers, which all read the same bindings, only the first does.
    reports_problems: bool = True


@dataclass
class Authorization:
    """Everything authorization needs at run time, with its background work (`start`/`stop`, or
    the aiohttp hooks `on_startup`/`on_cleanup`)."""

    authorizer: Authorizer
    rbac: RBACAuthorizer
    index: BindingIndex
    roles: RoleSource
    reporter: ProblemReporter
    recorder: ProblemRecorder
    escalation: EscalationGuard
    webhook: SubjectAccessReviewWebhook
    role_bindings: RoleBindingStore
    roles_sync_timeout: float = 60.0
    # Standalone: the rules of upstream's default ClusterRoleBindings count for every user.
    bootstrap_rules: bool = False
    # In a cluster: the delegated SubjectAccessReview, as the chain asks it.
    delegate: Authorizer | None = None
    _tasks: BackgroundTasks = field(default_factory=BackgroundTasks)

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[PolicyRule], list[str]]:
        """Every rule `user` has in `namespace`, and the errors met resolving them (a rules review)."""
        granted, problems = self.rbac.rules_for(user, namespace)
        if self.bootstrap_rules:
            granted = [*BootstrapDiscovery.rules(user), *granted]
        return granted, problems

    @property
    def ready(self) -> bool:
        """For /readyz: the RoleBindings are listed and the roles synced."""
        return self.index.ready and self.roles.ready

    async def admit_role_binding(
        self, user: UserInfo | None, namespace: str, obj: JSON, old: JSON | None = None
    ) -> None:
        """The escalation check, for the rolebindings store to call before it writes."""
        await self.escalation.admit(user, namespace, obj, old)

    @property
    def escalation_check(self) -> Admission:
        """The escalation check, as the kinds' admission asks for it (`ServerChecks`)."""
        return self.admit_role_binding

    async def allows(
        self, user: UserInfo, verb: str, group: str, resource: str, namespace: str, name: str = ""
    ) -> bool:
        """Whether the authorizer lets `user` `verb` `resource` of `group` in `namespace` (every
        namespace: ""), the object `name` if given, as it would rule on that request
        (`ServerChecks`)."""
        where = f"/namespaces/{namespace}" if namespace else ""
        prefix = "apis" if group else "api"  # the core group's
        info = RequestInfo(
            verb=verb,
            path=f"/{prefix}{'/' + group if group else ''}/v1{where}/{resource}{'/' + name if name else ''}",
            is_resource_request=True,
            api_prefix=prefix,
            api_group=group,
            api_version="v1",
            namespace=namespace,
            resource=resource,
            name=name,
        )
        return (await self.authorizer.authorize(user, info)).allowed

    async def start(self) -> None:
        if isinstance(self.roles, ClusterRoleSource):
            self.roles.on_change.append(self.index.schedule_recheck)
            self.roles.start()
        self._tasks.start(self.index.run(self.role_bindings), name="coreio-rolebinding-index")
        if self.recorder.write_event is not None:
            self._tasks.start(self.recorder.run(), name="coreio-rbac-events")
        try:
            async with asyncio.timeout(self.roles_sync_timeout):
                await self.index.wait_ready()
                if isinstance(self.roles, ClusterRoleSource):
                    await self.roles.wait_ready()
        except TimeoutError:
            log.warning("authorization not synced after %.0fs; serving anyway", self.roles_sync_timeout)
        # Problems of bindings listed before the roles were in.
        self.index.recheck_all()

    async def stop(self) -> None:
        await self._tasks.stop()
        if isinstance(self.roles, ClusterRoleSource):
            await self.roles.close()

    # aiohttp signal handlers. Register them after the storage's start-up hook (the index lists the
    # RoleBindings as it starts) and before its clean-up hook; `cleanup_ctx` would run too early.

    async def on_startup(self, _app: web.Application) -> None:
        await self.start()

    async def on_cleanup(self, _app: web.Application) -> None:
        await self.stop()


def build_authorization(
    config: AuthorizationConfig,
    *,
    role_bindings: RoleBindingStore,
    write_event: Callable[[JSON], Awaitable[object]] | None = None,
    kinds: Iterable[ResourceKind] = KINDS,
) -> Authorization:
    """Assembles roles, the RoleBinding index, the RBAC authorizer, the chain, the escalation guard
    and the webhook endpoint. `role_bindings` is the rolebindings `ResourceStore`; `write_event`
    creates an events.core.io Event (the events store's create), for the part-7 Warning Events;
    `kinds`, the served kinds, add their rules to the default admin, edit and view roles."""
    roles: RoleSource
    if config.cluster is not None:
        roles = ClusterRoleSource(config.cluster)
    else:
        roles = StaticRoleSource.from_file(config.roles_file, kinds=kinds)
    recorder = ProblemRecorder(write_event, reporting=config.reports_problems)
    reporter = ProblemReporter([recorder])
    index = BindingIndex(reporter=reporter)
    rbac = RBACAuthorizer(index, roles, reporter=reporter)
    index.checker = rbac.check_binding
    callers = WebhookCallers(config.webhook_users, config.webhook_groups)
    authorizer: Authorizer
    bootstrap = config.bootstrap_discovery and config.cluster is None
    if config.mode == MODE_ALWAYS_ALLOW:
        authorizer = AlwaysAllow()
    elif config.mode == MODE_RBAC:
        authorizer = build_authorizer(
            rbac,
            delegate=config.delegate,
            webhook_callers=callers,
            bootstrap_discovery=bootstrap,
        )
    else:
        raise ValueError(
            f"unknown authorization mode {config.mode!r} (use {MODE_RBAC} or {MODE_ALWAYS_ALLOW})"
        )
    return Authorization(
        authorizer=authorizer,
        rbac=rbac,
        index=index,
        roles=roles,
        reporter=reporter,
        recorder=recorder,
        escalation=EscalationGuard(rbac, authorizer, delegate=config.delegate),
        webhook=SubjectAccessReviewWebhook(rbac, callers),
        role_bindings=role_bindings,
        roles_sync_timeout=config.roles_sync_timeout,
        bootstrap_rules=bootstrap and config.mode == MODE_RBAC,
        delegate=config.delegate if config.mode == MODE_RBAC else None,
    )


def event_writer(
    events: ResourceStore, field_manager: str = "coreio-rbac-authorizer"
) -> Callable[[JSON], Awaitable[object]]:
    """`write_event` for `build_authorization`, from the events `ResourceStore`."""

    async def write(event: JSON) -> object:
        return await events.create(
            event["metadata"]["namespace"], event, WriteOptions(field_manager=field_manager)
        )

    return write


def server_authorization(config: AuthorizationConfig, stores: Sequence[ResourceStore]) -> Authorization:
    """`build_authorization` over a server's stores: RBAC over its RoleBindings, Warning Events
    written to its Events (when it serves them), the served kinds in the default roles."""
    by_resource = {store.gr: store for store in stores}
    events = by_resource.get(EventKind().group_resource)
    return build_authorization(
        config,
        role_bindings=by_resource[RoleBindingKind().group_resource],
        write_event=event_writer(events) if events is not None else None,
        kinds=[store.kind for store in stores],
    )
