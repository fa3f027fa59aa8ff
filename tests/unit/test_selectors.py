"""Label and field selectors: parsing, canonical strings, matching and upstream's error messages."""

from __future__ import annotations

import pytest

from apiserver.machinery.errors import StatusError
from apiserver.machinery.selectors import (
    DEFAULT_SELECTABLE_FIELDS,
    FieldRequirement,
    LabelSelector,
    Operator,
    Requirement,
    escape_field_value,
    field_label_not_known,
    format_label_selector,
    parse_field_selector,
    parse_label_selector,
    unescape_field_value,
)
from apiserver.resources import EventKind, RoleBindingKind

# Upstream's texts (k8s.io/apimachinery/pkg/api/validate/content), spelled out so that a change
# in the module cannot hide in a shared constant.
LABEL_VALUE_ERROR = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
NAME_PART_ERROR = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
PREFIX_PART_ERROR = (
    "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
GT_LT_ERROR = "for 'Gt', 'Lt' operators, the value must be an integer"


def label_error(text: str) -> str:
    with pytest.raises(StatusError) as info:
        parse_label_selector(text)
    assert info.value.code == 400
    assert info.value.reason == "BadRequest"
    assert info.value.status["code"] == 400
    return info.value.message


def field_error(text: str, allowed: object = DEFAULT_SELECTABLE_FIELDS, **kwargs: object) -> str:
    with pytest.raises(StatusError) as info:
        parse_field_selector(text, allowed, **kwargs)  # type: ignore[arg-type]
    assert (info.value.code, info.value.reason) == (400, "BadRequest")
    return info.value.message


# ---------------------------------------------------------------------------------------------
# Label selectors: parsing every operator.


@pytest.mark.parametrize(
    ("text", "requirement"),
    [
        ("a=b", Requirement("a", Operator.EQUALS, ("b",))),
        ("a==b", Requirement("a", Operator.DOUBLE_EQUALS, ("b",))),
        ("a!=b", Requirement("a", Operator.NOT_EQUALS, ("b",))),
        ("a in (b,c)", Requirement("a", Operator.IN, ("b", "c"))),
        ("a notin (c,b)", Requirement("a", Operator.NOT_IN, ("b", "c"))),
        ("a", Requirement("a", Operator.EXISTS)),
        ("!a", Requirement("a", Operator.DOES_NOT_EXIST)),
        ("a>1", Requirement("a", Operator.GREATER_THAN, ("1",))),
        ("a<10", Requirement("a", Operator.LESS_THAN, ("10",))),
        ("example.com/app=web", Requirement("example.com/app", Operator.EQUALS, ("web",))),
    ],
)
def test_each_operator_parses(text: str, requirement: Requirement) -> None:
    assert parse_label_selector(text).requirements == (requirement,)


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("a=", ("",)),
        ("a==", ("",)),
        ("a!=", ("",)),
        ("a in ()", ("",)),
        ("a in (,)", ("",)),
        ("a in (b,)", ("", "b")),
        ("a in (,b)", ("", "b")),
        ("a in (b,,c)", ("", "b", "c")),
        ("a in (b,b)", ("b",)),
    ],
)
def test_empty_and_duplicate_values(text: str, values: tuple[str, ...]) -> None:
    assert parse_label_selector(text).requirements[0].values == values


def test_upstream_doc_example() -> None:
    selector = parse_label_selector("x in (foo,,baz),y,z notin ()")
    assert selector.requirements == (
        Requirement("x", Operator.IN, ("", "baz", "foo")),
        Requirement("y", Operator.EXISTS),
        Requirement("z", Operator.NOT_IN, ("",)),
    )


def test_whitespace_is_ignored_between_tokens() -> None:
    selector = parse_label_selector(" \ta = b ,\n c in ( x , y ) ,  !d\r")
    assert str(selector) == "a=b,c in (x,y),!d"


def test_keywords_are_identifiers_where_a_value_or_key_is_expected() -> None:
    selector = parse_label_selector("in in (in,notin),notin=in")
    assert selector.requirements == (
        Requirement("in", Operator.IN, ("in", "notin")),
        Requirement("notin", Operator.EQUALS, ("in",)),
    )


def test_requirements_are_sorted_by_key_and_stable() -> None:
    selector = parse_label_selector("b=1,a=2,a!=3")
    assert [r.key for r in selector.requirements] == ["a", "a", "b"]
    assert str(selector) == "a=2,a!=3,b=1"


