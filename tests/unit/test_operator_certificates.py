"""The operator's two-tier certificate lifecycle, driven with a simulated clock.

Trust is checked as a TLS client would: RFC 5280 path validation (cryptography's verifier, at the
simulated moment) and, where the real clock allows, a real TLS handshake between `ssl` contexts.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import itertools
import random
import ssl
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from apiserver import pki
from apiserver_operator import certificates as certs
from apiserver_operator.certificates import CertificatePlan, plan_certificates
from apiserver_operator.spec import Certificates

SPEC = Certificates(ca_lifetime="1h", serving_lifetime="10m", ca_grace_period="1m")
HOSTS = ["coreio.coreio-system.svc", "coreio.coreio-system", "10.96.0.10"]
T0 = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
SECOND = datetime.timedelta(seconds=1)
MINUTE = datetime.timedelta(minutes=1)


# --- helpers ----------------------------------------------------------------------------------


def secret(data: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "x", "annotations": dict(annotations)}, "data": dict(data)}


@dataclass
class Cluster:
    """The two Secrets as the caller stores them between calls."""

    spec: Certificates = SPEC
    seed: int = 0
    ca_secret: dict[str, Any] | None = None
    serving_secret: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)  # one for all calls, as the operator keeps one

    def call(
        self, now: datetime.datetime, hosts: list[str] = HOSTS, observed: certs.Observed | None = None
    ) -> CertificatePlan:
        plan = plan_certificates(
            self.ca_secret, self.serving_secret, self.spec, hosts, now=now, rng=self.rng, observed=observed
        )
        self.ca_secret = secret(plan.ca_data, plan.ca_annotations)
        self.serving_secret = secret(plan.serving_data, plan.serving_annotations)
        return plan


def decoded(data: dict[str, str], key: str) -> bytes:
    return base64.b64decode(data[key])


def encoded(data: bytes) -> str:
    return base64.b64encode(data).decode()


def serving_certificate(plan: CertificatePlan) -> x509.Certificate:
    return x509.load_pem_x509_certificate(decoded(plan.serving_data, certs.TLS_CERT))


def ca_certificate(plan: CertificatePlan) -> x509.Certificate:
    return x509.load_pem_x509_certificate(decoded(plan.ca_data, certs.CA_CERT))


def bundle(plan: CertificatePlan) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(plan.ca_bundle)


def _general_name(host: str) -> x509.DNSName | x509.IPAddress:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def trusted(leaf: x509.Certificate, anchors: list[x509.Certificate], now: datetime.datetime) -> bool:
    """Full server-certificate path validation against `anchors` at `now`, for every host."""
    for host in HOSTS:
        verifier = PolicyBuilder().store(Store(anchors)).time(now).build_server_verifier(_general_name(host))
        try:
            verifier.verify(leaf, [])
        except VerificationError:
            return False
    return True


def assert_idempotent(cluster: Cluster, plan: CertificatePlan, now: datetime.datetime) -> None:
    again = cluster.call(now)
    assert again.actions == []
    assert again == replace(plan, actions=[])


def handshake(server: ssl.SSLContext, client: ssl.SSLContext, hostname: str) -> bytes:
    """A TLS handshake between two `ssl` contexts over memory BIOs; the server's certificate (DER)."""
    client_in, client_out, server_in, server_out = (ssl.MemoryBIO() for _ in range(4))
    server_end = server.wrap_bio(server_in, server_out, server_side=True)
    client_end = client.wrap_bio(client_in, client_out, server_hostname=hostname)
    pending = [client_end, server_end]
    for _ in range(10):
        for end in list(pending):
            try:
                end.do_handshake()
                pending.remove(end)
            except ssl.SSLWantReadError:
                pass
        server_in.write(client_out.read())
        client_in.write(server_out.read())
        if not pending:
            peer = client_end.getpeercert(binary_form=True)
            assert peer is not None
            return peer
    raise AssertionError("handshake did not finish")


def server_context(plan: CertificatePlan, directory: Path) -> ssl.SSLContext:
    (directory / "tls.crt").write_bytes(decoded(plan.serving_data, certs.TLS_CERT))
    (directory / "tls.key").write_bytes(decoded(plan.serving_data, certs.TLS_KEY))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "tls.crt", directory / "tls.key")
    return context


# --- first call, idempotence ------------------------------------------------------------------


