"""List continuation tokens, in the exact form k8s.io/apiserver encodes them.

A token is base64url (no padding) of `{"v":"meta.k8s.io/v1","rv":<revision>,"start":"<key>"}` where
`start` is the next key relative to the list's key prefix (the last returned key plus NUL).
`rv` -1 means "continue at the latest revision" (handed out when the snapshot was compacted).
"""

from __future__ import annotations

import base64
import binascii
import json
import posixpath
from dataclasses import dataclass

TOKEN_VERSION = "meta.k8s.io/v1"


class InvalidContinueError(ValueError):
    pass


@dataclass(frozen=True)
class ContinueToken:
    revision: int
    start_key: str  # absolute key to start from (inclusive)


def encode(start_key: str, key_prefix: str, revision: int) -> str:
    if not start_key.startswith(key_prefix):
        raise ValueError(f"key {start_key!r} is not under {key_prefix!r}")
    relative = start_key[len(key_prefix) :]
    payload = json.dumps({"v": TOKEN_VERSION, "rv": revision, "start": relative}, separators=(",", ":"))
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def decode(token: str, key_prefix: str) -> ContinueToken:
    """Parses a token for a list under `key_prefix`; InvalidContinueError says what is wrong."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise InvalidContinueError(f"continue key is not valid: {exc}") from exc
    if not isinstance(data, dict) or data.get("v") != TOKEN_VERSION:
        version = data.get("v") if isinstance(data, dict) else None
        raise InvalidContinueError(
            f"continue key is not valid: server does not recognize this encoded version {version!r}"
        )
    revision = data.get("rv")
    start = data.get("start")
    if not isinstance(revision, int) or isinstance(revision, bool) or revision == 0:
        raise InvalidContinueError(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
        )
    if not isinstance(start, str) or not start:
        raise InvalidContinueError("continue key is not valid: encoded start key empty")
    # The start key must not climb out of the list's prefix.
    cleaned = posixpath.normpath("/" + start.rstrip("\x00"))
    if cleaned != "/" + start.rstrip("\x00") or ".." in start.split("/"):
        raise InvalidContinueError(f"continue key is not valid: {start!r}")
    return ContinueToken(revision=revision, start_key=key_prefix + start)
