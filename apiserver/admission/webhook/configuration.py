"""The webhooks of the configuration objects, in the order upstream calls them (configurations by
name, each one's webhooks as listed), with the defaults admissionregistration.k8s.io/v1 gives
absent fields, and their matchConditions compiled once per change of the configuration."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from apiserver.admission.objects import AdmissionObjects, AdmissionSource
from apiserver.admission.policy.compiled import BOOL, Expression
from apiserver.machinery.types import JSON

FAIL = "Fail"
IGNORE = "Ignore"
IF_NEEDED = "IfNeeded"
# Side effects a dry run may reach (None and NoneOnDryRun); any other class refuses a dry run.
DRY_RUN_SAFE = ("None", "NoneOnDryRun")
DEFAULT_TIMEOUT = 10
MAX_TIMEOUT = 30


@dataclass(frozen=True)
class Webhook:
    """One webhook of a configuration. `uid` is upstream's `<configuration>/<webhook>/<n>` (n
    counts earlier webhooks of the same name in the configuration): reinvocation remembers it."""

    uid: str
    configuration: str
    spec: JSON
    conditions: tuple[tuple[str, Expression], ...]

    @property
    def name(self) -> str:
        return str(self.spec.get("name") or "")

    @property
    def failure_policy(self) -> str:
        return str(self.spec.get("failurePolicy") or FAIL)

    @property
    def side_effects(self) -> str | None:
        value = self.spec.get("sideEffects")
        return None if value is None else str(value)

    @property
    def timeout(self) -> int:
        value = self.spec.get("timeoutSeconds")
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            return DEFAULT_TIMEOUT
        return min(value, MAX_TIMEOUT)

    @property
    def reinvocation_policy(self) -> str:
        return str(self.spec.get("reinvocationPolicy") or "Never")

    @property
    def review_versions(self) -> list[str]:
        return [str(version) for version in self.spec.get("admissionReviewVersions") or []]

    @property
    def client_config(self) -> JSON:
        config = self.spec.get("clientConfig")
        return config if isinstance(config, dict) else {}

    @property
    def rules(self) -> list[JSON]:
        return [rule for rule in self.spec.get("rules") or [] if isinstance(rule, dict)]


def _conditions(spec: JSON) -> tuple[tuple[str, Expression], ...]:
    return tuple(
        (str(item.get("name") or ""), Expression.compile(str(item.get("expression") or ""), BOOL))
        for item in spec.get("matchConditions") or []
        if isinstance(item, dict)
    )


def webhooks_of(configurations: Mapping[str, JSON]) -> list[Webhook]:
    """Every webhook of the configurations, in upstream's calling order."""
    found: list[Webhook] = []
    for name in sorted(configurations):
        seen: dict[str, int] = {}
        for spec in configurations[name].get("webhooks") or []:
            if not isinstance(spec, dict):
                continue
            hook = str(spec.get("name") or "")
            uid = f"{name}/{hook}/{seen.get(hook, 0)}"
            seen[hook] = seen.get(hook, 0) + 1
            found.append(Webhook(uid, name, spec, _conditions(spec)))
    return found


class WebhookList:
    """The webhooks of one kind of configuration in a source, rebuilt when its generation moves."""

    def __init__(
        self, source: AdmissionSource, pick: Callable[[AdmissionObjects], Mapping[str, Any]]
    ) -> None:
        self.source = source
        self.pick = pick
        self._generation = -1
        self._webhooks: list[Webhook] = []

    def current(self) -> list[Webhook]:
        objects = self.source.objects()
        if objects.generation != self._generation:
            self._webhooks = webhooks_of(self.pick(objects))
            self._generation = objects.generation
        return self._webhooks