def test_first_call_creates_ca_and_serving_certificate() -> None:
    plan = Cluster().call(T0)
    assert plan.actions == ["issued CA", "issued serving certificate"]
    assert set(plan.ca_data) == {"ca.crt", "ca.key"}
    assert set(plan.serving_data) == {"tls.crt", "tls.key", "ca.crt"}
    assert set(plan.ca_annotations) == {"operator.core.io/ca-renew-after"}
    assert set(plan.serving_annotations) == {"operator.core.io/renew-after"}
    ca, leaf = ca_certificate(plan), serving_certificate(plan)
    # The bundle is exactly the CA, and the serving Secret carries the same bundle.
    assert bundle(plan) == [ca]
    assert decoded(plan.serving_data, "ca.crt") == plan.ca_bundle
    assert pki.is_signed_by(leaf, ca)
    assert trusted(leaf, bundle(plan), T0)
    assert pki.certificate_hosts(leaf) == HOSTS
    assert leaf.subject.rfc4514_string() == f"CN={HOSTS[0]}"
    assert (plan.ca_not_after, plan.serving_not_after) == (T0 + 60 * MINUTE, T0 + 10 * MINUTE)
    assert plan.rollover == ""
    assert plan.next_due == plan.serving_renew_after < plan.ca_renew_after
    # Each stored key belongs to its certificate (from_pem raises otherwise).
    pki.KeyPair.from_pem(decoded(plan.ca_data, "ca.crt"), decoded(plan.ca_data, "ca.key"))
    pki.KeyPair.from_pem(decoded(plan.serving_data, "tls.crt"), decoded(plan.serving_data, "tls.key"))


def test_first_call_serving_certificate_passes_a_real_tls_handshake(tmp_path: Path) -> None:
    now = datetime.datetime.now(datetime.UTC)  # ssl checks validity against the real clock
    plan = Cluster().call(now)
    client = ssl.create_default_context(cadata=plan.ca_bundle.decode())
    for host in HOSTS:
        peer = handshake(server_context(plan, tmp_path), client, host)
        assert x509.load_der_x509_certificate(peer) == serving_certificate(plan)
    # The check has teeth: another installation's bundle, or a host not in the SANs, fails.
    stranger = ssl.create_default_context(cadata=Cluster().call(now).ca_bundle.decode())
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server_context(plan, tmp_path), stranger, HOSTS[0])
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server_context(plan, tmp_path), client, "elsewhere.example.com")


def test_second_call_at_the_same_moment_changes_nothing() -> None:
    cluster = Cluster()
    plan = cluster.call(T0)
    assert_idempotent(cluster, plan, T0)
    later = T0 + 3 * MINUTE
    assert_idempotent(cluster, replace(plan, actions=[]), later)
    assert plan.status() == {
        "caNotAfter": "2030-01-01T01:00:00Z",
        "caRenewAfter": certs.format_time(plan.ca_renew_after),
        "servingNotAfter": "2030-01-01T00:10:00Z",
        "servingRenewAfter": certs.format_time(plan.serving_renew_after),
        "rollover": "",
        "source": "operator",
    }


def test_input_validation() -> None:
    with pytest.raises(ValueError, match="host"):
        plan_certificates(None, None, SPEC, [" "], now=T0, rng=random.Random(0))
    with pytest.raises(ValueError, match="timezone"):
        plan_certificates(None, None, SPEC, HOSTS, now=T0.replace(tzinfo=None), rng=random.Random(0))


# --- serving renewal --------------------------------------------------------------------------


def test_serving_renewal_at_its_threshold_keeps_ca_and_bundle() -> None:
    cluster = Cluster()
    first = cluster.call(T0)
    due = first.serving_renew_after
    assert cluster.call(due - SECOND).actions == []
    renewed = cluster.call(due)
    assert renewed.actions == ["renewed serving certificate"]
    # The point of two tiers: a new leaf, the same CA, so nothing the aggregator holds changes.
    assert renewed.ca_data == first.ca_data
    assert renewed.ca_annotations == first.ca_annotations
    assert renewed.ca_bundle == first.ca_bundle
    assert renewed.serving_data["ca.crt"] == first.serving_data["ca.crt"]
    assert renewed.serving_data["tls.crt"] != first.serving_data["tls.crt"]
    assert renewed.serving_data["tls.key"] != first.serving_data["tls.key"]
    assert trusted(serving_certificate(renewed), bundle(first), due)
    assert renewed.serving_not_after == due + 10 * MINUTE
    assert renewed.serving_renew_after > due
    assert_idempotent(cluster, renewed, due)


