"""The audit.k8s.io/v1 Policy (--audit-policy-file): read and validated as upstream reads it, and
each request's level, omitted stages and managedFields choice from the first rule that matches."""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from apiserver.auth.requestinfo import RequestInfo
from apiserver.machinery import errors
from apiserver.machinery.formats import is_dns1123_subdomain
from apiserver.machinery.user import UserInfo

log = logging.getLogger(__name__)

API_VERSION = "audit.k8s.io/v1"
STAGES = ("RequestReceived", "ResponseStarted", "ResponseComplete", "Panic")


class Level(enum.IntEnum):
    """How much of a request is logged; each level includes the ones below it."""

    NONE = 0
    METADATA = 1
    REQUEST = 2
    REQUEST_RESPONSE = 3

    @property
    def wire(self) -> str:
        return _LEVEL_NAMES[self]


_LEVEL_NAMES = {
    Level.NONE: "None",
    Level.METADATA: "Metadata",
    Level.REQUEST: "Request",
    Level.REQUEST_RESPONSE: "RequestResponse",
}
_LEVELS = {name: level for level, name in _LEVEL_NAMES.items()}


class PolicyError(Exception):
    """A policy file that cannot be used, worded as upstream's loader words it."""


@dataclass(frozen=True)
class GroupResources:
    group: str = ""
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()

    def matches(self, info: RequestInfo) -> bool:
        if self.group != info.api_group:
            return False
        if not self.resources:
            return True
        if self.resource_names and info.name not in self.resource_names:
            return False
        return any(_resource_matches(spec, info.resource, info.subresource) for spec in self.resources)


def _resource_matches(spec: str, resource: str, subresource: str) -> bool:
    """`*`, `resource`, `resource/subresource`, `*/subresource` and `resource/*`, as upstream."""
    combined = f"{resource}/{subresource}" if subresource else resource
    if spec in ("*", combined):
        return True
    if subresource and spec.startswith("*/") and spec[2:] == subresource:
        return True
    return spec.endswith("/*") and spec[:-2] == resource


def _path_matches(path: str, spec: str) -> bool:
    return spec in ("*", path) or (spec.endswith("*") and path.startswith(spec.rstrip("*")))


@dataclass(frozen=True)
class AuditConfig:
    """What the policy says of one request (upstream's RequestAuditConfig)."""

    level: Level
    omit_stages: frozenset[str] = frozenset()
    omit_managed_fields: bool = False


@dataclass(frozen=True)
class PolicyRule:
    level: Level
    users: tuple[str, ...] = ()
    user_groups: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    resources: tuple[GroupResources, ...] = ()
    namespaces: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()
    omit_stages: frozenset[str] = frozenset()
    # None: the policy's default.
    omit_managed_fields: bool | None = None

    def matches(self, user: UserInfo | None, info: RequestInfo) -> bool:
        if self.users and (user is None or user.name not in self.users):
            return False
        if self.user_groups and (user is None or not set(user.groups) & set(self.user_groups)):
            return False
        if self.verbs and info.verb not in self.verbs:
            return False
        if self.namespaces or self.resources:
            return self._matches_resource(info)
        if self.non_resource_urls:
            return not info.is_resource_request and any(
                _path_matches(info.path, spec) for spec in self.non_resource_urls
            )
        return True

    def _matches_resource(self, info: RequestInfo) -> bool:
        if not info.is_resource_request:
            return False
        if self.namespaces and info.namespace not in self.namespaces:
            return False
        return not self.resources or any(resources.matches(info) for resources in self.resources)


@dataclass(frozen=True)
class Policy:
    rules: tuple[PolicyRule, ...]
    omit_stages: frozenset[str] = frozenset()
    omit_managed_fields: bool = False

    def evaluate(self, user: UserInfo | None, info: RequestInfo) -> AuditConfig:
        """The first matching rule's level (its omitted stages joined with the policy's); None
        when no rule matches."""
        for rule in self.rules:
            if rule.matches(user, info):
                managed = (
                    self.omit_managed_fields if rule.omit_managed_fields is None else rule.omit_managed_fields
                )
                return AuditConfig(rule.level, rule.omit_stages | self.omit_stages, managed)
        return AuditConfig(Level.NONE, self.omit_stages, self.omit_managed_fields)


