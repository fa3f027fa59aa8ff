"""What the server reads from a kind's declarations, generically: its TTL, its admission, its
patch schema and the verbs the aggregated roles grant on it, for the two kinds served and for a
third declared in one test module."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from apiserver.app import build_stores
from apiserver.config import Settings
from apiserver.patch.schema import OBJECT_META_PATCH_SCHEMA, PatchStrategy
from apiserver.rbac.chain import AuthorizationConfig, server_authorization
from apiserver.rbac.roles import PolicyRule, StaticRoleSource, rule
from apiserver.resources import KINDS, EventKind, RoleBindingKind
from apiserver.resources.base import ResourceKind
from apiserver.storage.sqlite.backend import SQLiteStorage
from tests.support.thirdkind import SERVED, GadgetKind

READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[SQLiteStorage]:
    # Never started: the stores are only assembled here.
    yield SQLiteStorage(str(tmp_path / "db.sqlite"))


def test_ttl_is_the_kinds_flag_or_its_default() -> None:
    settings = Settings(expiry_seconds={"gadgets.gadgets.example.com": 60})
    ttls = {kind.plural: settings.ttl_seconds(kind) for kind in SERVED}
    assert ttls == {"rolebindings": 0, "events": 3600, "gadgets": 60}


def test_admission_is_the_kinds(storage: SQLiteStorage) -> None:
    stores = build_stores(Settings(), storage, SERVED)
    authz = server_authorization(AuthorizationConfig(), stores)
    checks = {store.kind.plural: store.kind.admission(authz) for store in stores}
    assert checks == {"rolebindings": authz.escalation_check, "events": None, "gadgets": None}
    # The RBAC authorizer reads the served RoleBindings, and the served kinds are in its roles.
    assert authz.role_bindings is stores[0]
    view = authz.roles.get_cluster_role("view")
    assert (
        view is not None and rule(READ, groups=["gadgets.example.com"], resources=["gadgets"]) in view.rules
    )


def test_patch_schema_is_the_kinds() -> None:
    assert RoleBindingKind.patch_schema == OBJECT_META_PATCH_SCHEMA
    assert EventKind.patch_schema == OBJECT_META_PATCH_SCHEMA
    assert GadgetKind.patch_schema.strategy(["spec", "tags"]) == PatchStrategy("merge")
    assert GadgetKind.patch_schema.strategy(["metadata", "finalizers"]) == PatchStrategy("merge")


def _coreio_rules(kinds: Sequence[ResourceKind] = KINDS) -> dict[str, tuple[PolicyRule, ...]]:
    source = StaticRoleSource(kinds=kinds)
    roles = {}
    for name in ("admin", "edit", "view"):
        role = source.get_cluster_role(f"coreio:aggregate-to-{name}")
        assert role is not None
        roles[name] = role.rules
    return roles


def test_aggregated_roles_are_the_kinds() -> None:
    rbac, events = "rbac.authorization.core.io", "events.core.io"
    assert _coreio_rules() == {
        "admin": (rule(READ + WRITE, groups=[rbac], resources=["rolebindings"]),),
        "edit": (rule(WRITE, groups=[events], resources=["events"]),),
        "view": (rule(READ, groups=[events], resources=["events"]),),
    }
    gadgets = _coreio_rules(SERVED)
    assert gadgets["view"][-1] == rule(READ, groups=["gadgets.example.com"], resources=["gadgets"])
    assert gadgets["edit"][-1] == rule(WRITE, groups=["gadgets.example.com"], resources=["gadgets"])
    # admin takes in edit and view (upstream's aggregation): every verb on gadgets.
    admin = StaticRoleSource(kinds=SERVED).get_cluster_role("admin")
    assert admin is not None
    for verbs in (READ, WRITE):
        assert rule(verbs, groups=["gadgets.example.com"], resources=["gadgets"]) in admin.rules