def test_expired_serving_certificate_is_renewed() -> None:
    cluster = Cluster()
    first = cluster.call(T0)
    # No call happened for a while (the operator was down): past its renewal time and its end.
    late = first.serving_not_after + MINUTE
    cluster.serving_secret = secret(first.serving_data, {})  # and the renewal time was lost, too
    plan = cluster.call(late)
    assert plan.actions == ["replaced invalid serving certificate"]
    assert trusted(serving_certificate(plan), bundle(plan), late)


@pytest.mark.parametrize("percent", [10, 67, 95])
def test_renewal_jitter_stays_within_bounds_and_differs_across_seeds(percent: int) -> None:
    spec = Certificates(
        ca_lifetime="1h", serving_lifetime="10m", ca_grace_period="1m", renew_at_percent=percent
    )
    serving_times: set[datetime.datetime] = set()
    ca_times: set[datetime.datetime] = set()
    for seed in range(20):
        plan = Cluster(spec, seed).call(T0)
        for lifetime, renew_after, seen in (
            (10 * MINUTE, plan.serving_renew_after, serving_times),
            (60 * MINUTE, plan.ca_renew_after, ca_times),
        ):
            # Taken off the renewal time: at most 5% of the lifetime (times are rounded up to seconds).
            assert (
                T0 + lifetime * (percent - 5) / 100 <= renew_after <= T0 + lifetime * percent / 100 + SECOND
            )
            seen.add(renew_after)
    assert len(serving_times) > 5 and len(ca_times) > 5
    # The same seed draws the same times.
    assert Cluster(spec, 3).call(T0).ca_renew_after == Cluster(spec, 3).call(T0).ca_renew_after


# --- CA rollover ------------------------------------------------------------------------------


@dataclass
class Step:
    now: datetime.datetime
    plan: CertificatePlan


def walk(cluster: Cluster, until: datetime.datetime, step: datetime.timedelta | None) -> list[Step]:
    """Calls from T0 to `until`: at each plan's `next_due`, or every `step`."""
    steps = [Step(T0, cluster.call(T0))]
    while True:
        now = steps[-1].plan.next_due if step is None else steps[-1].now + step
        if now > until:
            return steps
        steps.append(Step(now, cluster.call(now)))
        assert_idempotent(cluster, steps[-1].plan, now)


def ca_step(steps: list[Step], action: str) -> int:
    return next(i for i, s in enumerate(steps) if action in s.plan.actions)


@pytest.mark.parametrize("step", [None, 20 * SECOND], ids=["at-next-due", "every-20s"])
def test_ca_rollover_never_fails_a_handshake(step: datetime.timedelta | None) -> None:
    cluster = Cluster()
    steps = walk(cluster, T0 + 50 * MINUTE, step)
    for before, after in itertools.pairwise(steps):
        # The aggregator may still hold the bundle of the previous step while a pod already presents
        # the new serving certificate, and the other way round: both pairs must verify.
        assert trusted(serving_certificate(after.plan), bundle(before.plan), after.now)
        assert trusted(serving_certificate(before.plan), bundle(after.plan), after.now)
        assert after.plan.serving_not_after <= ca_certificate(after.plan).not_valid_after_utc
    announce, promote, drop = (
        ca_step(steps, a) for a in ("announced next CA", "promoted next CA", "dropped previous CA")
    )
    assert announce < promote < drop
    assert steps[promote].now - steps[announce].now >= MINUTE
    assert steps[drop].now - steps[promote].now >= MINUTE
    old, new = ca_certificate(steps[0].plan), ca_certificate(steps[drop].plan)
    assert old != new

    announced = steps[announce].plan
    # Nothing is signed by the announced CA yet (a routine renewal may coincide, still from the old).
    assert "moved serving certificate to new CA" not in announced.actions
    assert pki.is_signed_by(serving_certificate(announced), old)
    assert bundle(announced) == [old, new] and announced.rollover == "announced"
    assert set(announced.ca_data) == {"ca.crt", "ca.key", "next-ca.crt", "next-ca.key"}

    promoted = steps[promote].plan
    assert promoted.actions == ["promoted next CA", "moved serving certificate to new CA"]
    assert pki.is_signed_by(serving_certificate(promoted), new)
    assert bundle(promoted) == [new, old] and promoted.rollover == "grace"
    assert set(promoted.ca_data) == {"ca.crt", "ca.key", "previous-ca.crt"}
    assert set(promoted.ca_annotations) == {
        "operator.core.io/ca-renew-after",
        "operator.core.io/previous-ca-until",
    }

    dropped = steps[drop].plan
    assert dropped.actions == ["dropped previous CA"]
    assert bundle(dropped) == [new] and dropped.rollover == ""
    assert set(dropped.ca_data) == {"ca.crt", "ca.key"}
    assert steps[-1].plan.ca_bundle == dropped.ca_bundle


