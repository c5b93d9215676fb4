"""The scan for unclassified personal data: what it finds, what it does not, and that it keeps no value."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from dsm.validators.pii import luhn_valid, scan_batches


def _luhn_complete(body: str) -> str:
    """``body`` and the check digit that makes it pass the Luhn check."""
    for digit in "0123456789":
        if luhn_valid(body + digit):
            return body + digit
    raise AssertionError("unreachable")


def test_finds_planted_values_and_keeps_none() -> None:
    batch = pa.record_batch(
        {
            "contact": ["ann@example.com", None, "call +44 20 7946 0958", "bob.lee@mail.example.org", "-"],
            "payment": ["4111 1111 1111 1111", "5500-0000-0000-0004", "n/a", "378282246310005", "1234"],
            "email": ["classified@example.com"] * 5,
            "id": [1, 2, 3, 4, 5],
        }
    )
    findings = scan_batches([batch], classified={"email"})
    assert [(f.field, f.kind, f.count, f.sampled) for f in findings] == [
        ("contact", "email", 2, 4),
        ("contact", "phone", 1, 4),
        ("payment", "card", 3, 5),
    ]
    text = repr([f.to_dict() for f in findings])
    assert "example.com" not in text and "4111" not in text  # counts only, never a value


def test_nested_strings_are_scanned_by_path() -> None:
    messages = pa.array(
        [[{"role": "user", "content": "mail me at eve@example.net"}], [{"role": "bot", "content": "ok"}]],
        type=pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])),
    )
    tags = pa.array([{"owner": "x@y.io"}, {}], type=pa.map_(pa.string(), pa.string()))
    findings = scan_batches([pa.record_batch({"messages": messages, "tags": tags})], classified=set())
    assert [(f.field, f.kind, f.count) for f in findings] == [
        ("messages.content", "email", 1),
        ("tags.value", "email", 1),
    ]


def test_ordinary_values_are_not_taken_for_personal_data() -> None:
    values = [
        "1234567890",  # an id
        "2024-01-15T10:00:00Z",
        "192.168.10.1",
        "v1.2.3",
        "3fa85f64-5717-4562-b3fc-2c963f66afa6",
        "1700000000123",  # epoch milliseconds
        "user at example dot com",
        "1111 1111 1111 1111",  # one repeated digit
        "9999999999999995",  # starts outside the card ranges
    ]
    assert scan_batches([pa.record_batch({"text": values})], classified=set()) == []


@settings(max_examples=80, deadline=None)
@given(
    first=st.sampled_from("23456"),
    rest=st.text(alphabet="0123456789", min_size=11, max_size=17),
    separator=st.sampled_from(["", " ", "-"]),
)
def test_every_luhn_valid_card_layout_is_found(first: str, rest: str, separator: str) -> None:
    number = _luhn_complete(first + rest)
    if len(set(number)) == 1:
        return
    grouped = separator.join(number[i : i + 4] for i in range(0, len(number), 4))
    (finding,) = scan_batches([pa.record_batch({"pay": [f"paid with {grouped} today"]})], classified=set())
    assert (finding.kind, finding.count) == ("card", 1)
    broken = number[:-1] + str((int(number[-1]) + 1) % 10)  # one digit off: fails the check
    assert not [
        f for f in scan_batches([pa.record_batch({"pay": [broken]})], classified=set()) if f.kind == "card"
    ]