@pytest.mark.parametrize("text", ["", "   ", "\t\n"])
def test_empty_selector_selects_everything(text: str) -> None:
    selector = parse_label_selector(text)
    assert selector.empty
    assert selector.matches({})
    assert selector.matches({"any": "thing"})
    assert str(selector) == ""


def test_canonical_string() -> None:
    selector = parse_label_selector("z notin (b,a), y in (c), x, !w, v>5, u<6, t==s, r!=q, p=o")
    assert format_label_selector(selector) == "p=o,r!=q,t==s,u<6,v>5,!w,x,y in (c),z notin (a,b)"
    # The canonical string parses back to the same selector.
    assert parse_label_selector(str(selector)) == selector
    assert format_label_selector(LabelSelector()) == ""


def test_value_of_63_bytes_and_long_keys_are_accepted() -> None:
    parse_label_selector("a=" + "v" * 63)
    parse_label_selector("k" * 63)
    parse_label_selector("p" * 253 + "/" + "n" * 63)


# ---------------------------------------------------------------------------------------------
# Label selectors: matching.


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("a=b", {"a": "b"}, True),
        ("a=b", {"a": "c"}, False),
        ("a=b", {}, False),
        ("a==b", {"a": "b"}, True),
        ("a=", {"a": ""}, True),
        ("a=", {}, False),
        ("a!=b", {"a": "c"}, True),
        ("a!=b", {"a": "b"}, False),
        ("a!=b", {}, True),
        ("a in (b,c)", {"a": "c"}, True),
        ("a in (b,c)", {"a": "d"}, False),
        ("a in (b,c)", {}, False),
        ("a notin (b,c)", {"a": "d"}, True),
        ("a notin (b,c)", {"a": "b"}, False),
        ("a notin (b,c)", {}, True),
        ("a", {"a": ""}, True),
        ("a", {"b": "a"}, False),
        ("!a", {}, True),
        ("!a", {"a": "x"}, False),
        ("a>5", {"a": "6"}, True),
        ("a>5", {"a": "5"}, False),
        ("a>5", {"a": "50"}, True),
        ("a>5", {"a": "x"}, False),
        ("a>5", {}, False),
        ("a<5", {"a": "-7"}, True),
        ("a<5", {"a": "5"}, False),
        ("a<5", {"a": "+4"}, True),
        ("a<5", {"a": "4.0"}, False),
        ("a<5", {"a": "99999999999999999999"}, False),
        ("a=b,c", {"a": "b", "c": "d"}, True),
        ("a=b,c", {"a": "b"}, False),
    ],
)
def test_matching(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(text).matches(labels) is expected


def test_matching_none_labels() -> None:
    assert parse_label_selector("!a").matches(None)
    assert not parse_label_selector("a").matches(None)


def test_requires_exact_match() -> None:
    selector = parse_label_selector("a=1,b==2,c in (3),d in (4,5),e!=6,f")
    assert selector.requires_exact_match("a") == "1"
    assert selector.requires_exact_match("b") == "2"
    assert selector.requires_exact_match("c") == "3"
    assert selector.requires_exact_match("d") is None
    assert selector.requires_exact_match("e") is None
    assert selector.requires_exact_match("f") is None
    assert selector.requires_exact_match("missing") is None


# ---------------------------------------------------------------------------------------------
# Label selectors: errors, worded as labels.Parse words them.


def test_invalid_value() -> None:
    assert (
        label_error("foo=-")
        == f'unable to parse requirement: values[0][foo]: Invalid value: "-": {LABEL_VALUE_ERROR}'
    )


def test_invalid_value_in_a_set_reports_its_sorted_index() -> None:
    message = label_error("foo in (b,-a)")
    assert message == f'unable to parse requirement: values[0][foo]: Invalid value: "-a": {LABEL_VALUE_ERROR}'


def test_too_long_value() -> None:
    value = "v" * 64
    assert label_error(f"a={value}") == (
        f'unable to parse requirement: values[0][a]: Invalid value: "{value}": '
        "must be no more than 63 characters"
    )


def test_invalid_key_reports_a_nil_path() -> None:
    assert label_error("-a") == f'unable to parse requirement: <nil>: Invalid value: "-a": {NAME_PART_ERROR}'


def test_key_with_two_slashes() -> None:
    assert label_error("a/b/c=d") == (
        'unable to parse requirement: <nil>: Invalid value: "a/b/c": a qualified name must consist of '
        "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
        "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' "
        "(e.g. 'example.com/MyName')"
    )


def test_key_with_invalid_prefix() -> None:
    assert label_error("Example.com/a") == (
        f'unable to parse requirement: <nil>: Invalid value: "Example.com/a": {PREFIX_PART_ERROR}'
    )


def test_key_with_empty_prefix_or_name() -> None:
    assert (
        label_error("/a")
        == 'unable to parse requirement: <nil>: Invalid value: "/a": prefix part must be non-empty'
    )
    assert label_error("a/") == (
        'unable to parse requirement: <nil>: Invalid value: "a/": '
        f"name part must be non-empty; {NAME_PART_ERROR}"
    )


def test_too_long_key_name() -> None:
    key = "k" * 64
    assert label_error(key) == (
        f'unable to parse requirement: <nil>: Invalid value: "{key}": '
        "name part must be no more than 63 characters"
    )


def test_gt_lt_need_an_integer() -> None:
    assert label_error("a>x") == f'unable to parse requirement: values[0]: Invalid value: "x": {GT_LT_ERROR}'
    assert (
        label_error("a<1.5") == f'unable to parse requirement: values[0]: Invalid value: "1.5": {GT_LT_ERROR}'
    )
    big = "9223372036854775808"
    assert (
        label_error(f"a>{big}")
        == f'unable to parse requirement: values[0]: Invalid value: "{big}": {GT_LT_ERROR}'
    )


def test_negative_number_is_not_a_label_value() -> None:
    assert (
        label_error("a>-1")
        == f'unable to parse requirement: values[0][a]: Invalid value: "-1": {LABEL_VALUE_ERROR}'
    )


def test_several_problems_are_aggregated_in_brackets() -> None:
    assert label_error("a>-x") == (
        f'unable to parse requirement: [values[0]: Invalid value: "-x": {GT_LT_ERROR}, '
        f'values[0][a]: Invalid value: "-x": {LABEL_VALUE_ERROR}]'
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a !b", "unable to parse requirement: found '!', expected: in, notin, =, ==, !=, gt, lt"),
        ("a=(b)", "unable to parse requirement: found '(', expected: identifier"),
        ("a=!b", "unable to parse requirement: found '!', expected: identifier"),
        ("a in b", "unable to parse requirement: found 'b' expected: '('"),
        ("a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'"),
        ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("a in (", "unable to parse requirement: found '', expected: ',', ')' or identifier"),
        ("a in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
        ("a in (b,=)", "unable to parse requirement: found '=', expected: ',', or identifier"),
        ("!,a", "unable to parse requirement: found ',', expected: identifier"),
        ("!!a", "unable to parse requirement: found '!', expected: identifier"),
        ("a,", "found '', expected: identifier after ','"),
        ("a,,b", "found ',', expected: identifier after ','"),
        (",a", "found ',', expected: !, identifier, or 'end of string'"),
        ("!=a", "found '!=', expected: !, identifier, or 'end of string'"),
        ("(a)", "found '(', expected: !, identifier, or 'end of string'"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("a=b)", "found ')', expected: ',' or 'end of string'"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
    ],
)
def test_syntax_errors(text: str, message: str) -> None:
    assert label_error(text) == message


# ---------------------------------------------------------------------------------------------
# Field selectors.


def test_field_selector_terms() -> None:
    selector = parse_field_selector("metadata.name=a", DEFAULT_SELECTABLE_FIELDS)
    assert selector.requirements == (FieldRequirement("metadata.name", Operator.EQUALS, "a"),)
    assert parse_field_selector("metadata.name==a", DEFAULT_SELECTABLE_FIELDS) == selector
    selector = parse_field_selector("metadata.name!=a", DEFAULT_SELECTABLE_FIELDS)
    assert selector.requirements == (FieldRequirement("metadata.name", Operator.NOT_EQUALS, "a"),)


def test_field_selector_terms_are_sorted_as_written() -> None:
    selector = parse_field_selector("metadata.namespace=b,metadata.name!=a", DEFAULT_SELECTABLE_FIELDS)
    assert [r.field for r in selector.requirements] == ["metadata.name", "metadata.namespace"]
    assert str(selector) == "metadata.name!=a,metadata.namespace=b"


@pytest.mark.parametrize("text", ["", ",", ",,"])
def test_empty_field_selector(text: str) -> None:
    selector = parse_field_selector(text, DEFAULT_SELECTABLE_FIELDS)
    assert selector.empty
    assert selector.matches({"metadata.name": "x"})
    assert str(selector) == ""


def test_name_pinning_for_the_single_object_fast_path() -> None:
    selector = parse_field_selector("metadata.namespace=ns,metadata.name=web", DEFAULT_SELECTABLE_FIELDS)
    assert selector.requires_exact_match("metadata.name") == "web"
    assert selector.requires_exact_match("metadata.namespace") == "ns"
    assert (
        parse_field_selector("metadata.name!=web", DEFAULT_SELECTABLE_FIELDS).requires_exact_match(
            "metadata.name"
        )
        is None
    )
    assert parse_field_selector("", DEFAULT_SELECTABLE_FIELDS).requires_exact_match("metadata.name") is None


@pytest.mark.parametrize(
    ("text", "fields", "expected"),
    [
        ("metadata.name=a", {"metadata.name": "a"}, True),
        ("metadata.name=a", {"metadata.name": "b"}, False),
        ("metadata.name!=a", {"metadata.name": "b"}, True),
        ("metadata.name!=a", {"metadata.name": "a"}, False),
        # An absent field reads as "", as fields.Set.Get answers.
        ("metadata.name=", {}, True),
        ("metadata.name!=", {}, False),
        ("metadata.name=a", {}, False),
        ("metadata.name=a,metadata.namespace=b", {"metadata.name": "a", "metadata.namespace": "b"}, True),
        ("metadata.name=a,metadata.namespace=b", {"metadata.name": "a", "metadata.namespace": "c"}, False),
    ],
)
def test_field_matching(text: str, fields: dict[str, str], expected: bool) -> None:
    assert parse_field_selector(text, DEFAULT_SELECTABLE_FIELDS).matches(fields) is expected


def test_escaped_values() -> None:
    selector = parse_field_selector(r"metadata.name=a\,b\=c\\d", DEFAULT_SELECTABLE_FIELDS)
    assert selector.requirements[0].value == "a,b=c\\d"
    # String() escapes again, so the canonical string parses back to the same selector.
    assert str(selector) == r"metadata.name=a\,b\=c\\d"
    assert parse_field_selector(str(selector), DEFAULT_SELECTABLE_FIELDS) == selector


def test_escape_round_trip() -> None:
    for value in ["", "plain", "a,b", "a=b", "a\\b", "\\,=\\\\", "!x"]:
        assert unescape_field_value(escape_field_value(value)) == value


def test_bang_needs_no_escape_and_cannot_be_escaped() -> None:
    assert parse_field_selector("metadata.name=!b", DEFAULT_SELECTABLE_FIELDS).requirements[0].value == "!b"
    assert field_error(r"metadata.name=a\!b") == "invalid field selector: invalid escape sequence: \\!"


def test_only_the_first_operator_splits_a_term() -> None:
    selector = parse_field_selector(r"metadata.name=a\=\=b", DEFAULT_SELECTABLE_FIELDS)
    assert selector.requirements[0].value == "a==b"
    # `==` is tried before `=` at each position, so no `=` is left on the value.
    assert parse_field_selector("metadata.name==b", DEFAULT_SELECTABLE_FIELDS).requirements[0].value == "b"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("abc", "invalid selector: 'abc'; can't understand 'abc'"),
        ("metadata.name=a,abc", "invalid selector: 'metadata.name=a,abc'; can't understand 'abc'"),
        ("metadata.name=a=b", "invalid field selector: unescaped character in value: 61"),
        ("metadata.name===b", "invalid field selector: unescaped character in value: 61"),
        ("metadata.name=a\\", "invalid field selector: invalid escape sequence: \\"),
        ("metadata.name=a\\x", "invalid field selector: invalid escape sequence: \\x"),
    ],
)
def test_field_selector_syntax_errors(text: str, message: str) -> None:
    assert field_error(text) == message


def test_unsupported_field_as_a_kind_with_its_own_conversion_answers() -> None:
    assert field_error("spec.foo=x") == "field label not supported: spec.foo"
    assert field_error("=x") == "field label not supported: "


def test_unsupported_field_as_the_default_conversion_answers() -> None:
    message = field_error("spec.foo=x", unsupported=field_label_not_known)
    assert message == '"spec.foo" is not a known field selector: only "metadata.name", "metadata.namespace"'


def test_whitespace_is_part_of_the_field_name() -> None:
    assert field_error("metadata.name = x") == "field label not supported: metadata.name "


def test_parse_errors_come_before_conversion_errors() -> None:
    # "foo=x" sorts first, but every term is parsed before any is converted.
    assert (
        field_error("foo=x,metadata.name=a=b") == "invalid field selector: unescaped character in value: 61"
    )


def test_first_unsupported_field_in_sorted_order_is_reported() -> None:
    assert field_error("zz=1,aa=2,metadata.name=x") == "field label not supported: aa"


def test_allowed_mapping_renames_fields() -> None:
    allowed = {"regarding.name": "involvedObject.name", "metadata.name": "metadata.name"}
    selector = parse_field_selector("regarding.name=pod-1,metadata.name=e", allowed)
    assert selector.requirements == (
        FieldRequirement("metadata.name", Operator.EQUALS, "e"),
        FieldRequirement("involvedObject.name", Operator.EQUALS, "pod-1"),
    )
    assert selector.matches({"involvedObject.name": "pod-1", "metadata.name": "e"})
    assert field_error("involvedObject.name=x", allowed) == "field label not supported: involvedObject.name"


# ---------------------------------------------------------------------------------------------
# Field label conversion of the served kinds, as kube-apiserver v1.33 answers
# GET /apis/events.k8s.io/v1/events?fieldSelector=... (checked against the real server).

EVENTS = EventKind()
EVENT = {
    "metadata": {"name": "e1", "namespace": "default"},
    "reason": "Started",
    "type": "Warning",
    "reportingController": "example.com/ctl",
    "reportingInstance": "ctl-1",
    "deprecatedSource": {"component": "kubelet"},
    "regarding": {"kind": "Pod", "namespace": "default", "name": "pod-1", "uid": "u-1"},
}


def event_selector(text: str) -> tuple[FieldRequirement, ...]:
    return parse_field_selector(text, EVENTS.field_labels, unsupported=EVENTS.field_label_error).requirements


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("metadata.name=e1", "metadata.name"),
        ("metadata.namespace=default", "metadata.namespace"),
        ("reason=Started", "reason"),
        ("type=Warning", "type"),
        ("reportingController=example.com/ctl", "reportingComponent"),
        ("regarding.kind=Pod", "involvedObject.kind"),
        ("regarding.namespace=default", "involvedObject.namespace"),
        ("regarding.name=pod-1", "involvedObject.name"),
        ("regarding.uid=u-1", "involvedObject.uid"),
        ("regarding.apiVersion=", "involvedObject.apiVersion"),
        ("regarding.resourceVersion=", "involvedObject.resourceVersion"),
        ("regarding.fieldPath=", "involvedObject.fieldPath"),
    ],
)
def test_event_labels_convert_to_the_core_field_set_and_match(text: str, field: str) -> None:
    (requirement,) = event_selector(text)
    assert (requirement.field, requirement.operator) == (field, Operator.EQUALS)
    # The value is kept, and each accepted label matches the Event that has it.
    assert requirement.value == text.partition("=")[2]
    assert requirement.matches(EVENTS.selectable_fields(EVENT))
    assert not FieldRequirement(field, Operator.NOT_EQUALS, requirement.value).matches(
        EVENTS.selectable_fields(EVENT)
    )