def test_rollover_starts_at_the_ca_renewal_time() -> None:
    cluster = Cluster()
    first = cluster.call(T0)
    due = first.ca_renew_after
    before = cluster.call(due - SECOND)
    assert "announced next CA" not in before.actions
    announced = cluster.call(due)
    assert announced.actions == ["announced next CA"]
    # The serving certificate stays as it is; only the bundle it carries grows.
    assert announced.serving_data == before.serving_data | {"ca.crt": encoded(announced.ca_bundle)}
    assert cluster.call(due + 59 * SECOND).actions == []  # within the grace period: nothing moves


def test_ca_end_forces_a_rollover_that_completes_in_time() -> None:
    # Renewal due at ~95% (57 minutes), but the grace period is 5 minutes: waiting for the renewal
    # time would promote the next CA only after the old one (and its serving certificate) expired.
    spec = Certificates(ca_lifetime="1h", serving_lifetime="10m", ca_grace_period="5m", renew_at_percent=95)
    steps = walk(Cluster(spec), T0 + 61 * MINUTE, None)
    announce, promote = ca_step(steps, "announced next CA"), ca_step(steps, "promoted next CA")
    assert steps[announce].now == T0 + 50 * MINUTE
    assert steps[promote].now == T0 + 55 * MINUTE < steps[0].plan.ca_not_after
    for before, after in itertools.pairwise(steps):
        assert trusted(serving_certificate(after.plan), bundle(before.plan), after.now)


def test_promotion_waits_until_every_apiservice_holds_the_next_ca() -> None:
    """A child failing after the Secrets (or an APIService reverted) keeps the next CA out of a
    caBundle: the serving certificate must not move to it until the bundle is seen to hold it."""
    cluster = Cluster()
    first = cluster.call(T0)
    announced = cluster.call(first.ca_renew_after)
    old_only = certs.Observed((first.ca_bundle, announced.ca_bundle))  # one APIService lags
    held = cluster.call(first.ca_renew_after + 2 * MINUTE, observed=old_only)
    assert held.actions == [] and held.rollover == "announced"
    assert held.waiting == ("promotion waits until every APIService's caBundle holds the next CA",)
    assert pki.is_signed_by(serving_certificate(held), ca_certificate(first))
    assert cluster.call(first.ca_renew_after + 3 * MINUTE, observed=certs.Observed(())).actions == []
    both = certs.Observed((announced.ca_bundle, announced.ca_bundle))
    promoted = cluster.call(first.ca_renew_after + 4 * MINUTE, observed=both)
    assert promoted.actions == ["promoted next CA", "moved serving certificate to new CA"]
    assert promoted.waiting == ()


def test_the_previous_ca_stays_while_pods_serve_its_certificates() -> None:
    """The kubelet may update a pod's Secret volume later than the grace period: the old CA leaves
    the bundle only once every pod that answered presents a certificate of the new one."""
    cluster = Cluster()
    first = cluster.call(T0)
    announced = cluster.call(first.ca_renew_after)
    trusting = certs.Observed((announced.ca_bundle, announced.ca_bundle))
    promoted = cluster.call(first.ca_renew_after + 2 * MINUTE, observed=trusting)
    old_leaf, new_leaf = serving_certificate(first), serving_certificate(promoted)
    later = first.ca_renew_after + 5 * MINUTE
    stale = certs.Observed((promoted.ca_bundle,) * 2, served=(new_leaf, old_leaf))
    held = cluster.call(later, observed=stale)
    assert held.actions == [] and held.rollover == "grace"
    assert held.waiting == ("the previous CA stays until the pods serve certificates of the current one",)
    assert bundle(held) == [ca_certificate(promoted), ca_certificate(first)]
    current = certs.Observed((promoted.ca_bundle,) * 2, served=(new_leaf, new_leaf))
    dropped = cluster.call(later + SECOND, observed=current)
    assert dropped.actions == ["dropped previous CA"] and dropped.rollover == ""
    assert bundle(dropped) == [ca_certificate(promoted)]


