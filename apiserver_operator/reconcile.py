"""One reconciliation of an Installation: refuse what cannot work, renew certificates, apply every
child with server-side apply (which also puts back whatever drifted), and report conditions.

Everything here is a plain async function over `KubeClient`; the kopf handlers only call them.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import datetime
import logging
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from cryptography import x509
from kubernetes.utils.quantity import parse_quantity  # the client's parser of resource quantities
from pydantic import ValidationError

from apiserver.machinery.types import JSON
from apiserver_operator import children, given, metrics, probe
from apiserver_operator.certificates import (
    PREVIOUS_CA_CERT,
    SERVING_DATA_KEYS,
    TLS_CERT,
    CertificatePlan,
    Observed,
    dropped_from,
    keep_served,
    plan_certificates,
    trusted_everywhere,
)
from apiserver_operator.children import OWNER_ANNOTATION, Installation
from apiserver_operator.kube import ApiError, KubeClient, resource_path
from apiserver_operator.spec import InstallationSpec, parse_spec

log = logging.getLogger("coreio.operator")

# Kinds the operator writes, with their plural and scope.
PLURALS = {
    "ServiceAccount": "serviceaccounts",
    "Service": "services",
    "Secret": "secrets",
    "PersistentVolumeClaim": "persistentvolumeclaims",
    "Deployment": "deployments",
    "PodDisruptionBudget": "poddisruptionbudgets",
    "ClusterRole": "clusterroles",
    "ClusterRoleBinding": "clusterrolebindings",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "Lease": "leases",
    "APIService": "apiservices",
}
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


class Refused(Exception):
    """The Installation cannot be reconciled as it stands; nothing was touched."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass
class Outcome:
    """What a reconciliation did and found, for status, Events and logs."""

    actions: list[str] = field(default_factory=list)
    certificates: CertificatePlan | None = None
    available: tuple[str, str, str] = ("Unknown", "Pending", "")


def path_of(obj: JSON) -> str:
    meta = obj["metadata"]
    return resource_path(obj["apiVersion"], PLURALS[obj["kind"]], meta.get("namespace", ""), meta["name"])


def _apiservice_path(name: str) -> str:
    return resource_path("apiregistration.k8s.io/v1", "apiservices", "", name)


def installation(body: JSON, default_image: str = "") -> Installation:
    """The Installation in `body`, its image `default_image` when the spec names none; Refused when
    its spec or name cannot be served."""
    meta = body.get("metadata", {})
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
    try:
        spec = parse_spec(body.get("spec"))
    except ValidationError as exc:
        raise Refused("InvalidSpec", f"spec is invalid: {exc.errors()[0].get('msg', exc)}") from None
    if not _DNS1035.match(name):
        # The Service is named after the Installation, and Service names are DNS-1035 labels.
        raise Refused("InvalidName", f"name {name!r} must be a DNS-1035 label (it names the Service)")
    if name.startswith(children.EXPORTER_PREFIX):
        raise Refused(
            "InvalidName",
            f"name {name!r} must not start with {children.EXPORTER_PREFIX!r}: the exporters of"
            " EventExports are named so",
        )
    if spec.storage.type == "sqlite" and spec.replicas > 1:
        raise Refused(
            "SQLiteSingleReplica",
            f"embedded SQLite allows one replica only, {spec.replicas} asked: use etcd storage for more",
        )
    if spec.certificates.secret_name in (f"{name}-ca", f"{name}-serving"):
        raise Refused(
            "InvalidSpec",
            f"spec.certificates.secretName {spec.certificates.secret_name!r} is a Secret the operator"
            " writes itself: name your own otherwise",
        )
    if not spec.image:
        if not default_image:
            raise Refused("ImageNotSet", "spec.image is not set, and the operator has no --default-image")
        spec = spec.model_copy(update={"image": default_image})
    return Installation(namespace, name, str(meta.get("uid", "")), spec)


def identity(body: JSON) -> Installation:
    """The Installation's namespace, name and uid under a default spec: all that finding and
    removing its children takes (their names and owner annotation), whatever its spec says."""
    meta = body.get("metadata", {})
    namespace, name, uid = (str(meta.get(key, "")) for key in ("namespace", "name", "uid"))
    return Installation(namespace, name, uid, InstallationSpec())


