"""Authenticators: front-proxy request headers, x509 client certificates, bearer tokens.

An authenticator answers a user, None when the request carries no credential of its kind, or
raises `errors.StatusError` (401) when it carries one that is invalid.
"""

from __future__ import annotations

import hmac
import ssl
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web
from cryptography import x509

from apiserver import pki
from apiserver.machinery.user import UserInfo


class Authenticator(Protocol):
    async def authenticate(self, request: web.Request) -> UserInfo | None: ...


def peer_certificate(request: web.Request) -> x509.Certificate | None:
    """The client's certificate, which the TLS handshake verified against one of the client CAs."""
    transport = request.transport
    if transport is None:
        return None
    ssl_object = transport.get_extra_info("ssl_object")
    if not isinstance(ssl_object, ssl.SSLObject):
        return None
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return None
    try:
        return x509.load_der_x509_certificate(der)
    except ValueError:
        return None


class X509Authenticator:
    """A client certificate issued by one of `client_cas`: CN is the user name, each O a group.

    The TLS layer also accepts certificates of the front-proxy CA (see `RequestHeaderAuthenticator`);
    those are no user of their own here, as upstream keeps the two authorities apart.
    """

    def __init__(self, client_cas: pki.CABundle) -> None:
        self._client_cas = client_cas

    async def authenticate(self, request: web.Request) -> UserInfo | None:
        cert = peer_certificate(request)
        if cert is None or not self._client_cas.issued(cert):
            return None
        name, groups = pki.certificate_user(cert)
        if not name:
            return None
        return UserInfo(name=name, groups=tuple(groups))


@dataclass(frozen=True)
class RequestHeaderConfig:
    """Which front proxy to believe, and where it puts the user (kube-apiserver's --requestheader-*)."""

    client_cas: pki.CABundle
    # Client certificate CNs allowed to assert users; empty: any certificate of `client_cas`.
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    uid_headers: tuple[str, ...] = ()
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_headers_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)


class RequestHeaderAuthenticator:
    """The user a front proxy (kube-apiserver's aggregator) asserts in request headers.

    The headers count only on a connection whose client certificate the front-proxy CA issued and
    whose CN is allowed; anyone else sending them is no one special (the headers are ignored and
    the request authenticates, or not, by its other credentials). The first non-empty username
    header wins; groups are every value of every group header; extra keys are the rest of a
    prefixed header's name, lowercased and percent-decoded.

    `reconfigure` swaps the whole configuration (CAs, allowed names, header names) at once, e.g.
    when kube-system/extension-apiserver-authentication changed; each request reads one
    configuration, never a mix of the old and the new.
    """

    def __init__(self, config: RequestHeaderConfig) -> None:
        self.config = config

    def reconfigure(self, config: RequestHeaderConfig) -> None:
        self.config = config

    @staticmethod
    def _trusted(config: RequestHeaderConfig, request: web.Request) -> bool:
        cert = peer_certificate(request)
        if cert is None or not config.client_cas.issued(cert):
            return False
        if not config.allowed_names:
            return True
        name, _ = pki.certificate_user(cert)
        return name in config.allowed_names

    async def authenticate(self, request: web.Request) -> UserInfo | None:
        config = self.config
        headers = request.headers
        name = next((v for h in config.username_headers if (v := headers.get(h, ""))), "")
        if not name or not self._trusted(config, request):
            return None
        uid = next((v for h in config.uid_headers if (v := headers.get(h, ""))), "")
        groups = tuple(v for h in config.group_headers for v in headers.getall(h, ()) if v)
        extra: dict[str, list[str]] = {}
        for prefix in config.extra_headers_prefixes:
            lowered = prefix.lower()
            for header, value in headers.items():
                if header.lower().startswith(lowered) and len(header) > len(prefix):
                    key = urllib.parse.unquote(header[len(prefix) :].lower())
                    extra.setdefault(key, []).append(value)
        return UserInfo(name=name, uid=uid, groups=groups, extra={k: tuple(v) for k, v in extra.items()})


class TokenAuthenticator:
    """Bearer tokens from a static table (kube-apiserver's --token-auth-file)."""

    def __init__(self, tokens: dict[str, UserInfo]) -> None:
        self._tokens = tokens

    async def authenticate(self, request: web.Request) -> UserInfo | None:
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        # The header's bytes as sent (aiohttp keeps those that are no UTF-8 as surrogates): a token
        # that is no UTF-8 is compared, and matches nothing, rather than failing to encode.
        sent = token.strip().encode("utf-8", "surrogateescape")
        for known, user in self._tokens.items():
            if hmac.compare_digest(known.encode(), sent):
                return user
        # Not one of ours: another authenticator (TokenReview) may know it; if none does, the
        # chain answers 401.
        return None


class AuthenticatorChain:
    """First authenticator that recognises the request wins; none → 401."""

    def __init__(self, authenticators: Sequence[Authenticator]) -> None:
        self._authenticators = list(authenticators)

    async def authenticate(self, request: web.Request) -> UserInfo | None:
        for authenticator in self._authenticators:
            user = await authenticator.authenticate(request)
            if user is not None:
                return user.with_authenticated_group()
        return None