def test_with_no_pod_answering_the_clock_decides() -> None:
    cluster = Cluster()
    first = cluster.call(T0)
    announced = cluster.call(first.ca_renew_after)
    trusting = certs.Observed((announced.ca_bundle,) * 2)
    cluster.call(first.ca_renew_after + 2 * MINUTE, observed=trusting)
    dropped = cluster.call(first.ca_renew_after + 5 * MINUTE, observed=trusting)  # served: ()
    assert dropped.actions == ["dropped previous CA"]


def test_expired_ca_is_replaced_outright() -> None:
    cluster = Cluster()
    first = cluster.call(T0)
    late = first.ca_not_after + SECOND
    plan = cluster.call(late)
    assert plan.actions == ["replaced expired CA", "moved serving certificate to new CA"]
    assert bundle(plan) == [ca_certificate(plan)] != bundle(first)
    assert trusted(serving_certificate(plan), bundle(plan), late)


# --- hosts, lifetimes, corrupt data -----------------------------------------------------------


def test_changed_hosts_reissue_the_serving_certificate_only() -> None:
    cluster = Cluster()
    first = cluster.call(T0)
    # Spelling differences are not changes: names are normalized before comparing.
    same = [h.upper() for h in HOSTS[:2]] + ["10.96.0.10", HOSTS[0]]
    assert cluster.call(T0 + MINUTE, same).actions == []
    hosts = [*HOSTS, "coreio.coreio-system.svc.cluster.local"]
    plan = cluster.call(T0 + MINUTE, hosts)
    assert plan.actions == ["reissued serving certificate for new hosts"]
    assert pki.certificate_hosts(serving_certificate(plan)) == hosts
    assert plan.ca_data == first.ca_data and plan.ca_bundle == first.ca_bundle


def test_a_certificate_never_outlives_its_ca() -> None:
    spec = Certificates(ca_lifetime="1h", serving_lifetime="2h", ca_grace_period="1m")
    cluster = Cluster(spec)
    plan = cluster.call(T0)
    assert plan.serving_not_after == plan.ca_not_after == T0 + 60 * MINUTE
    # Later leaves are cut shorter still, until the rollover moves them to the next CA.
    steps = walk(cluster, T0 + 90 * MINUTE, None)
    assert any("promoted next CA" in step.plan.actions for step in steps)
    for step in steps:
        issuer = next(c for c in bundle(step.plan) if pki.is_signed_by(serving_certificate(step.plan), c))
        assert step.plan.serving_not_after <= issuer.not_valid_after_utc


def _corrupt_ca_crt(state: dict[str, Any]) -> None:
    state["ca"]["data"]["ca.crt"] = "not base64!"


def _foreign_ca_key(state: dict[str, Any]) -> None:
    state["ca"]["data"]["ca.key"] = encoded(pki.create_ca().key_pem)


def _foreign_tls_key(state: dict[str, Any]) -> None:
    state["serving"]["data"]["tls.key"] = encoded(pki.private_key_pem(pki.generate_key()))


def _garbage_tls_crt(state: dict[str, Any]) -> None:
    state["serving"]["data"]["tls.crt"] = encoded(
        b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    )


def _garbage_renew_after(state: dict[str, Any]) -> None:
    state["serving"]["metadata"]["annotations"]["operator.core.io/renew-after"] = "soon"


def _lost_ca_renew_after(state: dict[str, Any]) -> None:
    del state["ca"]["metadata"]["annotations"]["operator.core.io/ca-renew-after"]


def _stale_serving_bundle(state: dict[str, Any]) -> None:
    state["serving"]["data"]["ca.crt"] = encoded(pki.create_ca().cert_pem)


def _no_serving_secret(state: dict[str, Any]) -> None:
    state["serving"] = None