async def claim_cluster(client: KubeClient, inst: Installation) -> list[JSON | None]:
    """The APIServices are cluster-wide: refuse when another Installation (or anybody else) has
    them. Returns them as read (None where missing), for `certificates` to observe."""
    found: list[JSON | None] = []
    for name in children.apiservice_names(inst):
        existing = await client.get_or_none(_apiservice_path(name))
        found.append(existing)
        if existing is None:
            continue
        owner = existing.get("metadata", {}).get("annotations", {}).get(OWNER_ANNOTATION)
        if owner != inst.owner:
            holder = f"Installation {owner}" if owner else "something other than the coreio operator"
            raise Refused(
                "ClusterAlreadyInstalled", f"APIService {name} belongs to {holder}; nothing was changed"
            )
    return found


async def observe(
    client: KubeClient, inst: Installation, apiservices: Sequence[JSON | None], *, probe_pods: bool
) -> Observed:
    """Each APIService's caBundle as read, and (when `probe_pods`) what the pods present through the
    Service's ClusterIP, as the aggregator reaches them."""
    bundles = tuple(base64.b64decode((a or {}).get("spec", {}).get("caBundle") or "") for a in apiservices)
    served: tuple[x509.Certificate, ...] = ()
    if probe_pods:
        service = await client.get_or_none(path_of(children.service(inst)))
        address = str((service or {}).get("spec", {}).get("clusterIP") or "")
        if address and address != "None":
            served = await probe.presented_certificates(address, children.SERVICE_PORT, inst.service_host)
    return Observed(bundles, served)


@dataclass(frozen=True)
class _Read:
    """What one reconciliation read for the certificates: the plan, what the cluster holds, and
    the serving Secret the pods mount, as stored."""

    plan: CertificatePlan
    observed: Observed
    serving: JSON | None


async def _serving_secret(client: KubeClient, inst: Installation) -> JSON | None:
    return await client.get_or_none(resource_path("v1", "secrets", inst.namespace, inst.serving_secret))


async def issued_certificates(
    client: KubeClient, inst: Installation, now: datetime.datetime, apiservices: Sequence[JSON | None]
) -> _Read:
    """The operator's own: renews what is due, with rollover steps gated on what the cluster holds,
    and writes the CA Secret."""
    ca = await client.get_or_none(resource_path("v1", "secrets", inst.namespace, inst.ca_secret))
    serving = await _serving_secret(client, inst)
    in_grace = PREVIOUS_CA_CERT in ((ca or {}).get("data") or {})
    observed = await observe(client, inst, apiservices, probe_pods=in_grace)
    plan = plan_certificates(
        ca,
        serving,
        inst.spec.certificates,
        inst.serving_hosts(),
        now=now,
        rng=random.SystemRandom(),
        observed=observed,
    )
    for reason in plan.waiting:
        log.info("Installation %s: %s", inst.owner, reason)
    await apply_all(
        client, [children.secret(inst, inst.ca_secret, "Opaque", plan.ca_data, plan.ca_annotations)]
    )
    return _Read(plan, observed, serving)


async def given_certificates(
    client: KubeClient, inst: Installation, now: datetime.datetime, apiservices: Sequence[JSON | None]
) -> _Read:
    """The user's Secret (spec.certificates.secretName), verified as the aggregator will; Refused
    (nothing touched) when it is missing or would not be trusted."""
    name = inst.spec.certificates.secret_name
    secret = await client.get_or_none(resource_path("v1", "secrets", inst.namespace, name))
    try:
        plan = given.plan_given(secret, name, inst.service_host, now)
    except given.GivenSecretInvalid as exc:
        raise Refused(exc.reason, exc.message) from None
    serving = await _serving_secret(client, inst)
    if _stored_data(serving) != plan.serving_data:
        plan = dataclasses.replace(plan, actions=[f"took serving certificate from Secret {name}"])
    return _Read(plan, await observe(client, inst, apiservices, probe_pods=False), serving)


