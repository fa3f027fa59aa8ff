"""Go's time.Parse of the API's two layouts: the direct reading of each layout's own UTC form
(what clients send) answers exactly as the full parser does, which answers as Go."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.machinery import gotime

LAYOUTS = (gotime.TIME_LAYOUT, gotime.MICRO_TIME_LAYOUT)


def full_parse(layout: str, text: str) -> datetime | str:
    try:
        return gotime.parse_fully(layout, text)
    except gotime.TimeParseError as exc:
        return str(exc)


_TWO = st.sampled_from(
    ["00", "01", "02", "09", "12", "13", "23", "24", "28", "29", "30", "31", "59", "60", "7x"]
)
_YEAR = st.sampled_from(["0000", "0001", "1999", "2000", "2024", "2100", "9999", "20a4"])
_FRACTION = st.sampled_from(["", ".123456", ".000000", ".12345", ".1234567", ",123456"])


@settings(max_examples=400, deadline=None)
@given(
    layout=st.sampled_from(LAYOUTS),
    year=_YEAR,
    parts=st.tuples(_TWO, _TWO, _TWO, _TWO, _TWO),
    fraction=_FRACTION,
    zone=st.sampled_from(["Z", "z", "+00:00", ""]),
)
def test_the_direct_reading_agrees_with_the_full_parser(
    layout: str, year: str, parts: tuple[str, ...], fraction: str, zone: str
) -> None:
    month, day, hour, minute, second = parts
    text = f"{year}-{month}-{day}T{hour}:{minute}:{second}{fraction}{zone}"
    direct = gotime._canonical(layout, text)
    if direct is None:
        return
    assert full_parse(layout, text) == direct


def test_clients_forms_are_read_directly() -> None:
    assert gotime._canonical(gotime.TIME_LAYOUT, "2024-02-29T23:59:59Z") == datetime(
        2024, 2, 29, 23, 59, 59, tzinfo=UTC
    )
    assert gotime._canonical(gotime.MICRO_TIME_LAYOUT, "2024-01-02T03:04:05.123456Z") == datetime(
        2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC
    )
    # Other forms go to the full parser, which gives Go's errors.
    assert gotime._canonical(gotime.TIME_LAYOUT, "2023-02-29T00:00:00Z") is None
    with pytest.raises(gotime.TimeParseError, match="day out of range"):
        gotime.parse(gotime.TIME_LAYOUT, "2023-02-29T00:00:00Z")
