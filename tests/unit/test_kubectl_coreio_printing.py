"""kubectl coreio's output: tables padded as kubectl's tabwriter pads them (cells at least 10 wide
with their padding, 3 spaces after the longest), rules and subjects in one cell each."""

from __future__ import annotations

import io

from kubectl_coreio import printing


def test_a_table_is_padded_as_kubectls() -> None:
    out = io.StringIO()
    printing.table(out, ["NAME", "ROLE", "REASON"], [["a", "ClusterRole/view", "why"], ["bb", "", "x"]])
    assert out.getvalue().splitlines() == [
        "NAME      ROLE               REASON",
        "a         ClusterRole/view   why",
        "bb        <none>             x",
    ]


def test_a_rule_shows_its_verbs_then_what_they_apply_to() -> None:
    assert printing.rule({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}) == "[*] *.*"
    named = {
        "verbs": ["get"],
        "apiGroups": ["", "events.core.io"],
        "resources": ["events"],
        "resourceNames": ["a"],
    }
    assert printing.rule(named) == "[get] events,events.events.core.io/a"
    assert printing.rule({"verbs": ["get"], "nonResourceURLs": ["/healthz"]}) == "[get] /healthz"


def test_a_service_account_is_shown_with_its_namespace() -> None:
    assert printing.subject({"kind": "ServiceAccount", "name": "robot"}, "shop") == "shop/robot"
    assert (
        printing.subject({"kind": "ServiceAccount", "name": "robot", "namespace": "ops"}, "shop")
        == "ops/robot"
    )
    assert printing.subject({"kind": "User", "name": "alice"}, "shop") == "alice"