def _stored_data(secret: JSON | None) -> dict[str, str]:
    data = (secret or {}).get("data") or {}
    return {key: value for key, value in data.items() if key in SERVING_DATA_KEYS}


def _stored_leaves(secret: JSON | None) -> list[x509.Certificate]:
    with contextlib.suppress(ValueError, binascii.Error):
        return x509.load_pem_x509_certificates(base64.b64decode(_stored_data(secret).get(TLS_CERT, "")))
    return []


async def _keep_served(
    client: KubeClient, inst: Installation, read: _Read, apiservices: Sequence[JSON | None]
) -> CertificatePlan:
    observed = read.observed
    if not dropped_from(read.plan, observed.bundles):
        return read.plan
    if not observed.served:
        observed = await observe(client, inst, apiservices, probe_pods=True)
    return keep_served(read.plan, observed, _stored_leaves(read.serving))


async def certificates(
    client: KubeClient, inst: Installation, now: datetime.datetime, apiservices: Sequence[JSON | None]
) -> CertificatePlan:
    """The certificates' plan (`apiservices` as `claim_cluster` read them), then the APIServices
    with its bundle and any CA the pods still present a certificate of. The serving Secret the pods
    mount is written only once every APIService as read verifies it; until then the next
    reconciliation is due at once."""
    source = given_certificates if inst.spec.certificates.secret_name else issued_certificates
    read = await source(client, inst, now, apiservices)
    plan = await _keep_served(client, inst, read, apiservices)
    changed = _stored_data(read.serving) != plan.serving_data
    if not changed or trusted_everywhere(plan, read.observed.bundles, inst.service_host, now):
        serving = children.secret(
            inst, inst.serving_secret, "kubernetes.io/tls", plan.serving_data, plan.serving_annotations
        )
        await client.apply(path_of(serving), serving)
    else:
        log.info(
            "Installation %s: the new serving certificate waits until every caBundle trusts it", inst.owner
        )
        plan = dataclasses.replace(plan, next_due=now)
    expiration = metrics.CERTIFICATE_EXPIRATION
    expiration.labels(inst.owner, "ca").set(plan.ca_not_after.timestamp())
    expiration.labels(inst.owner, "serving").set(plan.serving_not_after.timestamp())
    # The APIServices right after the Secrets: a child failing further on must not keep the next
    # CA out of the caBundle (promotion waits for it, see `Observed`).
    await apply_all(client, children.api_services(inst, plan.ca_bundle))
    return plan


async def apply_all(client: KubeClient, objects: Sequence[JSON]) -> None:
    for obj in objects:
        await client.apply(path_of(obj), obj)


def desired(inst: Installation, ca_bundle: bytes) -> list[JSON]:
    """Every child but the Secrets, in the order they are needed."""
    objects = [children.service_account(inst), *children.rbac(inst), children.service(inst)]
    if inst.spec.storage.type == "sqlite":
        objects.append(children.data_claim(inst))
    objects.append(children.deployment(inst))
    if inst.spec.replicas > 1:
        objects.append(children.disruption_budget(inst))
    return objects + children.api_services(inst, ca_bundle)  # applied early too, by `certificates`


async def _create_claim(client: KubeClient, claim: JSON) -> JSON | None:
    """Creates the claim once (its spec is immutable but for a larger size); returns the existing
    one, or None when it was just created."""
    existing = await client.get_or_none(path_of(claim))
    if existing is None:
        await client.create(path_of(claim).rsplit("/", 1)[0], claim)
    return existing


async def _resize_claim(client: KubeClient, claim: JSON, existing: JSON) -> None:
    """Asks for the spec's size when it differs from the claim's. kube-apiserver refuses what the
    storage cannot do (shrinking; a class without volume expansion), and its answer becomes the
    reconcile's error on the Installation's Ready condition, never a silent no-op."""
    wanted = claim["spec"]["resources"]["requests"]["storage"]
    current = existing.get("spec", {}).get("resources", {}).get("requests", {}).get("storage", "0")
    if parse_quantity(wanted) != parse_quantity(current):
        await client.merge_patch(path_of(claim), {"spec": {"resources": {"requests": {"storage": wanted}}}})


