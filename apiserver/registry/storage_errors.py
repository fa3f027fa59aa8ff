"""Storage errors as the Status errors clients see: the one place they are mapped.

The storage knows nothing of HTTP; whatever serves its data (the registry, the implicit namespaces,
the middleware's last resort) turns a StorageError into a Status here, as k8s.io/apiserver's
storage/errors package and its etcd3 store's list errors do.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from apiserver.machinery import errors
from apiserver.machinery.errors import GroupResource, StatusError
from apiserver.registry.stored import CorruptObjectError
from apiserver.storage.interface import (
    CompactedError,
    FutureRevisionError,
    KeyExistsError,
    KeyNotFoundError,
    RevisionConflictError,
    StorageError,
    StorageUnavailableError,
    UpdateContentionError,
    WatchOverflowError,
)

EXPIRED_LIST = "The resourceVersion for the provided list is too old."
INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token results "
    "in an inconsistent list - objects that were created, modified, or deleted between the time "
    "the first chunk was returned and now may show up in the list."
)
NO_RESOURCE = GroupResource("", "")
# Upstream's list stops gathering corrupt objects after this many (and says the list is truncated).
MAX_CORRUPT_IN_LIST = 100
TOO_MANY_CORRUPT = "too many errors, the list is truncated"


def too_large_resource_version(requested: int, current: int) -> StatusError:
    """Upstream's NewTooLargeResourceVersionError: clients look for its cause and retry."""
    err = errors.timeout_error(f"Too large resource version: {requested}, current: {current}", retry_after=1)
    assert err.details is not None
    err.details["causes"] = [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]
    return err


def store_read_error(gr: GroupResource, corrupt: list[CorruptObjectError], *, truncated: bool) -> StatusError:
    """A list that met objects it cannot decode: 500 StorageReadError naming each one's key, as
    upstream's etcd3 store answers with AllowUnsafeMalformedObjectDeletion on."""
    causes: list[dict[str, str]] = [
        {"reason": "UnexpectedServerResponse", "message": error.storage_message(), "field": error.key}
        for error in corrupt
    ]
    if truncated:
        causes.append({"reason": "FieldValueTooMany", "message": TOO_MANY_CORRUPT})
    details = {"name": "list", "group": gr.group, "kind": gr.resource, "causes": causes}
    if not gr.group:
        del details["group"]
    message = f"failed to read one or more {gr} from the storage"
    return StatusError(500, "StorageReadError", message, details)


def _compacted(error: CompactedError, listing: bool, resume: str | None) -> StatusError:
    if not listing:
        return errors.expired(f"too old resource version: {error.requested} ({error.compacted})")
    if resume is None:
        return errors.expired(EXPIRED_LIST)
    # A continued list whose snapshot is gone: the rest can still be read, inconsistently.
    err = errors.expired(INCONSISTENT_CONTINUE)
    err.list_meta = {"continue": resume}
    return err


def status_error(
    error: StorageError,
    gr: GroupResource = NO_RESOURCE,
    name: str = "",
    *,
    listing: bool = False,
    resume: str | None = None,
    seen: int = 0,
) -> StatusError:
    """The Status for `error` met on object `name` of `gr` (or on the collection).

    `listing`: met by a list (a compacted revision is worded for the list; `resume`, a continued
    list's token for reading the remainder without its snapshot). `seen`: the last revision a
    watch delivered, quoted when it fell behind.
    """
    match error:
        case KeyNotFoundError():
            return errors.not_found_error(gr, name)
        case KeyExistsError():
            return errors.already_exists_error(gr, name)
        case RevisionConflictError():
            return errors.modified_conflict_error(gr, name)
        case UpdateContentionError():
            return errors.conflict_error(gr, name, "too many concurrent updates; please try again")
        case CompactedError():
            return _compacted(error, listing, resume)
        case FutureRevisionError():
            return too_large_resource_version(error.requested, error.current)
        case WatchOverflowError():
            # Ended with 410 so the client relists, as when kube-apiserver's watch cache drops a
            # slow watcher.
            return errors.expired(f"watch fell behind; too old resource version: {seen}")
        case StorageUnavailableError():
            return errors.storage_unavailable(error)
        case CorruptObjectError():
            # A read that met one undecodable object: upstream's storage errors make it internal.
            return errors.internal_error(error.storage_message())
    return errors.internal_error(type(error).__name__)


@contextmanager
def interpreted(gr: GroupResource, name: str = "", *, listing: bool = False) -> Iterator[None]:
    """Raises the StorageErrors of the block as their Status errors."""
    try:
        yield
    except StorageError as error:
        raise status_error(error, gr, name, listing=listing) from error
