"""JavaScript string semantics (services/adapters/openclaw/jsstr.py) at every boundary of the UTF-16 ranges.

Expected values are worked out by hand from the UTF-16 encoding (an astral code point c is the pair
0xD800 + ((c - 0x10000) >> 10), 0xDC00 + ((c - 0x10000) & 0x3FF)) and were checked once against Node 24
(`s.length`, `s.slice`, `crypto.createHash("sha256").update(s)`) and against openclaw@2026.9.6's
`truncateUtf16Safe` (packages/normalization-core/src/utf16-slice.ts in its bundled dist/).
"""

from __future__ import annotations

import hashlib

import pytest

from services.adapters.openclaw.jsstr import (
    _from_units,
    _has_astral,
    _to_units,
    js_len,
    js_slice,
    sha256_hex,
    truncate_utf16_safe,
    well_formed,
)

# U+10000 is the first astral code point: units D800 DC00. U+10FFFF the last: DBFF DFFF. U+1F600: D83D DE00.
# U+FFFF is the last code point of the BMP: one unit.
FIRST, LAST, GRIN, BMP_LAST = "\U00010000", "\U0010FFFF", "\U0001F600", "\uFFFF"


@pytest.mark.parametrize("s, n", [
    ("", 0), ("abc", 3),
    ("\u00e9", 1),                     # BMP, not ASCII
    (BMP_LAST, 1), ("\uFFFE", 1),      # the top of the BMP: one unit each
    (FIRST, 2), (LAST, 2), (GRIN, 2),  # astral: a pair each
    ("a" + FIRST + "b" + BMP_LAST + LAST, 7),  # 1 + 2 + 1 + 1 + 2 (Node: 7)
    ("\ud800", 1), ("x\udc00", 2),     # lone surrogates count one unit each, as in JS
])
def test_js_len_counts_utf16_code_units(s, n):
    assert js_len(s) == n


@pytest.mark.parametrize("s, units", [
    (FIRST, "\ud800\udc00"),
    (LAST, "\udbff\udfff"),
    (GRIN, "\ud83d\ude00"),
    (BMP_LAST, BMP_LAST),                                  # the last BMP code point is not split
    ("\uFFFE" + FIRST, "\uFFFE\ud800\udc00"),
    ("a\u00e9" + GRIN + "z", "a\u00e9\ud83d\ude00z"),
])
def test_to_units_writes_each_astral_character_as_its_pair(s, units):
    assert _to_units(s) == units
    assert len(_to_units(s)) == js_len(s)


@pytest.mark.parametrize("units, s", [
    ("\ud800\udc00", FIRST),
    ("\udbff\udfff", LAST),
    ("x\ud83d\ude00y", "x" + GRIN + "y"),
    ("\ud800", "\ud800"),                 # a lone high surrogate stays
    ("\udfff", "\udfff"),                 # a lone low surrogate stays
    ("\udc00\ud800", "\udc00\ud800"),     # low then high is no pair
    ("\ud800\ud800\udc00", "\ud800" + FIRST),  # the second high pairs with the low
    ("plain \u00e9", "plain \u00e9"),
])
def test_from_units_joins_only_valid_pairs(units, s):
    assert _from_units(units) == s


@pytest.mark.parametrize("s, astral", [
    ("", False), ("abc", False), ("\u00e9", False), (BMP_LAST, False), ("\uFFFE\uFFFF", False),
    ("\ud800", False),                    # a lone surrogate is not an astral character
    (FIRST, True), (LAST, True), ("abc" + GRIN, True), (FIRST + FIRST, True),
])
def test_has_astral(s, astral):
    assert _has_astral(s) is astral


# s = "a" U+10000 "b" U+FFFF U+10FFFF; units: a D800 DC00 b FFFF DBFF DFFF (Node: length 7)
S = "a" + FIRST + "b" + BMP_LAST + LAST


@pytest.mark.parametrize("start, end, out", [
    (1, 2, "\ud800"),                        # half of U+10000 (Node: "\ud800")
    (2, 6, "\udc00b\uffff\udbff"),           # a low half, b, U+FFFF, a high half (Node)
    (0, 7, S), (0, None, S), (3, None, "b" + BMP_LAST + LAST),
    (1, 3, FIRST), (5, 7, LAST), (4, 5, BMP_LAST), (7, None, ""),
])
def test_js_slice_counts_code_units(start, end, out):
    assert js_slice(S, start, end) == out