async def apply_children(client: KubeClient, inst: Installation, ca_bundle: bytes) -> None:
    claims: list[tuple[JSON, JSON]] = []
    for obj in desired(inst, ca_bundle):
        if obj["kind"] != "PersistentVolumeClaim":
            await client.apply(path_of(obj), obj)
        elif (existing := await _create_claim(client, obj)) is not None:
            claims.append((obj, existing))
    if inst.spec.replicas <= 1:
        await client.delete(path_of(children.disruption_budget(inst)))
    if not inst.spec.event_export.enabled:
        # Registered while it was enabled: the aggregator would send its requests to a server that
        # no longer serves the version, and discovery would report the group version failing.
        alpha = children.api_service(inst, children.ALPHA_GROUP, children.ALPHA_VERSION, b"")
        await _delete_owned(client, alpha, inst)
    for claim, existing in claims:  # last: a refused resize holds no other child back
        await _resize_claim(client, claim, existing)


def _every(count: int) -> str:
    return "both" if count == 2 else f"all {count}"


async def availability(client: KubeClient, names: Sequence[str]) -> tuple[str, str, str]:
    """(status, reason, message) of the Available condition: the APIServices' own (`names`)."""
    states = []
    for name in names:
        obj = await client.get_or_none(_apiservice_path(name))
        conditions = (obj or {}).get("status", {}).get("conditions", [])
        state: JSON = next((c for c in conditions if c.get("type") == "Available"), {})
        states.append((name, str(state.get("status", "Unknown")), str(state.get("message", ""))))
    if all(status == "True" for _, status, _ in states):
        return "True", "APIServicesAvailable", f"{_every(len(states))} APIServices are Available"
    missing = "; ".join(
        f"{name}: {message or status}" for name, status, message in states if status != "True"
    )
    return "False", "APIServiceNotAvailable", missing


async def reconcile(
    client: KubeClient, body: JSON, now: datetime.datetime, default_image: str = ""
) -> Outcome:
    """Raises Refused (nothing touched) or ApiError (retried by the caller)."""
    inst = installation(body, default_image)
    apiservices = await claim_cluster(client, inst)
    outcome = Outcome()
    outcome.certificates = await certificates(client, inst, now, apiservices)
    outcome.actions += outcome.certificates.actions
    await apply_children(client, inst, outcome.certificates.ca_bundle)
    outcome.available = await availability(client, children.apiservice_names(inst))
    return outcome


async def _delete_owned(client: KubeClient, obj: JSON, inst: Installation) -> bool:
    """Deletes a fixed-name child only when this Installation owns it."""
    existing = await client.get_or_none(path_of(obj))
    if existing is None or existing["metadata"].get("annotations", {}).get(OWNER_ANNOTATION) != inst.owner:
        return False
    return await client.delete(path_of(obj))


async def remove_children(client: KubeClient, inst: Installation) -> list[str]:
    """Deletes every child but the data claim (kept, as a StatefulSet keeps its volumes)."""
    for certificate in ("ca", "serving"):
        with contextlib.suppress(KeyError):  # never written by this process
            metrics.CERTIFICATE_EXPIRATION.remove(inst.owner, certificate)
    removed = []
    fixed = [*children.api_services(inst, b"", every=True), *children.rbac(inst)]
    for obj in fixed:
        if await _delete_owned(client, obj, inst):
            removed.append(f"{obj['kind']} {obj['metadata']['name']}")
    owned = [
        children.deployment(inst),
        children.disruption_budget(inst),
        children.service(inst),
        children.service_account(inst),
        children.secret(inst, inst.serving_secret, "kubernetes.io/tls", {}, {}),
        children.secret(inst, inst.ca_secret, "Opaque", {}, {}),
    ]
    for obj in owned:
        try:
            if await _delete_owned(client, obj, inst):
                removed.append(f"{obj['kind']} {obj['metadata']['name']}")
        except ApiError as exc:
            if exc.status != 404:
                raise
    return removed
