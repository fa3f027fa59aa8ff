"""The certificates of an Installation: a CA of its own, and the serving certificate it signs.

Why two tiers: the kube-aggregator checks coreio's serving certificate against the `caBundle` of the
APIServices. A serving certificate renewed under the same CA changes nothing the aggregator holds, so
leaves can be short-lived and renewed at any moment. Only a new CA touches the bundle, and the
aggregator (watching APIServices) and the pods (reading the serving Secret from a volume, which the
kubelet refreshes with a delay) see changes at different times. So a CA is replaced in three steps,
each on a later call and a grace period apart, in which both sides catch up:

a. announce: a next CA joins the bundle; nothing is signed by it yet;
b. promote: it becomes the current CA and the serving certificate is reissued from it at once; the old
   CA stays in the bundle, since pods present the old serving certificate until their volume updates;
c. drop: a grace period later, the old CA leaves the bundle.

Whichever serving certificate a pod presents (the one of this step or the last) is then signed by a
CA in whichever bundle the aggregator holds (the one of this step or the last): no handshake fails.

The clock alone does not advance a rollover: the operator reads back what the cluster holds
(`Observed`) and a step waits until it is safe. Promotion waits until every APIService's caBundle
holds the next CA (a child that keeps failing, or an APIService someone reverted, must not leave the
pods serving a certificate the aggregator does not trust), and the previous CA is dropped only once
the pods serve certificates of the current one (a kubelet slower than the grace period must not
leave them presenting one the new bundle lacks). Where nothing answers, the clock decides.

Everything is a function of the two Secrets, what was observed and `now`: the operator reads them, calls
`plan_certificates` and writes back what it gets. No state lives elsewhere, so a restarted operator
carries on where the last one stopped, and a second call at the same moment changes nothing.
Renewal times carry random jitter, drawn once at issue and stored, so that installations created
together do not renew together. Stored times are rounded up to whole seconds, so that the value read
back equals the one computed (and a time is never moved earlier).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from apiserver import pki
from apiserver.machinery.types import JSON
from apiserver_operator.spec import Certificates

ANNOTATION_PREFIX = "operator.core.io/"
CA_RENEW_AFTER = f"{ANNOTATION_PREFIX}ca-renew-after"
NEXT_CA_ANNOUNCED_AT = f"{ANNOTATION_PREFIX}next-ca-announced-at"
PREVIOUS_CA_UNTIL = f"{ANNOTATION_PREFIX}previous-ca-until"
RENEW_AFTER = f"{ANNOTATION_PREFIX}renew-after"

CA_CERT, CA_KEY = "ca.crt", "ca.key"
NEXT_CA_CERT, NEXT_CA_KEY = "next-ca.crt", "next-ca.key"
PREVIOUS_CA_CERT = "previous-ca.crt"
TLS_CERT, TLS_KEY, TRUST_BUNDLE = "tls.crt", "tls.key", "ca.crt"

# The keys this module manages: the plan holds those present; the caller removes the others.
CA_DATA_KEYS = (CA_CERT, CA_KEY, NEXT_CA_CERT, NEXT_CA_KEY, PREVIOUS_CA_CERT)
CA_ANNOTATION_KEYS = (CA_RENEW_AFTER, NEXT_CA_ANNOUNCED_AT, PREVIOUS_CA_UNTIL)
SERVING_DATA_KEYS = (TLS_CERT, TLS_KEY, TRUST_BUNDLE)
SERVING_ANNOTATION_KEYS = (RENEW_AFTER,)

# At most this share of a certificate's lifetime is taken off its renewal time, at random.
JITTER = 0.05

Phase = Literal["", "announced", "grace"]
UTC = datetime.UTC
# Placeholder for a time that means nothing yet (see `_CA`).
_NEVER = datetime.datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Observed:
    """What the cluster holds, read just before planning: each APIService's caBundle (empty where
    it is missing), and the leaf certificates the API server's pods presented through the Service
    (none: nothing answered, so the clock decides)."""

    bundles: tuple[bytes, ...]
    served: tuple[x509.Certificate, ...] = ()

    def all_trust(self, ca: x509.Certificate) -> bool:
        return bool(self.bundles) and all(ca in _certificates(bundle) for bundle in self.bundles)

    def all_served_by(self, ca: x509.Certificate) -> bool:
        return all(pki.is_signed_by(leaf, ca) for leaf in self.served)


@dataclass(frozen=True)
class CertificatePlan:
    """What the two Secrets and the APIServices should hold after one call.

    `*_data` and `*_annotations` hold the keys of `CA_DATA_KEYS` etc. that should exist; the caller
    removes the others (e.g. `next-ca-announced-at` once the next CA is promoted)."""

    ca_data: dict[str, str]
    ca_annotations: dict[str, str]
    serving_data: dict[str, str]
    serving_annotations: dict[str, str]
    ca_bundle: bytes
    actions: list[str]
    ca_not_after: datetime.datetime
    ca_renew_after: datetime.datetime
    serving_not_after: datetime.datetime
    serving_renew_after: datetime.datetime
    rollover: Phase
    next_due: datetime.datetime
    # Rollover steps due by the clock but held back by what was observed (for the log).
    waiting: tuple[str, ...] = ()
    # "operator": issued and renewed here; "secret": from spec.certificates.secretName (whose
    # renewal times here are its ends: the operator renews nothing).
    source: Literal["operator", "secret"] = "operator"

    def status(self) -> dict[str, Any]:
        """For the Installation's `status.certificates`."""
        status: dict[str, Any] = {
            "caNotAfter": format_time(self.ca_not_after),
            "servingNotAfter": format_time(self.serving_not_after),
        }
        if self.source == "operator":  # the user's issuer renews theirs, when it will
            status["caRenewAfter"] = format_time(self.ca_renew_after)
            status["servingRenewAfter"] = format_time(self.serving_renew_after)
        return status | {"rollover": self.rollover, "source": self.source}


