"""The admission configuration objects a server applies, wherever they come from (the cluster's
informers or a manifest file): ValidatingAdmissionPolicies and their bindings, validating and
mutating webhook configurations, as the JSON objects of admissionregistration.k8s.io/v1; and the
objects admission reads while it decides (namespaces, a policy's params)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from apiserver.machinery.types import JSON

GROUP = "admissionregistration.k8s.io"
VERSION = "v1"
POLICY = "ValidatingAdmissionPolicy"
BINDING = "ValidatingAdmissionPolicyBinding"
VALIDATING_WEBHOOKS = "ValidatingWebhookConfiguration"
MUTATING_WEBHOOKS = "MutatingWebhookConfiguration"
# Kind -> plural, for the cluster's list+watch paths.
PLURALS = {
    POLICY: "validatingadmissionpolicies",
    BINDING: "validatingadmissionpolicybindings",
    VALIDATING_WEBHOOKS: "validatingwebhookconfigurations",
    MUTATING_WEBHOOKS: "mutatingwebhookconfigurations",
}


@dataclass(frozen=True)
class AdmissionObjects:
    """One consistent view of the configuration objects, each kind by name. `generation` changes
    whenever any of them does, so what is compiled from them is compiled once per change."""

    policies: Mapping[str, JSON] = field(default_factory=dict)
    bindings: Mapping[str, JSON] = field(default_factory=dict)
    validating_webhooks: Mapping[str, JSON] = field(default_factory=dict)
    mutating_webhooks: Mapping[str, JSON] = field(default_factory=dict)
    generation: int = 0


class AdmissionSource(Protocol):
    """Where the configuration and the objects admission reads come from."""

    def objects(self) -> AdmissionObjects:
        """The configuration as last seen (empty until the first list is in)."""
        ...

    async def ready(self) -> None:
        """Returns once the configuration has been read at least once (writes wait for it, as
        upstream's plugins refuse requests until their informers have synced)."""
        ...

    async def namespace(self, name: str) -> JSON | None:
        """The Namespace object `name` (for namespaceSelector and `namespaceObject`); None when
        there is none."""
        ...

    async def namespaced(self, api_version: str, kind: str) -> bool | None:
        """Whether objects of the kind live in namespaces; None when the kind is not known."""
        ...

    async def params(
        self, api_version: str, kind: str, namespace: str, name: str, selector: JSON | None
    ) -> list[JSON]:
        """The param objects of the kind a binding's paramRef names: by `name`, or all that
        `selector` (a LabelSelector) matches; in `namespace` ("" for cluster-scoped kinds)."""
        ...
