"""Impersonation as kube-apiserver's filter reads the headers, authorizes each thing asked for and
builds the user (the expected values are what the real kube-apiserver v1.33 answered)."""

from __future__ import annotations

import pytest

from apiserver.auth.authz import Decision
from apiserver.auth.impersonation import (
    Requested,
    WithoutUserError,
    extra_key,
    impersonate,
    impersonated_user,
    requested,
)
from apiserver.auth.requestinfo import RequestInfo
from apiserver.machinery.errors import StatusError
from apiserver.machinery.user import UserInfo

ADMIN = UserInfo("kubernetes-admin", groups=("system:masters", "system:authenticated"))
ALICE = UserInfo(
    "system:serviceaccount:team:alice", groups=("system:serviceaccounts", "system:authenticated")
)


def user_of(*headers: tuple[str, str]) -> UserInfo:
    return impersonated_user(requested(headers))


def test_no_headers_ask_for_nothing() -> None:
    assert requested([("Authorization", "Bearer x"), ("Impersonate-User", "")]) == []


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ([("Impersonate-User", "bob")], UserInfo("bob", groups=("system:authenticated",))),
        (
            [("Impersonate-User", "system:serviceaccount:team:alice")],
            UserInfo(
                "system:serviceaccount:team:alice",
                groups=("system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"),
            ),
        ),
        (
            [("Impersonate-User", "system:serviceaccount:team:alice"), ("Impersonate-Group", "g1")],
            UserInfo("system:serviceaccount:team:alice", groups=("g1", "system:authenticated")),
        ),
        (
            [("Impersonate-User", "system:anonymous")],
            UserInfo("system:anonymous", groups=("system:unauthenticated",)),
        ),
        (
            [
                ("Impersonate-User", "bob"),
                ("Impersonate-Group", "system:unauthenticated"),
                ("Impersonate-Group", "g2"),
            ],
            UserInfo("bob", groups=("system:unauthenticated", "g2")),
        ),
        (
            [
                ("Impersonate-User", "bob"),
                ("Impersonate-Uid", "u-1"),
                ("Impersonate-Extra-Scopes.Example.COM%2Fa%20b", "v1"),
                ("Impersonate-Extra-Scopes.Example.COM%2Fa%20b", "v2"),
                ("Impersonate-Extra-Bad%zz", "q"),
            ],
            UserInfo(
                "bob",
                uid="u-1",
                groups=("system:authenticated",),
                extra={"scopes.example.com/a b": ("v1", "v2"), "bad%zz": ("q",)},
            ),
        ),
    ],
)
def test_the_user_impersonated(headers: list[tuple[str, str]], expected: UserInfo) -> None:
    assert user_of(*headers) == expected


def test_a_malformed_service_account_name_is_a_user() -> None:
    [asked] = requested([("Impersonate-User", "system:serviceaccount:Team:a:b")])
    assert (asked.kind, asked.name) == ("User", "system:serviceaccount:Team:a:b")


@pytest.mark.parametrize(
    ("raw", "key"), [("A%2Fb", "a/b"), ("Bad%zz", "bad%zz"), ("x%20y%zz", "x%20y%zz"), ("Plain", "plain")]
)
def test_extra_keys(raw: str, key: str) -> None:
    assert extra_key(raw) == key


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ([("Impersonate-Group", "g1")], "requested [{Group  g1    }] without impersonating a user"),
        (
            [("Impersonate-Extra-a", "foo")],
            "requested [{UserExtra  foo  authentication.k8s.io/v1  a}] without impersonating a user",
        ),
        (
            [("Impersonate-Uid", "123")],
            "requested [{UID  123  authentication.k8s.io/v1  }] without impersonating a user",
        ),
    ],
)
def test_anything_without_a_user_is_refused(headers: list[tuple[str, str]], body: str) -> None:
    with pytest.raises(WithoutUserError) as refused:
        requested(headers)
    assert str(refused.value) == body
    assert refused.value.body("/api/v1/namespaces/team/pods?a=<b>") == (
        f'Internal Server Error: "/api/v1/namespaces/team/pods?a=&lt;b&gt;": {body}\n'
    )


class FakeAuthorizer:
    """Allows what `allowed` names (resource/subresource, name), recording every question."""

    def __init__(self, *allowed: tuple[str, str]) -> None:
        self.allowed = set(allowed)
        self.asked: list[RequestInfo] = []

    async def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
        self.asked.append(info)
        resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
        return Decision((resource, info.name) in self.allowed)


async def test_every_thing_asked_for_is_authorized_in_order() -> None:
    authorizer = FakeAuthorizer(
        ("users", "bob"), ("groups", "g1"), ("userextras/scopes", "v1"), ("uids", "u-1")
    )
    asked = requested(
        [
            ("Impersonate-User", "bob"),
            ("Impersonate-Group", "g1"),
            ("Impersonate-Extra-Scopes", "v1"),
            ("Impersonate-Uid", "u-1"),
        ]
    )
    user = await impersonate(authorizer, ADMIN, asked)
    assert user.name == "bob"
    assert [(i.verb, i.api_group, i.resource, i.subresource, i.name) for i in authorizer.asked] == [
        ("impersonate", "", "users", "", "bob"),
        ("impersonate", "", "groups", "", "g1"),
        ("impersonate", "authentication.k8s.io", "userextras", "scopes", "v1"),
        ("impersonate", "authentication.k8s.io", "uids", "", "u-1"),
    ]


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        (
            [("Impersonate-User", "carol")],
            'users "carol" is forbidden: User "system:serviceaccount:team:alice" cannot impersonate resource'
            ' "users" in API group "" at the cluster scope',
        ),
        (
            [("Impersonate-User", "system:serviceaccount:team:other")],
            'serviceaccounts "other" is forbidden: User "system:serviceaccount:team:alice" cannot impersonate'
            ' resource "serviceaccounts" in API group "" in the namespace "team"',
        ),
        (
            [("Impersonate-User", "bob"), ("Impersonate-Extra-Scopes%2Fx", "v1")],
            'userextras.authentication.k8s.io "v1" is forbidden: User "system:serviceaccount:team:alice"'
            ' cannot impersonate resource "userextras/scopes/x" in API group "authentication.k8s.io"'
            " at the cluster scope",
        ),
        (
            [("Impersonate-User", "bob"), ("Impersonate-Uid", "1234")],
            'uids.authentication.k8s.io "1234" is forbidden: User "system:serviceaccount:team:alice" cannot'
            ' impersonate resource "uids" in API group "authentication.k8s.io" at the cluster scope',
        ),
    ],
)
async def test_the_first_refusal_is_upstreams_403(headers: list[tuple[str, str]], message: str) -> None:
    with pytest.raises(StatusError) as refused:
        await impersonate(FakeAuthorizer(("users", "bob")), ALICE, requested(headers))
    assert (refused.value.code, refused.value.status["message"]) == (403, message)


def test_the_requests_as_go_prints_them() -> None:
    assert Requested("ServiceAccount", "alice", "team").go_value() == "{ServiceAccount team alice    }"