def plan_certificates(
    ca_secret: JSON | None,
    serving_secret: JSON | None,
    spec: Certificates,
    hosts: Sequence[str],
    *,
    now: datetime.datetime,
    rng: random.Random,
    observed: Observed | None = None,
) -> CertificatePlan:
    """The Secrets' next contents at `now` (timezone-aware), for a serving certificate for `hosts`;
    rollover steps wait for `observed` (None: by the clock alone)."""
    names = pki.normalize_hosts(hosts)
    if not names:
        raise ValueError("a serving certificate needs at least one host")
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    run = _Run(spec, now.astimezone(UTC), rng, observed)
    ca = run.load_ca(*_contents(ca_secret))
    run.advance_rollover(ca)
    serving = run.serving(ca.current, *_contents(serving_secret), names)
    return run.plan(ca, serving, ca_secret, serving_secret)


def chain_error(
    chain: Sequence[x509.Certificate], cas: Sequence[x509.Certificate], host: str, now: datetime.datetime
) -> str:
    """Why `chain` (a leaf, then intermediates) fails verification for `host` at `now` up to one of
    `cas`, as the aggregator verifies it (cryptography's X.509 verifier builds the path and checks
    the names as Go's crypto/x509 does); "" when it verifies."""
    if not cas:
        return "no CA to verify with"
    verifier = PolicyBuilder().store(Store(list(cas))).time(now).build_server_verifier(x509.DNSName(host))
    try:
        verifier.verify(chain[0], list(chain[1:]))
    except VerificationError as exc:
        return str(exc)
    return ""


def serving_chain(plan: CertificatePlan) -> list[x509.Certificate]:
    return _certificates(base64.b64decode(plan.serving_data[TLS_CERT]))


def trusted_everywhere(
    plan: CertificatePlan, bundles: Sequence[bytes], host: str, now: datetime.datetime
) -> bool:
    """Whether every bundle as read (each APIService's) already verifies the plan's serving chain:
    only then may the pods be given it."""
    chain = serving_chain(plan)
    return bool(bundles) and all(not chain_error(chain, _certificates(b), host, now) for b in bundles)


def keep_served(
    plan: CertificatePlan, observed: Observed, stored: Sequence[x509.Certificate]
) -> CertificatePlan:
    """The plan, its bundle extended by each CA the APIServices trusted as read that signed a
    certificate the pods still present (`observed.served`) or were last given (`stored`): moving
    from or to certificates the user brings, or to a new CA of theirs, must not leave the
    aggregator without trust while the pods catch up."""
    planned = _certificates(plan.ca_bundle)
    leaves = [*observed.served, *stored]
    kept: list[x509.Certificate] = []
    for bundle in observed.bundles:
        for ca in _certificates(bundle):
            if ca not in planned and ca not in kept and any(pki.is_signed_by(leaf, ca) for leaf in leaves):
                kept.append(ca)
    if not kept:
        return plan
    return dataclasses.replace(plan, ca_bundle=plan.ca_bundle + b"".join(_pem(ca) for ca in kept))


