"""Certificates the user brings (spec.certificates.secretName): what the operator accepts, what it
refuses (naming the Secret and the key), and the CAs it keeps trusted while the pods catch up."""

from __future__ import annotations

import base64
import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.x509.oid import NameOID

from apiserver import pki
from apiserver_operator import given
from apiserver_operator.certificates import (
    CertificatePlan,
    Observed,
    dropped_from,
    keep_served,
    trusted_everywhere,
)

HOST = "coreio.coreio-system.svc"


def _now() -> datetime.datetime:
    # At each call: a module-level moment would precede certificates issued much later in a long
    # run (they are backdated only five minutes).
    return datetime.datetime.now(datetime.UTC)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _secret(tls_crt: bytes, tls_key: bytes, ca_crt: bytes) -> dict[str, object]:
    """As cert-manager writes one for a Certificate (type kubernetes.io/tls, three keys)."""
    return {
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": _b64(tls_crt), "tls.key": _b64(tls_key), "ca.crt": _b64(ca_crt)},
    }


def _ca(name: str, parent: pki.KeyPair | None = None) -> pki.KeyPair:
    """A root CA that may sign intermediates, or (with `parent`) an intermediate of it, as a
    cert-manager CA issuer backed by an intermediate has."""
    key = pki.generate_key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    signer = parent.key if parent else key
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(parent.certificate.subject if parent else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now() - datetime.timedelta(minutes=5))
        .not_valid_after(_now() + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0 if parent else None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()),
            critical=False,
        )
        .sign(signer, hashes.SHA256())
    )
    return pki.KeyPair(certificate, key)


def _plan(secret: dict[str, object] | None, host: str = HOST) -> CertificatePlan:
    return given.plan_given(secret, "mine", host, _now())


def _refusal(secret: dict[str, object] | None, host: str = HOST) -> given.GivenSecretInvalid:
    with pytest.raises(given.GivenSecretInvalid) as caught:
        _plan(secret, host)
    return caught.value


def test_a_good_secret_becomes_the_bundle_and_nothing_is_issued() -> None:
    ca = pki.create_ca("mine")
    leaf = pki.issue_serving_certificate(ca, [HOST])
    secret = _secret(leaf.cert_pem, leaf.key_pem, ca.cert_pem)
    plan = _plan(secret)
    assert plan.ca_bundle == ca.cert_pem
    # The pods are given exactly the user's three keys; no CA of the operator's.
    assert plan.serving_data == secret["data"] and plan.ca_data == {} and plan.actions == []
    status = plan.status()
    assert status["source"] == "secret" and "servingRenewAfter" not in status and "caRenewAfter" not in status
    assert plan.serving_not_after == leaf.certificate.not_valid_after_utc == plan.next_due


def test_a_chain_through_an_intermediate_verifies_up_to_the_root() -> None:
    root = _ca("root")
    middle = _ca("intermediate", root)
    leaf = pki.issue_serving_certificate(middle, [HOST])
    plan = _plan(_secret(leaf.cert_pem + middle.cert_pem, leaf.key_pem, root.cert_pem))
    assert plan.ca_bundle == root.cert_pem
    # Without the intermediate in tls.crt the aggregator could not build the path either.
    refusal = _refusal(_secret(leaf.cert_pem, leaf.key_pem, root.cert_pem))
    assert refusal.reason == "CertificateNotTrusted"


def test_a_missing_secret_or_key_is_named() -> None:
    assert _refusal(None).reason == "CertificateSecretNotFound"
    assert "secretName" in _refusal(None).message
    ca = pki.create_ca("mine")
    leaf = pki.issue_serving_certificate(ca, [HOST])
    secret = _secret(leaf.cert_pem, leaf.key_pem, ca.cert_pem)
    for key in ("tls.crt", "tls.key", "ca.crt"):
        data = dict(secret["data"])  # type: ignore[call-overload]
        del data[key]
        refusal = _refusal({**secret, "data": data})
        assert (refusal.reason, refusal.message) == ("CertificateSecretInvalid", f"Secret mine has no {key}")


def test_what_the_aggregator_would_refuse_is_refused() -> None:
    ca, other = pki.create_ca("mine"), pki.create_ca("other")
    leaf = pki.issue_serving_certificate(ca, [HOST])
    wrong_host = _refusal(_secret(leaf.cert_pem, leaf.key_pem, ca.cert_pem), "other.coreio-system.svc")
    assert wrong_host.reason == "CertificateNotTrusted" and "other.coreio-system.svc" in wrong_host.message
    wrong_ca = _refusal(_secret(leaf.cert_pem, leaf.key_pem, other.cert_pem))
    assert wrong_ca.reason == "CertificateNotTrusted"
    expired = pki.issue_serving_certificate(
        ca, [HOST], lifetime=datetime.timedelta(minutes=1), now=_now() - datetime.timedelta(hours=1)
    )
    assert _refusal(_secret(expired.cert_pem, expired.key_pem, ca.cert_pem)).reason == "CertificateNotTrusted"
    mismatch = _refusal(
        _secret(leaf.cert_pem, pki.issue_serving_certificate(ca, [HOST]).key_pem, ca.cert_pem)
    )
    assert mismatch.reason == "CertificateSecretInvalid" and "tls.key" in mismatch.message
    garbage = _refusal(_secret(b"not a certificate", leaf.key_pem, ca.cert_pem))
    assert garbage.message == "Secret mine: tls.crt holds no PEM certificate"


def test_a_ca_the_pods_still_present_stays_in_the_bundle() -> None:
    old, new = pki.create_ca("old"), pki.create_ca("new")
    old_leaf = pki.issue_serving_certificate(old, [HOST]).certificate
    new_leaf = pki.issue_serving_certificate(new, [HOST]).certificate
    leaf = pki.issue_serving_certificate(new, [HOST])
    plan = _plan(_secret(leaf.cert_pem, leaf.key_pem, new.cert_pem))
    read = (old.cert_pem, old.cert_pem)  # both APIServices, as last applied
    assert dropped_from(plan, read)
    # A pod still serves the old CA's certificate (its volume not yet updated): both are trusted.
    kept = keep_served(plan, Observed(read, (new_leaf, old_leaf)), [])
    assert x509.load_pem_x509_certificates(kept.ca_bundle) == [new.certificate, old.certificate]
    # Every pod serves the new one: the old CA goes.
    assert keep_served(plan, Observed(read, (new_leaf,)), [new_leaf]).ca_bundle == new.cert_pem
    # Nothing answers: the old CA stays while the pods were last given a certificate it signed.
    assert keep_served(plan, Observed(read, ()), [old_leaf]).ca_bundle == new.cert_pem + old.cert_pem
    assert keep_served(plan, Observed(read, ()), [new_leaf]).ca_bundle == new.cert_pem
    assert not dropped_from(plan, (new.cert_pem, new.cert_pem))


def test_the_pods_get_a_certificate_only_once_every_bundle_verifies_it() -> None:
    old, new = pki.create_ca("old"), pki.create_ca("new")
    leaf = pki.issue_serving_certificate(new, [HOST])
    plan = _plan(_secret(leaf.cert_pem, leaf.key_pem, new.cert_pem))
    assert not trusted_everywhere(plan, (), HOST, _now())  # no APIService yet
    assert not trusted_everywhere(plan, (old.cert_pem, new.cert_pem), HOST, _now())  # one behind
    assert trusted_everywhere(plan, (new.cert_pem + old.cert_pem, new.cert_pem), HOST, _now())
