"""The watch cache: a Storage over another, serving the reads of its resources from memory."""

from apiserver.storage.cacher.cached import CachedStorage

__all__ = ["CachedStorage"]
