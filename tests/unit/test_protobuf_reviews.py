"""The review objects kubectl sends as protobuf (bytes captured from kubectl v1.33.9 against
kube-apiserver v1.33) decode to the JSON objects they stand for."""

from __future__ import annotations

import pytest

from apiserver.http.selfreviews import parse_review
from apiserver.machinery import errors, protobuf
from apiserver.rbac.selfreviews import ACCESS_REVIEW, RULES_REVIEW, SELF_REVIEW

PROTOBUF = "application/vnd.kubernetes.protobuf"
CAN_I_GET_PODS = bytes.fromhex(
    "6b3873000a320a17617574686f72697a6174696f6e2e6b38732e696f2f7631121753656c665375626a6563744163636573"
    "735265766965771239"
    "0a100a0012001a0022002a00320038004200121b0a190a047465616d12036765741a0022002a0470"
    "6f647332003a001a08080012001a0020001a002200"
)
CAN_I_GET_HEALTHZ = bytes.fromhex(
    "6b3873000a320a17617574686f72697a6174696f6e2e6b38732e696f2f7631121753656c665375626a6563744163636573"
    "73526576696577122f0a100a0012001a0022002a003200380042001211120f0a082f6865616c74687a12036765741a0808"
    "0012001a0020001a002200"
)
CAN_I_LIST = bytes.fromhex(
    "6b3873000a310a17617574686f72697a6174696f6e2e6b38732e696f2f7631121653656c665375626a65637452756c6573"
    "5265766965771220"
    "0a100a0012001a0022002a0032003800420012060a047465616d1a04180022001a002200"
)
WHOAMI = bytes.fromhex(
    "6b3873000a2d0a1861757468656e7469636174696f6e2e6b38732e696f2f7631121153656c665375626a65637452657669"
    "6577121a0a100a0012001a0022002a0032003800420012060a040a0012001a002200"
)


def test_can_i_get_pods() -> None:
    review = parse_review(PROTOBUF, CAN_I_GET_PODS, ACCESS_REVIEW)
    assert (review["kind"], review["apiVersion"]) == ("SelfSubjectAccessReview", "authorization.k8s.io/v1")
    assert review["spec"] == {"resourceAttributes": {"namespace": "team", "verb": "get", "resource": "pods"}}
    assert set(review) == {"kind", "apiVersion", "spec"}  # empty metadata and status left out


def test_can_i_get_a_path() -> None:
    review = parse_review(PROTOBUF, CAN_I_GET_HEALTHZ, ACCESS_REVIEW)
    assert review["spec"] == {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}}


def test_can_i_list() -> None:
    review = parse_review(PROTOBUF, CAN_I_LIST, RULES_REVIEW)
    assert (review["kind"], review["spec"]) == ("SelfSubjectRulesReview", {"namespace": "team"})


def test_whoami() -> None:
    review = parse_review(PROTOBUF, WHOAMI, SELF_REVIEW)
    assert (review["kind"], review["apiVersion"]) == ("SelfSubjectReview", "authentication.k8s.io/v1")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            b'{"kind": "x"}',
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]",
        ),
        (protobuf.MAGIC + b"\x0a\x05ab", "truncated field"),
        (protobuf.MAGIC + b"\x12\x02\x10\x01", "spec: expected a message"),
        (protobuf.MAGIC + b"\x12\x03\x12\x01\xff", "truncated varint"),
    ],
)
def test_garbage_is_a_400(body: bytes, message: str) -> None:
    with pytest.raises(errors.StatusError) as refused:
        parse_review(PROTOBUF, body, ACCESS_REVIEW)
    assert (refused.value.code, refused.value.status["message"]) == (400, message)


def test_json_and_yaml_bodies_are_read_too() -> None:
    sent = {"kind": "SelfSubjectRulesReview", "spec": {"namespace": "team"}}
    assert (
        parse_review(
            "application/json", b'{"kind":"SelfSubjectRulesReview","spec":{"namespace":"team"}}', RULES_REVIEW
        )
        == sent
    )
    assert (
        parse_review(
            "application/yaml", b"kind: SelfSubjectRulesReview\nspec: {namespace: team}\n", RULES_REVIEW
        )
        == sent
    )