def dropped_from(plan: CertificatePlan, bundles: Sequence[bytes]) -> bool:
    """True when a CA of the bundles as read is not in the plan's (then `keep_served` needs to know
    what the pods present)."""
    planned = _certificates(plan.ca_bundle)
    return any(ca not in planned for bundle in bundles for ca in _certificates(bundle))


# --- time ---------------------------------------------------------------------------------------


def format_time(moment: datetime.datetime) -> str:
    """RFC 3339 in UTC, whole seconds, as Kubernetes writes times."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ceil(moment: datetime.datetime) -> datetime.datetime:
    if not moment.microsecond:
        return moment
    return moment.replace(microsecond=0) + datetime.timedelta(seconds=1)


def _parse_time(value: object) -> datetime.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    # A time without zone is no time we wrote; treat it as missing rather than guess.
    return _ceil(moment.astimezone(UTC)) if moment.tzinfo else None


def _renew_after(
    issued_at: datetime.datetime, not_after: datetime.datetime, percent: int, rng: random.Random
) -> datetime.datetime:
    # percent >= 10 (the spec's bound) and the jitter <= 5%: always after `issued_at`.
    share = percent / 100 - rng.uniform(0, JITTER)
    return _ceil(issued_at + (not_after - issued_at) * share)


# --- Secret contents ----------------------------------------------------------------------------


def _contents(secret: JSON | None) -> tuple[dict[str, bytes], dict[str, str]]:
    """The decoded data (undecodable values left out, as if missing) and the annotations."""
    data: dict[str, bytes] = {}
    for key, value in ((secret or {}).get("data") or {}).items():
        if isinstance(value, str):
            try:
                data[key] = base64.b64decode(value, validate=True)
            except binascii.Error:
                continue
    annotations = ((secret or {}).get("metadata") or {}).get("annotations") or {}
    return data, {k: v for k, v in annotations.items() if isinstance(v, str)}


def _stored(
    secret: JSON | None, data_keys: Sequence[str], annotation_keys: Sequence[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The managed keys of the Secret's data and annotations, as stored (still base64)."""
    data = (secret or {}).get("data") or {}
    annotations = ((secret or {}).get("metadata") or {}).get("annotations") or {}
    return (
        {k: v for k, v in data.items() if k in data_keys},
        {k: v for k, v in annotations.items() if k in annotation_keys},
    )


def _certificates(bundle: bytes) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(bundle)
    except ValueError:
        return []


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _pair(data: Mapping[str, bytes], cert_key: str, key_key: str) -> pki.KeyPair | None:
    if cert_key not in data or key_key not in data:
        return None
    try:
        return pki.KeyPair.from_pem(data[cert_key], data[key_key])
    except ValueError:
        return None


def _certificate(data: Mapping[str, bytes], key: str) -> x509.Certificate | None:
    try:
        return x509.load_pem_x509_certificate(data[key])
    except (KeyError, ValueError):
        return None


# --- state --------------------------------------------------------------------------------------


@dataclass
class _CA:
    """The CA Secret's state: the current CA and, during a rollover, the next or the previous one."""

    current: pki.KeyPair
    renew_after: datetime.datetime
    # The times mean something only while their certificate is set.
    next: pki.KeyPair | None = None
    next_at: datetime.datetime = _NEVER
    previous: x509.Certificate | None = None
    previous_until: datetime.datetime = _NEVER

    @property
    def phase(self) -> Phase:
        return "announced" if self.next else "grace" if self.previous else ""

    def rollover_due(self, grace: datetime.timedelta) -> datetime.datetime:
        # The CA's end forces a rollover two grace periods early, so that the promotion (one grace
        # later) still happens while the old CA, and the serving certificate it signed, are valid.
        return min(self.renew_after, self.current.certificate.not_valid_after_utc - 2 * grace)

    def next_due(self, grace: datetime.timedelta) -> datetime.datetime:
        due = [self.next_at + grace] if self.next else []
        due += [self.previous_until] if self.previous else []
        return min(due) if due else self.rollover_due(grace)

    def bundle(self) -> bytes:
        certificates = [self.current.certificate]
        certificates += [self.next.certificate] if self.next else []
        certificates += [self.previous] if self.previous else []
        return b"".join(_pem(c) for c in certificates)

    def data(self) -> dict[str, str]:
        data = {CA_CERT: _b64(self.current.cert_pem), CA_KEY: _b64(self.current.key_pem)}
        if self.next:
            data |= {NEXT_CA_CERT: _b64(self.next.cert_pem), NEXT_CA_KEY: _b64(self.next.key_pem)}
        if self.previous:
            data[PREVIOUS_CA_CERT] = _b64(_pem(self.previous))
        return data

    def annotations(self) -> dict[str, str]:
        annotations = {CA_RENEW_AFTER: format_time(self.renew_after)}
        if self.next:
            annotations[NEXT_CA_ANNOUNCED_AT] = format_time(self.next_at)
        if self.previous:
            annotations[PREVIOUS_CA_UNTIL] = format_time(self.previous_until)
        return annotations


