"""Authenticators: x509 client certificates and static bearer tokens (standalone).

An authenticator answers a user, None when the request carries no credential of its kind, or
raises `errors.StatusError` (401) when it carries one that is invalid.
"""

from __future__ import annotations

import hmac
import ssl
from collections.abc import Sequence
from typing import Any, Protocol

from aiohttp import web

from apiserver import errors
from apiserver.auth.user import UserInfo


class Authenticator(Protocol):
    async def authenticate(self, request: web.Request) -> UserInfo | None: ...


def _peer_certificate(request: web.Request) -> dict[str, Any] | None:
    transport = request.transport
    if transport is None:
        return None
    ssl_object = transport.get_extra_info("ssl_object")
    if not isinstance(ssl_object, ssl.SSLObject):
        return None
    # getpeercert() only returns a dict for a certificate that verified against the client CA.
    cert = ssl_object.getpeercert()
    return cert or None


class X509Authenticator:
    """CN is the user name, each O a group (the certificate already verified in the handshake)."""

    async def authenticate(self, request: web.Request) -> UserInfo | None:
        cert = _peer_certificate(request)
        if cert is None:
            return None
        name = ""
        groups: list[str] = []
        for rdn in cert.get("subject", ()):
            for key, value in rdn:
                if key == "commonName":
                    name = value
                elif key == "organizationName":
                    groups.append(value)
        if not name:
            return None
        return UserInfo(name=name, groups=tuple(groups))


class TokenAuthenticator:
    """Bearer tokens from a static table (kube-apiserver's --token-auth-file)."""

    def __init__(self, tokens: dict[str, UserInfo]) -> None:
        self._tokens = tokens

    async def authenticate(self, request: web.Request) -> UserInfo | None:
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        token = token.strip()
        for known, user in self._tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                return user
        raise errors.unauthorized()


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