@pytest.mark.parametrize(
    "label",
    [
        "reportingInstance",
        "source",
        "reportingComponent",
        "involvedObject.kind",
        "series.count",
        "note",
        "action",
        "metadata.uid",
        "deprecatedSource.component",
        "Reason",
        "nonsense.field",
    ],
)
def test_event_labels_outside_the_conversion_are_refused(label: str) -> None:
    message = field_error(f"{label}=x", EVENTS.field_labels, unsupported=EVENTS.field_label_error)
    assert message == f"field label not supported: {label}"


def test_event_refusal_names_the_first_refused_label_in_sorted_order() -> None:
    allowed, unsupported = EVENTS.field_labels, EVENTS.field_label_error
    assert field_error("source=x,regarding.kind=Pod", allowed, unsupported=unsupported) == (
        "field label not supported: source"
    )
    assert field_error("reason=Started,reportingInstance=x", allowed, unsupported=unsupported) == (
        "field label not supported: reportingInstance"
    )


def test_converted_event_selector_parses_again_on_its_field_set() -> None:
    # A named watch pins metadata.name onto the already converted selector and parses the result
    # against the field set's own names.
    converted = parse_field_selector(r"regarding.kind=Pod,reportingController=a\,b", EVENTS.field_labels)
    again = parse_field_selector(f"{converted},metadata.name=e1", EVENTS.selectable_field_names)
    assert str(again) == r"involvedObject.kind=Pod,metadata.name=e1,reportingComponent=a\,b"


def test_role_binding_keeps_the_default_conversion() -> None:
    bindings = RoleBindingKind()
    assert dict(bindings.field_labels) == {name: name for name in DEFAULT_SELECTABLE_FIELDS}
    message = field_error("reason=x", bindings.field_labels, unsupported=bindings.field_label_error)
    assert message == '"reason" is not a known field selector: only "metadata.name", "metadata.namespace"'