CORRUPTIONS = {
    _corrupt_ca_crt: ["issued CA", "moved serving certificate to new CA"],
    _foreign_ca_key: ["issued CA", "moved serving certificate to new CA"],
    _foreign_tls_key: ["issued serving certificate"],
    _garbage_tls_crt: ["issued serving certificate"],
    _garbage_renew_after: ["renewed serving certificate"],
    _lost_ca_renew_after: ["repaired CA Secret"],
    _stale_serving_bundle: ["repaired serving Secret"],
    _no_serving_secret: ["issued serving certificate"],
}


@pytest.mark.parametrize("corrupt", CORRUPTIONS, ids=lambda f: f.__name__.strip("_"))
def test_corrupt_data_recovers(corrupt: Any) -> None:
    cluster = Cluster()
    cluster.call(T0)
    now = T0 + MINUTE
    state = {"ca": cluster.ca_secret, "serving": cluster.serving_secret}
    corrupt(state)
    cluster.ca_secret, cluster.serving_secret = state["ca"], state["serving"]
    plan = cluster.call(now)
    assert plan.actions == CORRUPTIONS[corrupt]
    assert trusted(serving_certificate(plan), bundle(plan), now)
    assert decoded(plan.serving_data, "ca.crt") == plan.ca_bundle
    assert_idempotent(cluster, plan, now)


def _during_rollover(phase: str) -> tuple[Cluster, datetime.datetime]:
    cluster = Cluster()
    steps = walk(cluster, T0 + 50 * MINUTE, None)
    index = next(i for i, s in enumerate(steps) if s.plan.rollover == phase)
    state = steps[index]
    cluster.ca_secret = secret(state.plan.ca_data, state.plan.ca_annotations)
    cluster.serving_secret = secret(state.plan.serving_data, state.plan.serving_annotations)
    return cluster, state.now


def test_unreadable_next_ca_is_dropped_and_announced_again() -> None:
    cluster, now = _during_rollover("announced")
    assert cluster.ca_secret is not None
    cluster.ca_secret["data"]["next-ca.key"] = encoded(b"garbage")
    plan = cluster.call(now + SECOND)
    # Dropped, and since the rollover is due, a fresh next CA is announced with a new grace period.
    assert plan.actions == ["dropped unreadable next CA", "announced next CA"]
    assert plan.ca_annotations["operator.core.io/next-ca-announced-at"] == certs.format_time(now + SECOND)
    assert len(bundle(plan)) == 2


def test_previous_ca_without_deadline_stays_a_full_grace_period() -> None:
    cluster, now = _during_rollover("grace")
    assert cluster.ca_secret is not None
    del cluster.ca_secret["metadata"]["annotations"]["operator.core.io/previous-ca-until"]
    plan = cluster.call(now + 30 * SECOND)
    assert plan.actions == ["repaired CA Secret"]
    assert plan.ca_annotations["operator.core.io/previous-ca-until"] == certs.format_time(now + 90 * SECOND)
    assert len(bundle(plan)) == 2


# --- pki additions ----------------------------------------------------------------------------


def test_pki_lifetime_and_issue_moment() -> None:
    ca = pki.create_ca("x", lifetime=datetime.timedelta(hours=2), now=T0)
    assert ca.certificate.not_valid_before_utc == T0 - 5 * MINUTE
    assert ca.certificate.not_valid_after_utc == T0 + 120 * MINUTE
    leaf = pki.issue_serving_certificate(ca, ["a.example"], lifetime=90 * SECOND, now=T0).certificate
    assert leaf.not_valid_after_utc == T0 + 90 * SECOND
    # `days` still applies when no lifetime is given.
    assert pki.create_ca("y", days=2, now=T0).certificate.not_valid_after_utc == T0 + datetime.timedelta(
        days=2
    )


def test_pki_key_pair_from_pem_checks_the_pair() -> None:
    ca = pki.create_ca("x")
    assert pki.KeyPair.from_pem(ca.cert_pem, ca.key_pem).certificate == ca.certificate
    with pytest.raises(ValueError, match="does not belong"):
        pki.KeyPair.from_pem(ca.cert_pem, pki.private_key_pem(pki.generate_key()))
    with pytest.raises(ValueError):
        pki.KeyPair.from_pem(b"junk", ca.key_pem)
    with pytest.raises(ValueError):
        pki.KeyPair.from_pem(ca.cert_pem, b"junk")