# Without --audit-policy-file, --audit-log-path alone logs every request at Metadata when it is
# complete, what coreio has always written (upstream would log nothing without a policy); and, as
# upstream's stages have it, a watch when it starts and a refused authentication (one event, at
# ResponseStarted).
DEFAULT_POLICY = Policy(rules=(PolicyRule(Level.METADATA),), omit_stages=frozenset({"RequestReceived"}))


def load_policy(path: str) -> Policy:
    """The policy in the YAML or JSON file at `path`; PolicyError naming what is wrong."""
    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        raise PolicyError(f'failed to read file path "{path}": {exc}') from None
    try:
        return policy_from_bytes(text)
    except PolicyError as exc:
        raise PolicyError(f"{exc}: from file {path}") from None


def policy_from_bytes(text: bytes) -> Policy:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PolicyError(f"failed decoding: {' '.join(str(exc).split())}") from None
    if not isinstance(document, dict):
        raise PolicyError("failed decoding: Object 'Kind' is missing in the policy")
    kind, version = document.get("kind"), document.get("apiVersion")
    if not kind or not version:
        missing = "Kind" if not kind else "apiVersion"
        raise PolicyError(f"failed decoding: Object '{missing}' is missing in the policy")
    if version != API_VERSION or kind != "Policy":
        group, _, ver = str(version).rpartition("/")
        raise PolicyError(f"unknown group version field {group}/{ver}, Kind={kind} in policy")
    _warn_unknown(document, _POLICY_FIELDS, "")
    problems = validate(document)
    if problems:
        raise PolicyError(errors.aggregate_message([str(problem) for problem in problems]))
    rules = tuple(_rule(rule, f"rules[{i}]") for i, rule in enumerate(document.get("rules") or ()))
    if not rules:
        raise PolicyError("loaded illegal policy with 0 rules")
    return Policy(
        rules=rules,
        omit_stages=frozenset(_strings(document, "omitStages", "")),
        omit_managed_fields=_flag(document, "omitManagedFields", "") is True,
    )


_POLICY_FIELDS = frozenset({"apiVersion", "kind", "metadata", "rules", "omitStages", "omitManagedFields"})
_RULE_FIELDS = frozenset(
    {
        "level",
        "users",
        "userGroups",
        "verbs",
        "resources",
        "namespaces",
        "nonResourceURLs",
        "omitStages",
        "omitManagedFields",
    }
)
_RESOURCE_FIELDS = frozenset({"group", "resources", "resourceNames"})


def _warn_unknown(document: Mapping[str, Any], known: frozenset[str], path: str) -> None:
    """Upstream decodes strictly, then leniently with a warning: unknown fields are ignored."""
    for key in document:
        if key not in known:
            log.warning(
                'Audit policy contains errors, falling back to lenient decoding: unknown field "%s%s"',
                path,
                key,
            )


def _decoding(path: str, key: str, want: str) -> PolicyError:
    return PolicyError(f"failed decoding: {path}{key}: expected {want}")


def _strings(document: Mapping[str, Any], key: str, path: str) -> tuple[str, ...]:
    value = document.get(key) or []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _decoding(path, key, "a list of strings")
    return tuple(value)


def _flag(document: Mapping[str, Any], key: str, path: str) -> bool | None:
    value = document.get(key)
    if value is not None and not isinstance(value, bool):
        raise _decoding(path, key, "a boolean")
    return value


def _list(document: Mapping[str, Any], key: str, path: str) -> list[dict[str, Any]]:
    value = document.get(key) or []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise _decoding(path, key, "a list of objects")
    return value