@dataclass(frozen=True)
class _Serving:
    pair: pki.KeyPair
    renew_after: datetime.datetime


@dataclass
class _Run:
    """One call: the spec, the moment, the randomness and what was done."""

    spec: Certificates
    now: datetime.datetime
    rng: random.Random
    observed: Observed | None = None
    actions: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)

    @property
    def grace(self) -> datetime.timedelta:
        return datetime.timedelta(seconds=self.spec.ca_grace_seconds)

    def renew_after(self, issued_at: datetime.datetime, certificate: x509.Certificate) -> datetime.datetime:
        return _renew_after(issued_at, certificate.not_valid_after_utc, self.spec.renew_at_percent, self.rng)

    def new_ca(self) -> pki.KeyPair:
        # A distinct name per CA (as kube-apiserver's own `...-ca@<seconds>`) keeps old and new
        # apart in logs and for clients that pick an issuer by name.
        return pki.create_ca(
            f"coreio-ca@{int(self.now.timestamp())}",
            lifetime=datetime.timedelta(seconds=self.spec.ca_lifetime_seconds),
            now=self.now,
        )

    # --- the CA ---

    def load_ca(self, data: dict[str, bytes], annotations: dict[str, str]) -> _CA:
        current = _pair(data, CA_CERT, CA_KEY)
        if current is None or self.now >= current.certificate.not_valid_after_utc:
            # Nothing to roll over from: an expired CA already fails every handshake, and without
            # a readable one there is nothing to keep trusting.
            self.actions.append("issued CA" if current is None else "replaced expired CA")
            ca = self.new_ca()
            return _CA(ca, self.renew_after(self.now, ca.certificate))
        renew_after = _parse_time(annotations.get(CA_RENEW_AFTER))
        if renew_after is None:
            # The issue moment is lost; notBefore (backdated) is close and errs on the early side.
            renew_after = self.renew_after(current.certificate.not_valid_before_utc, current.certificate)
        state = _CA(current, renew_after)
        self._load_next(state, data, annotations)
        self._load_previous(state, data, annotations)
        return state

    def _load_next(self, state: _CA, data: dict[str, bytes], annotations: dict[str, str]) -> None:
        state.next = _pair(data, NEXT_CA_CERT, NEXT_CA_KEY)
        announced = _parse_time(annotations.get(NEXT_CA_ANNOUNCED_AT))
        if state.next is None:
            if NEXT_CA_CERT in data or NEXT_CA_KEY in data:
                self.actions.append("dropped unreadable next CA")
        elif announced is None:
            # Unknown since when aggregators trust it: count the grace period from now.
            self.actions.append("announced next CA")
            state.next_at = _ceil(self.now)
        else:
            state.next_at = announced

    def _load_previous(self, state: _CA, data: dict[str, bytes], annotations: dict[str, str]) -> None:
        state.previous = _certificate(data, PREVIOUS_CA_CERT)
        until = _parse_time(annotations.get(PREVIOUS_CA_UNTIL))
        if state.previous is None:
            if PREVIOUS_CA_CERT in data:
                self.actions.append("dropped unreadable previous CA")
        else:
            # Without a deadline, pods may still present a certificate it signed: a full grace period.
            state.previous_until = until or _ceil(self.now + self.grace)

    def advance_rollover(self, ca: _CA) -> None:
        """At most one step of each kind; announce and promote never in the same call."""
        if ca.previous is not None and self.now >= ca.previous_until and self._served_by(ca.current):
            ca.previous = None
            self.actions.append("dropped previous CA")
        if ca.next is not None and self.now >= ca.next_at + self.grace and self._trusted(ca.next):
            ca.previous, ca.previous_until = ca.current.certificate, _ceil(self.now + self.grace)
            ca.current, ca.next = ca.next, None
            ca.renew_after = self.renew_after(ca.next_at, ca.current.certificate)
            self.actions.append("promoted next CA")
        elif ca.next is None and ca.previous is None and self.now >= ca.rollover_due(self.grace):
            ca.next, ca.next_at = self.new_ca(), _ceil(self.now)
            self.actions.append("announced next CA")

    def _trusted(self, ca: pki.KeyPair) -> bool:
        if self.observed is None or self.observed.all_trust(ca.certificate):
            return True
        self.waiting.append("promotion waits until every APIService's caBundle holds the next CA")
        return False

    def _served_by(self, ca: pki.KeyPair) -> bool:
        if self.observed is None or self.observed.all_served_by(ca.certificate):
            return True
        self.waiting.append("the previous CA stays until the pods serve certificates of the current one")
        return False

    # --- the serving certificate ---

    def serving(
        self, ca: pki.KeyPair, data: dict[str, bytes], annotations: dict[str, str], hosts: list[str]
    ) -> _Serving:
        pair = _pair(data, TLS_CERT, TLS_KEY)
        renew_after = _parse_time(annotations.get(RENEW_AFTER))
        kept = self._keep_serving(pair, renew_after, ca.certificate, hosts)
        if isinstance(kept, _Serving):
            return kept
        self.actions.append(kept)
        return self._issue_serving(ca, hosts)

    def _keep_serving(
        self,
        pair: pki.KeyPair | None,
        renew_after: datetime.datetime | None,
        ca: x509.Certificate,
        hosts: list[str],
    ) -> _Serving | str:
        """The serving state if it can stay, else why it is reissued (the action)."""
        if pair is None:
            return "issued serving certificate"
        certificate = pair.certificate
        if not pki.is_signed_by(certificate, ca):
            return "moved serving certificate to new CA"
        if pki.certificate_hosts(certificate) != hosts:
            return "reissued serving certificate for new hosts"
        valid = certificate.not_valid_before_utc <= self.now < certificate.not_valid_after_utc
        if not valid or certificate.not_valid_after_utc > ca.not_valid_after_utc:
            return "replaced invalid serving certificate"
        if renew_after is None or self.now >= renew_after:
            return "renewed serving certificate"
        return _Serving(pair, renew_after)

    def _issue_serving(self, ca: pki.KeyPair, hosts: list[str]) -> _Serving:
        # Never beyond the CA: a leaf outliving its issuer would fail verification before its end.
        lifetime = min(
            datetime.timedelta(seconds=self.spec.serving_lifetime_seconds),
            ca.certificate.not_valid_after_utc - self.now,
        )
        pair = pki.issue_serving_certificate(ca, hosts, common_name=hosts[0], lifetime=lifetime, now=self.now)
        return _Serving(pair, self.renew_after(self.now, pair.certificate))

    # --- the result ---

    def plan(
        self, ca: _CA, serving: _Serving, ca_secret: JSON | None, serving_secret: JSON | None
    ) -> CertificatePlan:
        bundle = ca.bundle()
        serving_data = {
            TLS_CERT: _b64(serving.pair.cert_pem),
            TLS_KEY: _b64(serving.pair.key_pem),
            TRUST_BUNDLE: _b64(bundle),
        }
        serving_annotations = {RENEW_AFTER: format_time(serving.renew_after)}
        ca_data, ca_annotations = ca.data(), ca.annotations()
        # Whatever else differs from what was stored (a missing annotation, a key in another PEM
        # format) is a change too: `actions` is empty exactly when the caller has nothing to write.
        self._note_repair(ca_secret, ca_data, ca_annotations, CA_DATA_KEYS, CA_ANNOTATION_KEYS, "CA")
        self._note_repair(
            serving_secret,
            serving_data,
            serving_annotations,
            SERVING_DATA_KEYS,
            SERVING_ANNOTATION_KEYS,
            "serving",
        )
        return CertificatePlan(
            ca_data=ca_data,
            ca_annotations=ca_annotations,
            serving_data=serving_data,
            serving_annotations=serving_annotations,
            ca_bundle=bundle,
            actions=self.actions,
            ca_not_after=ca.current.certificate.not_valid_after_utc,
            ca_renew_after=ca.renew_after,
            serving_not_after=serving.pair.certificate.not_valid_after_utc,
            serving_renew_after=serving.renew_after,
            rollover=ca.phase,
            next_due=min(ca.next_due(self.grace), serving.renew_after),
            waiting=tuple(self.waiting),
        )

    def _note_repair(
        self,
        secret: JSON | None,
        data: dict[str, str],
        annotations: dict[str, str],
        data_keys: Sequence[str],
        annotation_keys: Sequence[str],
        name: str,
    ) -> None:
        if not self.actions and _stored(secret, data_keys, annotation_keys) != (data, annotations):
            self.actions.append(f"repaired {name} Secret")
