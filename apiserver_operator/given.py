"""Certificates the user brings (`spec.certificates.secretName`): a Secret in the Installation's
namespace with `tls.crt` (the serving certificate, then any intermediates), `tls.key` and `ca.crt`,
as cert-manager writes one for a Certificate. The operator issues nothing then: it checks that the
Secret would be trusted, and `ca.crt` becomes the APIServices' caBundle.

The pods never mount the user's Secret: the operator copies it into the serving Secret they mount,
and only once every APIService's caBundle, as read back, verifies it (`reconcile.certificates`).
So a new CA of the user's reaches the aggregator before any pod presents a certificate it signed,
and the old CA stays while a pod still presents one of its certificates (`keep_served`), as in
the operator's own rollover.

Before anything is applied the serving certificate is verified as the aggregator will verify it:
for the Service's name, at this moment, up to a CA of `ca.crt`. A Secret that would fail is
refused and nothing is changed, so a bad Secret never causes an outage.
"""

from __future__ import annotations

import base64
import binascii
import datetime

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from apiserver import pki
from apiserver.machinery.types import JSON
from apiserver_operator.certificates import (
    TLS_CERT,
    TLS_KEY,
    TRUST_BUNDLE,
    CertificatePlan,
    chain_error,
)


class GivenSecretInvalid(Exception):
    """The Secret cannot serve (yet): its reason and message go to the Ready condition."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _decoded(secret: JSON, name: str, key: str) -> bytes:
    value = (secret.get("data") or {}).get(key)
    try:
        data = base64.b64decode(value or "", validate=True)
    except binascii.Error:
        data = b""
    if not data:
        raise GivenSecretInvalid("CertificateSecretInvalid", f"Secret {name} has no {key}")
    return data


def _pem_certificates(data: bytes, name: str, key: str) -> list[x509.Certificate]:
    try:
        found = x509.load_pem_x509_certificates(data)
    except ValueError:
        found = []
    if not found:
        raise GivenSecretInvalid("CertificateSecretInvalid", f"Secret {name}: {key} holds no PEM certificate")
    return found


def _check_key(tls_crt: bytes, key_pem: bytes, name: str) -> None:
    try:
        pki.KeyPair.from_pem(tls_crt, key_pem)
    except ValueError as exc:
        raise GivenSecretInvalid("CertificateSecretInvalid", f"Secret {name}: tls.key: {exc}") from None


def plan_given(secret: JSON | None, name: str, host: str, now: datetime.datetime) -> CertificatePlan:
    """The serving Secret's contents and the bundle from the user's Secret `name`; raises
    GivenSecretInvalid when it is missing or would not be trusted for `host`."""
    if secret is None:
        raise GivenSecretInvalid(
            "CertificateSecretNotFound", f"Secret {name} (spec.certificates.secretName) is not found"
        )
    tls_crt, tls_key = _decoded(secret, name, TLS_CERT), _decoded(secret, name, TLS_KEY)
    ca_crt = _decoded(secret, name, TRUST_BUNDLE)
    chain = _pem_certificates(tls_crt, name, TLS_CERT)
    cas = _pem_certificates(ca_crt, name, TRUST_BUNDLE)
    _check_key(tls_crt, tls_key, name)
    if error := chain_error(chain, cas, host, now):
        raise GivenSecretInvalid(
            "CertificateNotTrusted", f"Secret {name}: tls.crt does not verify for {host} with ca.crt: {error}"
        )
    data = {key: secret["data"][key] for key in (TLS_CERT, TLS_KEY, TRUST_BUNDLE)}
    ca_end = min(ca.not_valid_after_utc for ca in cas)
    return CertificatePlan(
        ca_data={},
        ca_annotations={},
        serving_data=data,
        serving_annotations={},
        ca_bundle=b"".join(ca.public_bytes(serialization.Encoding.PEM) for ca in cas),
        actions=[],
        ca_not_after=ca_end,
        ca_renew_after=ca_end,
        serving_not_after=chain[0].not_valid_after_utc,
        serving_renew_after=chain[0].not_valid_after_utc,
        rollover="",
        next_due=chain[0].not_valid_after_utc,
        source="secret",
    )