@pytest.mark.parametrize("s, start, end, out", [
    ("hello", 1, 3, "el"), ("h\u00e9llo", 1, None, "\u00e9llo"), ("\uFFFF\uFFFE", 1, 2, "\uFFFE"),
    (FIRST, 0, 1, "\ud800"), (LAST, 1, 2, "\udfff"),   # an astral character alone is still two units
])
def test_js_slice_other_strings(s, start, end, out):
    assert js_slice(s, start, end) == out


@pytest.mark.parametrize("s, cap, out", [
    ("abc", 0, ""), ("abc", -1, ""), ("abc", 1, "a"), ("abc", 2, "ab"), ("abc", 3, "abc"), ("abc", 700, "abc"),
    ("", 0, ""), ("", 5, ""),
    ("\u00e9\u00e9", 1, "\u00e9"),                    # BMP, not ASCII
    ("a" + FIRST + "b", 1, "a"),
    ("a" + FIRST + "b", 2, "a"),                      # the cut would split D800|DC00: one unit fewer
    ("a" + FIRST + "b", 3, "a" + FIRST),
    ("a" + FIRST + "b", 4, "a" + FIRST + "b"),        # exactly its length: the input itself
    ("a" + FIRST + "b", 5, "a" + FIRST + "b"),
    ("a" + FIRST, 3, "a" + FIRST),                    # the length equals the cap
    (FIRST, 1, ""), (LAST, 1, ""),                    # the lowest and the highest high surrogate
    (FIRST + "x", 2, FIRST),                          # the cut falls after DC00: nothing to drop
    (GRIN * 3, 5, GRIN * 2),
    (BMP_LAST + FIRST, 1, BMP_LAST),                  # U+FFFF is one unit, not a high surrogate
    # upstream drops the last unit only when a high surrogate is followed by a low one: a lone high stays
    ("a\ud800b" + FIRST, 2, "a\ud800"),
    ("a\udbffb" + FIRST, 2, "a\udbff"),
    ("\udc00x\ud800", 0, ""),                         # cap 0 is empty, whatever the units at the edges
    ("a\ud800", 2, "a\ud800"),                        # exactly its length, ending on a lone high surrogate
    ("xa\udc00" + FIRST, 2, "xa"),                     # a low surrogate after the cut, but no high before it
    ("\ue000\udc00" + FIRST, 1, "\ue000"),             # U+E000 lies above the surrogates: no pair
    ("a\ud800\ue000", 2, "a\ud800"),                  # a high surrogate before the cut, but no low after it
])
def test_truncate_utf16_safe_matches_upstream(s, cap, out):
    assert truncate_utf16_safe(s, cap) == out


@pytest.mark.parametrize("s, out", [
    ("abc", "abc"), ("\u00e9", "\u00e9"), (FIRST, FIRST),
    ("\ud800", "\ufffd"), ("\udbff", "\ufffd"), ("\udc00", "\ufffd"), ("\udfff", "\ufffd"),  # range edges
    ("\ud7ff\ue000", "\ud7ff\ue000"),                 # just outside the surrogate range: kept
    ("a\udc00b", "a\ufffdb"), ("\udc00\ud800", "\ufffd\ufffd"),
    ("\ud800\ud800\udc00", "\ufffd" + FIRST),         # two highs then a low: one lone, one pair
    ("x" + GRIN + "\udfff", "x" + GRIN + "\ufffd"),
])
def test_well_formed_replaces_lone_surrogates(s, out):
    assert well_formed(s) == out


def test_sha256_hex_hashes_the_utf8_bytes_v8_would_write():
    # Node: createHash("sha256").update("a\uD800b") and .update("a\uFFFDb") both give 0508…90f7
    assert sha256_hex("a\ud800b") == "05087813392efc16fe8ff448920c6328e53af865df39419436659d9ffda90f7b"
    assert sha256_hex("a\ufffdb") == sha256_hex("a\ud800b")
    # Node: update("\u{1F600}\uDC00") gives 43c0…6578 (F0 9F 98 80, then EF BF BD for the lone low half)
    assert sha256_hex(GRIN + "\udc00") == "43c07ec4819e4eb64f724ac552e7587fe21ce3110ed29797be89a927753b6578"
    assert sha256_hex(GRIN + "\udc00") == hashlib.sha256(b"\xf0\x9f\x98\x80\xef\xbf\xbd").hexdigest()
    assert sha256_hex("plain") == hashlib.sha256(b"plain").hexdigest()
