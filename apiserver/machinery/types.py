"""The one name every layer uses for an object on the wire: a decoded JSON object."""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]
"""An object as the API moves it: decoded JSON, keys in document order."""