def _rule(rule: Mapping[str, Any], path: str) -> PolicyRule:
    _warn_unknown(rule, _RULE_FIELDS, f"{path}.")
    resources = []
    for i, entry in enumerate(_list(rule, "resources", f"{path}.")):
        where = f"{path}.resources[{i}]."
        _warn_unknown(entry, _RESOURCE_FIELDS, where)
        resources.append(
            GroupResources(
                group=str(entry.get("group") or ""),
                resources=_strings(entry, "resources", where),
                resource_names=_strings(entry, "resourceNames", where),
            )
        )
    return PolicyRule(
        level=_LEVELS[rule["level"]],
        users=_strings(rule, "users", f"{path}."),
        user_groups=_strings(rule, "userGroups", f"{path}."),
        verbs=_strings(rule, "verbs", f"{path}."),
        resources=tuple(resources),
        namespaces=_strings(rule, "namespaces", f"{path}."),
        non_resource_urls=_strings(rule, "nonResourceURLs", f"{path}."),
        omit_stages=frozenset(_strings(rule, "omitStages", f"{path}.")),
        omit_managed_fields=_flag(rule, "omitManagedFields", f"{path}."),
    )


def validate(document: Mapping[str, Any]) -> list[errors.FieldError]:
    """Upstream's ValidatePolicy: levels, non-resource URLs, resources' groups and names, stages."""
    problems = _validate_stages(document.get("omitStages"), "omitStages")
    rules = document.get("rules") or []
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        if isinstance(rule, dict):
            problems += _validate_rule(rule, f"rules[{i}]")
    return problems


def _validate_rule(rule: Mapping[str, Any], path: str) -> list[errors.FieldError]:
    problems: list[errors.FieldError] = []
    level = rule.get("level")
    if not level:
        problems.append(errors.required(f"{path}.level"))
    elif level not in _LEVELS:
        problems.append(errors.not_supported(f"{path}.level", level, list(_LEVELS)))
    urls = rule.get("nonResourceURLs") or []
    problems += _validate_urls(urls, f"{path}.nonResourceURLs")
    problems += _validate_resources(rule.get("resources") or [], f"{path}.resources")
    problems += _validate_stages(rule.get("omitStages"), f"{path}.omitStages")
    if urls and (rule.get("resources") or rule.get("namespaces")):
        detail = "rules cannot apply to both regular resources and non-resource URLs"
        problems.append(errors.invalid(f"{path}.nonResourceURLs", _go_strings(urls), detail))
    return problems


def _go_strings(values: Any) -> errors.GoRepr:
    """A []string as Go's %#v prints it in a field error."""
    items = values if isinstance(values, list) else [values]
    return errors.GoRepr("[]string{" + ", ".join(errors.go_quote(str(item)) for item in items) + "}")


def _validate_urls(urls: Iterable[Any], path: str) -> list[errors.FieldError]:
    problems = []
    for i, url in enumerate(urls):
        if not isinstance(url, str) or url == "*":
            continue
        if not url.startswith("/"):
            problems.append(
                errors.invalid(f"{path}[{i}]", url, "non-resource URL rules must begin with a '/' character")
            )
        if url and "*" in url[:-1]:
            detail = "non-resource URL wildcards '*' must be the final character of the rule"
            problems.append(errors.invalid(f"{path}[{i}]", url, detail))
    return problems


def _validate_resources(entries: Iterable[Any], path: str) -> list[errors.FieldError]:
    problems = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        group = entry.get("group") or ""
        if group and (messages := is_dns1123_subdomain(str(group))):
            problems.append(errors.invalid(f"{path}.group", group, ",".join(messages)))
        if entry.get("resourceNames") and not entry.get("resources"):
            detail = "using resourceNames requires at least one resource"
            problems.append(
                errors.invalid(f"{path}.resourceNames", _go_strings(entry["resourceNames"]), detail)
            )
    return problems


def _validate_stages(stages: Any, path: str) -> list[errors.FieldError]:
    problems = []
    for i, stage in enumerate(stages if isinstance(stages, list) else []):
        if stage not in STAGES:
            problems.append(
                errors.invalid(f"{path}[{i}]", str(stage), "allowed stages are " + ",".join(STAGES))
            )
    return problems
