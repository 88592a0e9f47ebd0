"""PII detectors: checksums and number ranges, the false positives they
must not report, the four modes, and linear time on adversarial input."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentscope_harness.pii import (
    DETECTORS,
    apply_pii,
    find_pii,
    hash_tag,
    iban_valid,
    luhn_valid,
    mask_value,
    ssn_valid,
    validate_pii_modes,
)


def kinds(text: str) -> list[tuple[str, str]]:
    return [(f.kind, f.value) for f in find_pii(text)]


@pytest.mark.parametrize("number, ok", [
    ("4111 1111 1111 1111", True), ("4111111111111112", False), ("378282246310005", True),
    ("5555-5555-5555-4444", True), ("6011111111111117", True), ("0", True), ("", False),
])
def test_luhn(number, ok):
    assert luhn_valid(number) is ok


@pytest.mark.parametrize("value, ok", [
    ("DE89 3704 0044 0532 0130 00", True), ("DE89370400440532013000", True),
    ("GB82WEST12345698765432", True), ("GB82 WEST 1234 5698 7654 32", True),
    ("FR1420041010050500013M02606", True), ("NO9386011117947", True),
    ("DE89 3704 0044 0532 0130 01", False),  # checksum
    ("ZZ89370400440532013000", False),  # no such country
    ("de89370400440532013000", False),  # lower case
    ("DE8937040044", False),  # too short
])
def test_iban(value, ok):
    assert iban_valid(value) is ok


@pytest.mark.parametrize("value, ok", [
    ("123-45-6789", True), ("000-12-3456", False), ("666-12-3456", False), ("900-12-3456", False),
    ("999-12-3456", False), ("123-00-4567", False), ("123-45-0000", False), ("899-99-9999", True),
])
def test_ssn_ranges(value, ok):
    assert ssn_valid(value) is ok
    assert (kinds(f"SSN {value}.") == [("ssn", value)]) is ok


@pytest.mark.parametrize("text, expected", [
    ("mail Jane.Doe+tag@mail.example.co.uk now", [("email", "Jane.Doe+tag@mail.example.co.uk")]),
    ("call (415) 555-0132", [("phone", "(415) 555-0132")]),
    ("call 415-555-0132 or 415.555.0132", [("phone", "415-555-0132"), ("phone", "415.555.0132")]),
    ("call +44 20 7946 0958", [("phone", "+44 20 7946 0958")]),
    ("call +1 (415) 555-0132", [("phone", "+1 (415) 555-0132")]),
    ("appelez le 06 12 34 56 78", [("phone", "06 12 34 56 78")]),
    ("ring 020 7946 0958 2024", [("phone", "020 7946 0958")]),  # the trailing number is not swallowed
    ("pay 4111-1111-1111-1111 today", [("payment_card", "4111-1111-1111-1111")]),
    ("amex 3782 822463 10005", [("payment_card", "3782 822463 10005")]),
    ("iban DE89 3704 0044 0532 0130 00 AND more", [("iban", "DE89 3704 0044 0532 0130 00")]),
    ("host 192.168.1.10.", [("ipv4", "192.168.1.10")]),
    ("v6 2001:db8::1 and ::1 and fe80::1ff:fe23:4567:890a", [
        ("ipv6", "2001:db8::1"), ("ipv6", "::1"), ("ipv6", "fe80::1ff:fe23:4567:890a")]),
    ("mapped ::ffff:192.0.2.1", [("ipv6", "::ffff:192.0.2.1")]),
])
def test_finds(text, expected):
    assert kinds(text) == expected


FALSE_POSITIVES = [
    "order 1234567890123456 shipped",  # bare digits, no Luhn-valid card prefix
    "order A-10422-7781, ref 2024-0001-55",
    "invoice 4111111111111112",  # fails Luhn
    "ts 1700000000123 and epoch 1718100000",
    "date 2024-06-11 10:30:45, 11/06/2024, 06.11.2024, 2024/06/11",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "version 1.2.3, v1.2.3.4, 10.0.19045.3803, 1.2.3.4.5",  # v-prefixed and 5-part are versions
    "bad ip 256.1.1.1 and 1.2.3.999",
    "C++ std::vector<int>, Rust Foo::bar, hex dead::beef, time 12:30:45, mac 00:1a:2b:3c:4d:5e",
    "sha DE89ABCDEF0123456789ABCDEF",  # IBAN shape, wrong checksum
    "phone-like 123-456-7890 and 5551234567",  # NANP area code cannot start with 1; bare digits
    "score 12 345 678 and 1 000 000 users",
    "email-ish a@b, @handle, user@localhost",
    "ssn-like 123456789 and 123-45-678",
]


@pytest.mark.parametrize("text", FALSE_POSITIVES)
def test_false_positives(text):
    assert find_pii(text) == []


def test_four_part_versions_are_reported_as_ipv4():
    # documented: a valid dotted quad cannot be told from a 4-part version
    assert kinds("release 1.2.3.4") == [("ipv4", "1.2.3.4")]


def test_findings_do_not_overlap_and_longest_wins():
    # the card's digits also contain phone- and SSN-shaped runs
    text = "card 4111 1111 1111 1111 / +1 415 555 0132 / a@b.io"
    found = find_pii(text)
    assert [f.kind for f in found] == ["payment_card", "phone", "email"]
    assert all(a.end <= b.start for a, b in itertools.pairwise(found))
    assert all(text[f.start:f.end] == f.value for f in found)


def test_modes():
    text = "mail jane@example.com card 4111 1111 1111 1111 ip 10.1.2.3"
    out = apply_pii(text, {"email": "redact", "payment_card": "mask", "ipv4": "hash"}, b"salt")
    assert out.text.startswith("mail [pii:email] card **** **** **** 1111 ip [pii:ipv4:")
    assert out.counts == {"email": 1, "payment_card": 1, "ipv4": 1}
    assert out.blocked_kinds == [] and out.changed


def test_block_reports_the_kind_and_redacts_anyway():
    out = apply_pii("ssn 123-45-6789 and 078-05-1120", {"ssn": "block"}, b"s")
    assert out.blocked_kinds == ["ssn"]
    assert out.counts == {"ssn": 2}
    assert "123-45-6789" not in out.text and "[pii:ssn]" in out.text


def test_kinds_not_configured_are_left_alone():
    out = apply_pii("jane@example.com 10.1.2.3", {"ipv4": "redact"}, b"s")
    assert out.text == "jane@example.com [pii:ipv4]"


@pytest.mark.parametrize("value, masked", [
    ("4111 1111 1111 1111", "**** **** **** 1111"),
    ("4111-1111-1111-1111", "****-****-****-1111"),
    ("(415) 555-0132", "(***) ***-0132"),
    ("jane.doe@example.com", "****.***@******e.com"),
    ("DE89 3704 0044 0532 0130 00", "**** **** **** **** **30 00"),
    ("abc", "abc"),
])
def test_mask_keeps_the_last_four_and_separators(value, masked):
    assert mask_value(value) == masked


def test_hash_is_stable_per_salt_and_normalised():
    a = hash_tag("email", "Jane@Example.com", b"run-1")
    assert a == hash_tag("email", "jane@example.com", b"run-1")  # same value, same tag
    assert a != hash_tag("email", "jane@example.com", b"run-2")  # other run, other tag
    assert a != hash_tag("email", "john@example.com", b"run-1")
    assert hash_tag("payment_card", "4111 1111 1111 1111", b"k") == hash_tag("payment_card", "4111-1111-1111-1111", b"k")
    assert a.startswith("[pii:email:") and len(a) == len("[pii:email:]") + 10
    out = apply_pii("a jane@example.com b JANE@example.com", {"email": "hash"}, b"run-1")
    assert out.text == f"a {a} b {a}"


def test_validate_modes_names_the_bad_key_or_value():
    assert validate_pii_modes({"email": "mask"}) == {"email": "mask"}
    assert validate_pii_modes({"all": "redact", "email": "hash"})["email"] == "hash"
    assert set(validate_pii_modes({"all": "block"})) == set(DETECTORS)
    with pytest.raises(ValueError, match="'emial'"):
        validate_pii_modes({"emial": "mask"})
    with pytest.raises(ValueError, match="'erase'.*'email'"):
        validate_pii_modes({"email": "erase"})
    with pytest.raises(ValueError, match="unknown pii detector"):
        find_pii("x", ["nope"])


M = 1 << 20


@pytest.mark.parametrize("name, text", [
    ("digits", "7" * M), ("at", "@" * M), ("hex colons", "a:" * (M // 2)), ("colons", ":" * M),
    ("letters", "a" * M), ("a@", "a@" * (M // 2)), ("dotted digits", "1." * (M // 2)),
    ("spaced digits", "1 " * (M // 2)), ("plus", "+1 " * (M // 3)),
    ("long local part", ("a" * 60 + ".") * (M // 61) + "@x"), ("long domain", "x@" + ("a" * 60 + ".") * (M // 61)),
    ("iban groups", "DE89 " * (M // 5)),
])
def test_adversarial_megabyte_completes(name, text):
    assert find_pii(text) == []


def test_adversarial_dense_findings_are_all_found():
    text = "4111 1111 1111 1111 " * (M // 20)
    assert len(find_pii(text)) == M // 20


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="0123456789 -.+()@:/abcDE", max_size=200))
def test_findings_are_exact_substrings_in_order(text):
    found = find_pii(text)
    assert all(text[f.start:f.end] == f.value for f in found)
    assert all(a.end <= b.start for a, b in itertools.pairwise(found))
    out = apply_pii(text, {"all": "redact"}, b"s")
    assert sum(out.counts.values()) == len(found)
    assert out.text.count("[pii:") == len(found) + text.count("[pii:")


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_a_large_result_scanned_in_pieces_equals_one_scan(seed: int) -> None:
    """Results over ``PII_INLINE`` are scanned in pieces (short regex calls,
    the event loop given turns between): the outcome equals one whole scan,
    values across a piece boundary included."""
    import asyncio
    import random

    from agentscope_harness.outputs import PII_INLINE, filter_result
    from agentscope_harness.redaction import Redactor

    rng = random.Random(seed)
    values = ["jane.doe@example.com", "4111 1111 1111 1111", "10.20.30.40", "078-05-1120", "+1 415 555 0100"]
    parts, size = [], 0
    while size < 3 * PII_INLINE:
        piece = rng.choice(values) if rng.random() < 0.3 else "x" * rng.randint(1, 300)
        parts.append(piece)
        size += len(piece) + 1
    text = " ".join(parts)
    modes = {"email": "hash", "payment_card": "mask", "ipv4": "redact", "ssn": "redact", "phone": "redact"}
    whole = apply_pii(text, modes, b"salt")
    _, _, pieces = asyncio.run(filter_result(Redactor(), text, modes, b"salt"))
    assert pieces.text == whole.text
    assert pieces.counts == whole.counts
