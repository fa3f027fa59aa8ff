"""The audit policy (--audit-policy-file) as upstream reads and applies it: the first rule that matches
sets the level, no match is level None, and each rule field narrows what a rule matches."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from apiserver.audit.policy import DEFAULT_POLICY, Level, Policy, PolicyError, load_policy, policy_from_bytes
from apiserver.auth.requestinfo import RequestInfo, request_info
from apiserver.machinery.user import UserInfo

ALICE = UserInfo("alice", groups=("team-a", "system:authenticated"))
BOB = UserInfo("bob", groups=("system:authenticated",))
RB = "/apis/rbac.authorization.core.io/v1/namespaces/team/rolebindings"


def policy(*rules: dict[str, object], **top: object) -> Policy:
    document = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": list(rules), **top}
    return policy_from_bytes(yaml.safe_dump(document).encode())


def info(method: str, path: str, **query: str) -> RequestInfo:
    return request_info(method, path, query)


def level(p: Policy, user: UserInfo | None, request: RequestInfo) -> str:
    return p.evaluate(user, request).level.wire


def test_the_first_matching_rule_wins_and_no_match_is_none() -> None:
    p = policy(
        {"level": "RequestResponse", "users": ["alice"]},
        {"level": "Metadata", "verbs": ["get", "list"]},
    )
    assert level(p, ALICE, info("GET", f"{RB}/x")) == "RequestResponse"
    assert level(p, BOB, info("GET", f"{RB}/x")) == "Metadata"
    assert level(p, BOB, info("POST", RB)) == "None"


@pytest.mark.parametrize(
    ("rule", "user", "request_", "matches"),
    [
        ({"users": ["bob"]}, ALICE, info("GET", RB), False),
        ({"userGroups": ["team-a"]}, ALICE, info("GET", RB), True),
        ({"userGroups": ["team-a"]}, BOB, info("GET", RB), False),
        ({"userGroups": ["team-a"]}, None, info("GET", RB), False),
        ({"verbs": ["watch"]}, ALICE, info("GET", RB, watch="true"), True),
        ({"verbs": ["watch"]}, ALICE, info("GET", RB), False),
        ({"namespaces": ["team"]}, ALICE, info("GET", RB), True),
        ({"namespaces": ["other"]}, ALICE, info("GET", RB), False),
        # Namespaces only match resource requests.
        ({"namespaces": ["team"]}, ALICE, info("GET", "/healthz"), False),
        ({"nonResourceURLs": ["/version"]}, ALICE, info("GET", "/version"), True),
        ({"nonResourceURLs": ["/apis*"]}, ALICE, info("GET", "/apis/events.core.io"), True),
        ({"nonResourceURLs": ["/apis*"]}, ALICE, info("GET", RB), False),
        ({"nonResourceURLs": ["*"]}, ALICE, info("GET", "/openapi/v2"), True),
        ({"nonResourceURLs": ["/version"]}, ALICE, info("GET", "/versions"), False),
    ],
)
def test_each_rule_field_narrows_the_rule(
    rule: dict[str, object], user: UserInfo | None, request_: RequestInfo, matches: bool
) -> None:
    p = policy({"level": "Request", **rule})
    assert level(p, user, request_) == ("Request" if matches else "None")


RBAC = "rbac.authorization.core.io"


@pytest.mark.parametrize(
    ("resources", "path", "matches"),
    [
        ({"group": RBAC}, f"{RB}/x", True),
        ({"group": "events.core.io"}, f"{RB}/x", False),
        # The core group is the empty one.
        ({"group": ""}, "/api/v1/namespaces/x", True),
        ({"group": RBAC, "resources": ["rolebindings"]}, f"{RB}/x", True),
        ({"group": RBAC, "resources": ["*"]}, f"{RB}/x", True),
        ({"group": RBAC, "resources": ["rolebindings"], "resourceNames": ["x"]}, f"{RB}/x", True),
        ({"group": RBAC, "resources": ["rolebindings"], "resourceNames": ["y"]}, f"{RB}/x", False),
        # A subresource matches "resource/subresource", "*/subresource" and "resource/*" only.
        ({"group": RBAC, "resources": ["rolebindings"]}, f"{RB}/x/status", False),
        ({"group": RBAC, "resources": ["rolebindings/status"]}, f"{RB}/x/status", True),
        ({"group": RBAC, "resources": ["*/status"]}, f"{RB}/x/status", True),
        ({"group": RBAC, "resources": ["rolebindings/*"]}, f"{RB}/x/status", True),
        ({"group": RBAC, "resources": ["*/scale"]}, f"{RB}/x/status", False),
    ],
)
def test_resources_match_as_upstream(resources: dict[str, object], path: str, matches: bool) -> None:
    p = policy({"level": "Metadata", "resources": [resources]})
    assert level(p, ALICE, info("GET", path)) == ("Metadata" if matches else "None")


def test_omit_stages_of_the_policy_and_the_rule_are_joined() -> None:
    p = policy({"level": "Metadata", "omitStages": ["ResponseStarted"]}, omitStages=["RequestReceived"])
    assert p.evaluate(ALICE, info("GET", RB)).omit_stages == {"RequestReceived", "ResponseStarted"}


def test_omit_managed_fields_is_the_policy_default_unless_the_rule_says() -> None:
    p = policy(
        {"level": "Request", "users": ["alice"], "omitManagedFields": False},
        {"level": "Request"},
        omitManagedFields=True,
    )
    assert p.evaluate(ALICE, info("GET", RB)).omit_managed_fields is False
    assert p.evaluate(BOB, info("GET", RB)).omit_managed_fields is True


def test_without_a_policy_file_every_request_is_metadata_once_complete() -> None:
    config = DEFAULT_POLICY.evaluate(BOB, info("POST", RB))
    assert config.level == Level.METADATA
    assert "ResponseComplete" not in config.omit_stages and "RequestReceived" in config.omit_stages


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            {"rules": [{"level": "Everything"}]},
            'rules[0].level: Unsupported value: "Everything": supported values: "None", "Metadata",'
            ' "Request", "RequestResponse"',
        ),
        ({"rules": [{"verbs": ["get"]}]}, "rules[0].level: Required value"),
        (
            {"rules": [{"level": "None", "nonResourceURLs": ["/x"], "namespaces": ["a"]}]},
            'rules[0].nonResourceURLs: Invalid value: []string{"/x"}: rules cannot apply to both regular'
            " resources and non-resource URLs",
        ),
        (
            {"rules": [{"level": "None", "nonResourceURLs": ["x"]}]},
            "rules[0].nonResourceURLs[0]: Invalid value: \"x\": non-resource URL rules must begin with a '/'"
            " character",
        ),
        (
            {"rules": [{"level": "None", "nonResourceURLs": ["/a*/b"]}]},
            "rules[0].nonResourceURLs[0]: Invalid value: \"/a*/b\": non-resource URL wildcards '*' must be"
            " the final character of the rule",
        ),
        (
            {"rules": [{"level": "None", "resources": [{"group": "rbac/v1"}]}]},
            'rules[0].resources.group: Invalid value: "rbac/v1": a lowercase RFC 1123 subdomain',
        ),
        (
            {"rules": [{"level": "None", "resources": [{"group": "", "resourceNames": ["x"]}]}]},
            'rules[0].resources.resourceNames: Invalid value: []string{"x"}: using resourceNames requires'
            " at least one resource",
        ),
        (
            {"omitStages": ["Done"], "rules": [{"level": "None"}]},
            'omitStages[0]: Invalid value: "Done": allowed stages are'
            " RequestReceived,ResponseStarted,ResponseComplete,Panic",
        ),
        ({"rules": []}, "loaded illegal policy with 0 rules"),
        (
            {"apiVersion": "audit.k8s.io/v2"},
            "unknown group version field audit.k8s.io/v2, Kind=Policy in policy",
        ),
    ],
)
def test_an_invalid_policy_is_refused_in_upstream_words(
    tmp_path: Path, document: dict[str, object], message: str
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", **document}))
    with pytest.raises(PolicyError) as caught:
        load_policy(str(path))
    assert message in str(caught.value)
    assert str(caught.value).endswith(f": from file {path}")
    assert "\n" not in str(caught.value)


def test_several_problems_are_one_line_in_brackets() -> None:
    with pytest.raises(
        PolicyError, match=r"^\[rules\[0\]\.level: Required value, rules\[1\]\.level: Required"
    ):
        policy({}, {})


def test_a_json_policy_is_read_too(tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    path.write_text('{"apiVersion":"audit.k8s.io/v1","kind":"Policy","rules":[{"level":"Request"}]}')
    assert load_policy(str(path)).rules[0].level == Level.REQUEST


def test_a_missing_file_is_named() -> None:
    with pytest.raises(PolicyError, match=r'failed to read file path "/nonexistent/policy\.yaml"'):
        load_policy("/nonexistent/policy.yaml")
