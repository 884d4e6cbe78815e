"""chunkMarkdown edge cases, expectations worked out by hand from OpenClaw's algorithm (openclaw/openclaw,
src/memory/internal.ts chunkMarkdown)."""

import hashlib

import pytest

from services.adapters.openclaw.chunker import (
    _code_points,
    _take_tail,
    _truncate_units_safe,
    chunk_markdown,
    chunk_markdown_v5,
    curated_entry_kind,
    estimate_string_chars,
)
from services.adapters.openclaw.jsstr import _to_units, js_len, js_slice, truncate_utf16_safe


def spans(chunks):
    return [(c.start_line, c.end_line, c.text) for c in chunks]


def test_empty_content_gives_one_empty_chunk():
    (c,) = chunk_markdown("", tokens=8, overlap=0)
    assert (c.start_line, c.end_line, c.text) == (1, 1, "")
    assert c.hash == hashlib.sha256(b"").hexdigest()


def test_lines_pack_until_max_chars():
    # tokens 8 → maxChars 32; each 10-char line costs 11: 11, 22, then 33 > 32 flushes lines 1-2.
    a, b, c, d = "a" * 10, "b" * 10, "c" * 10, "d" * 10
    out = chunk_markdown("\n".join([a, b, c, d]), tokens=8, overlap=0)
    assert spans(out) == [(1, 2, f"{a}\n{b}"), (3, 4, f"{c}\n{d}")]
    assert out[0].hash == hashlib.sha256(f"{a}\n{b}".encode()).hexdigest()


def test_empty_lines_are_kept_and_cost_one():
    out = chunk_markdown("x\n\ny", tokens=8, overlap=0)
    assert spans(out) == [(1, 3, "x\n\ny")]


def test_max_chars_floor_is_32():
    # tokens 1 → max(32, 4) = 32: a 20-char line and a 10-char line (21 + 11 = 32) fit in one chunk.
    assert spans(chunk_markdown("a" * 20 + "\n" + "b" * 10, tokens=1, overlap=0)) == [(1, 2, "a" * 20 + "\n" + "b" * 10)]


def test_line_longer_than_a_chunk_is_split_keeping_its_line_number():
    line = "0123456789" * 7  # 70 chars → pieces of 32, 32, 6
    out = chunk_markdown(line, tokens=8, overlap=0)
    assert spans(out) == [(1, 1, line[:32]), (1, 1, line[32:64]), (1, 1, line[64:])]


def test_overlap_is_capped_at_half_a_chunk():
    # overlap 100 tokens = 400 chars, capped at floor(32/2) = 16: only line 3 (cost 10) is carried; line 2 would
    # make 20 > 16.
    lines = ["a" * 9, "b" * 9, "c" * 9, "d" * 9]
    out = chunk_markdown("\n".join(lines), tokens=8, overlap=100)
    assert [(c.start_line, c.end_line) for c in out] == [(1, 3), (3, 4)]
    assert out[1].text == "c" * 9 + "\n" + "d" * 9


def test_overlap_carries_every_line_that_fits_the_cap():
    # cap min(16, 16): lines cost 5; six fit (30). Lines 6, 5, 4 (15) are carried, line 3 would make 20; the
    # carried 15 plus lines 7-9 is 30, line 10 makes 35 → flush; lines 7-9 carried, then 10 and 11.
    lines = [c * 4 for c in "abcdefghijk"]
    out = chunk_markdown("\n".join(lines), tokens=8, overlap=4)
    assert [(c.start_line, c.end_line) for c in out] == [(1, 6), (4, 9), (7, 11)]
    assert out[1].text == "\n".join(lines[3:9])


def test_overlap_keeps_at_least_one_line_even_above_the_cap():
    # overlap 2 tokens = 8 chars; the last line costs 13 > 8 but one line is always carried.
    lines = ["a" * 12, "b" * 12, "c" * 12]
    out = chunk_markdown("\n".join(lines), tokens=8, overlap=2)
    assert [(c.start_line, c.end_line) for c in out] == [(1, 2), (2, 3)]


def test_long_line_with_overlap_repeats_a_chunk_and_loses_its_tail():
    # The documented quirk: p1 is carried, [p1, p2] is cut back to 32 chars = p1; [p2, p3] is cut to p2; p3 is lost.
    line = "0123456789" * 7
    p1, p2 = line[:32], line[32:64]
    out = chunk_markdown(line, tokens=8, overlap=4)
    assert [c.text for c in out] == [p1, p1, p2]


def test_strings_count_utf16_code_units():
    # 31 'a' + an emoji (2 code units) = 33 units: the cut at 32 splits the emoji; each half becomes U+FFFD.
    line = "a" * 31 + "\U0001F600"
    assert js_len(line) == 33
    out = chunk_markdown(line, tokens=8, overlap=0)
    assert [c.text for c in out] == ["a" * 31 + "\ufffd", "\ufffd"]
    assert out[0].hash == hashlib.sha256(("a" * 31 + "\ufffd").encode()).hexdigest()


def test_js_string_helpers():
    s = "x\U0001F600y"
    assert js_len(s) == 4
    assert js_slice(s, 0, 3) == "x\U0001F600"
    assert truncate_utf16_safe(s, 2) == "x"  # never ends on half a pair
    assert truncate_utf16_safe(s, 3) == "x\U0001F600"
    assert truncate_utf16_safe("abc", 700) == "abc"


# ---------------------------------------------------------------------------------------------------
# chunking version 5 (openclaw 2026.9.6). Expectations worked out by hand from the algorithm (comments) and
# checked against dist/markdown-chunks-DYWd0D11.mjs `chunkMarkdown` + the blank-chunk filter, run under node 20.

E = "\U0001F600"  # not a weighted code point: 2 UTF-16 units, estimate 2
HAN = "中"  # common CJK: 1 unit, estimate 4
E2 = "\U000103FF"  # surrogates D800 DFFF: 2 units, estimate 2
V5_CASES = [
    # per entry: "- " and #..###### followed by a space or the line end start a chunk; "-b", "#h" and 7 #s do not
    ("- a\n-b\n## h\n#h\n####### x\n###### y\n#\n- \n-  z", 400, 80, True,
     [(1, 2, "- a\n-b"), (3, 5, "## h\n#h\n####### x"), (6, 6, "###### y"), (7, 7, "#"), (8, 8, "- "),
      (9, 9, "-  z")]),
    ("intro\n- a", 400, 80, True, [(1, 1, "intro"), (2, 2, "- a")]),  # line 1 is a section whatever it is
    ("- first\nmore", 400, 80, True, [(1, 2, "- first\nmore")]),
    # an entry starts from an empty budget: 7 + 25 = 32 fits, 7 + 26 = 33 > 32 flushes
    ("- aaaa\n" + "b" * 24, 8, 0, True, [(1, 2, "- aaaa\n" + "b" * 24)]),
    ("- aaaa\n" + "b" * 25, 8, 0, True, [(1, 1, "- aaaa"), (2, 2, "b" * 25)]),
    # maxChars 32, overlap 12: lines cost 5; "e"*26 costs 27 → window min(12, 32 - 27) = 5 → "dddd" carried
    ("aaaa\nbbbb\ncccc\ndddd\n" + "e" * 26, 8, 3, False,
     [(1, 4, "aaaa\nbbbb\ncccc\ndddd"), (4, 5, "dddd\n" + "e" * 26)]),
    # overlap 16: whole lines carried from the end while they fit the window (empty lines cost 1)
    ("a" * 10 + "\n" + "b" * 10 + "\n\n" + "c" * 10 + "\n" + "d" * 10, 8, 4, False,
     [(1, 3, "a" * 10 + "\n" + "b" * 10 + "\n"), (2, 4, "b" * 10 + "\n\n" + "c" * 10),
      (3, 5, "\n" + "c" * 10 + "\n" + "d" * 10)]),
    # a blank chunk is dropped; a line longer than maxChars is cut at 32 units with no hard cut afterwards
    ("a" * 10 + "\n   \n  \n" + "b" * 37, 8, 0, False,
     [(1, 3, "a" * 10 + "\n   \n  "), (4, 4, "b" * 32), (4, 4, "b" * 5)]),
    ("a" * 31 + "\n   \n", 8, 0, False, [(1, 1, "a" * 31)]),
    # window min(32, 32 - 4) = 28: the tail of the long line within 27 estimated chars is carried; the last
    # chunk ("   " and the empty line) is blank and dropped
    ("a" * 31 + "\n   \n", 8, 8, False, [(1, 1, "a" * 31), (1, 2, "a" * 27 + "\n   ")]),
    # the coarse cut never splits a surrogate pair: 31 + 2 units is cut before the emoji
    ("a" * 31 + E, 8, 0, False, [(1, 1, "a" * 31), (1, 1, E)]),
    # the tail is taken by whole code points: budget 11 → five emoji (10), not 5½; U+103FF is the pair
    # D800 DFFF, the lowest high and the highest low surrogate
    (E * 14 + "\n" + "y" * 12, 8, 3, False, [(1, 1, E * 14), (1, 2, E * 5 + "\n" + "y" * 12)]),
    (E2 * 14 + "\n" + "y" * 12, 8, 3, False, [(1, 1, E2 * 14), (1, 2, E2 * 5 + "\n" + "y" * 12)]),
    # CJK weighting: 12 Han chars estimate 48 > 32 → split by code points, 8 per piece (32)
    (HAN * 12, 8, 0, False, [(1, 1, HAN * 8), (1, 1, HAN * 4)]),
    # window min(8, 32 - 17) = 8 → tail budget 7 holds one Han char (4)
    (HAN * 12, 8, 2, False, [(1, 1, HAN * 8), (1, 1, HAN + "\n" + HAN * 4)]),
    # mixed weights: 7 Han + 4 ASCII = 32 per piece; each piece starts from 0, so the 5th "a" starts a third
    (HAN * 7 + "a" * 4 + HAN * 7 + "a" * 5, 8, 0, False,
     [(1, 1, HAN * 7 + "a" * 4), (1, 1, HAN * 7 + "a" * 4), (1, 1, "a")]),
    # the first piece starts from 0 too: 7 Han + 4 ASCII = 32, the 5th "a" goes to the next piece
    (HAN * 7 + "a" * 5 + HAN * 2, 8, 0, False, [(1, 1, HAN * 7 + "a" * 4), (1, 1, "a" + HAN * 2)]),
    # no overlap: nothing is carried, not even an empty line
    ("a" * 10 + "\n\n" + "b" * 30, 8, 0, False, [(1, 2, "a" * 10 + "\n"), (3, 3, "b" * 30)]),
    # window min(8, 32 - 31) = 1 still carries the empty line (cost 1)
    ("a" * 10 + "\n\n" + "b" * 30, 8, 2, False, [(1, 2, "a" * 10 + "\n"), (2, 3, "\n" + "b" * 30)]),
    # the carry stops at the first line that does not fit: the empty line before it is not taken
    ("\n" + "b" * 20 + "\ncc\n" + "d" * 10, 8, 2, False,
     [(1, 3, "\n" + "b" * 20 + "\ncc"), (3, 4, "cc\n" + "d" * 10)]),
    # 21 + 12 = 33: one char over maxChars starts a second chunk
    ("a" * 20 + "\n" + "b" * 11, 8, 0, False, [(1, 1, "a" * 20), (2, 2, "b" * 11)]),
    # window min(8, 32 - 4) = 8 takes exactly two 3-char lines (4 + 4)
    ("\n".join(c * 3 for c in "abcdefghi"), 8, 2, False,
     [(1, 8, "\n".join(c * 3 for c in "abcdefgh")), (7, 9, "ggg\nhhh\niii")]),
    # after a flush without overlap the budget restarts from 0: 21 + 11 = 32 fits
    ("a" * 31 + "\n" + "b" * 20 + "\n" + "c" * 10, 8, 0, False, [(1, 1, "a" * 31), (2, 3, "b" * 20 + "\n" + "c" * 10)]),
    # ... and 21 + 12 = 33 does not fit
    ("a" * 31 + "\n" + "b" * 20 + "\n" + "c" * 11, 8, 0, False,
     [(1, 1, "a" * 31), (2, 2, "b" * 20), (3, 3, "c" * 11)]),
    # a full 32-char piece leaves a window of 0: nothing is carried, not even the empty line before it
    ("a\n\n" + "b" * 32, 8, 2, False, [(1, 2, "a\n"), (3, 3, "b" * 32)]),
    # a carried tail costs its estimate + 1: window min(20, 30) → 19 chars (20) + "b" (2) + 9 chars (10) = 32 fits
    ("a" * 31 + "\nb\n" + "c" * 9, 8, 5, False, [(1, 1, "a" * 31), (1, 3, "a" * 19 + "\nb\n" + "c" * 9)]),
    # an empty line costs 1: 31 + 1 = 32 fits
    ("a" * 30 + "\n\nb", 8, 0, False, [(1, 2, "a" * 30 + "\n"), (3, 3, "b")]),
    # 21 + 11 = 32: exactly maxChars fits in one chunk
    ("a" * 20 + "\n" + "b" * 10, 8, 0, False, [(1, 2, "a" * 20 + "\n" + "b" * 10)]),
    # 40 Han units: the coarse cut takes 32 units (estimate 128) → 4 pieces of 8; the last 8 fit as they are
    (HAN * 40, 8, 0, False, [(1, 1, HAN * 8)] * 5),
    # line 1 costs 29, line 2 13 → window min(12, 19) = 12 → tail budget 11 → "中中" (8)
    (HAN * 7 + "\n" + HAN * 3, 8, 3, False, [(1, 1, HAN * 7), (1, 2, HAN * 2 + "\n" + HAN * 3)]),
    # lines of one Han char cost 5: six fit (30); window min(8, 27) = 8 carries one line
    ("\n".join([HAN] * 7), 8, 2, False, [(1, 6, "\n".join([HAN] * 6)), (6, 7, HAN + "\n" + HAN)]),
    # astral CJK (U+20000, bucket 5) estimates 16: two per piece
    ("\U00020000" * 3, 8, 0, False, [(1, 1, "\U00020000" * 2), (1, 1, "\U00020000")]),
    ("ab" + HAN + "\n" + HAN * 7, 8, 1, False, [(1, 1, "ab" + HAN), (2, 2, HAN * 7)]),
    ("", 8, 0, False, []),  # the one empty chunk is blank and dropped
    # maxChars is at least 32 and a negative overlap is 0
    ("a", 0, 0, False, [(1, 1, "a")]),
    ("a" * 40, 0, -3, False, [(1, 1, "a" * 32), (1, 1, "a" * 8)]),
]


@pytest.mark.parametrize(("content", "tokens", "overlap", "per_entry", "expected"), V5_CASES)
def test_chunk_markdown_v5_table(content, tokens, overlap, per_entry, expected):
    got = chunk_markdown_v5(content, tokens=tokens, overlap=overlap, per_entry=per_entry)
    assert spans(got) == expected
    assert all(c.hash == hashlib.sha256(c.text.encode()).hexdigest() for c in got)


# estimateStringChars of one code point at both ends of every weighted range of dist/cjk-chars-6ld30jSx.mjs
# and just outside them: BMP 1 unit + 3 (bucket 1), 11 (2), 7 (3); astral 2 units + 10 (bucket 4), 14 (5).
ESTIMATES = {
    127: 1, 128: 1, 182: 1, 183: 4, 184: 1, 710: 1, 711: 8, 712: 1, 713: 8, 715: 8, 716: 1, 728: 1, 729: 8,
    730: 1, 745: 1, 746: 8, 747: 8, 748: 1, 772: 1, 773: 8, 774: 1, 802: 1, 803: 8, 804: 1, 4351: 1, 4352: 12,
    4607: 12, 4608: 1, 11903: 1, 11904: 12, 12287: 12, 12288: 4, 12703: 4, 12704: 12, 19967: 12, 19968: 4,
    40869: 4, 40870: 12, 40959: 12, 40960: 12, 42239: 12, 42240: 1, 42751: 1, 42752: 12, 42759: 12, 42760: 1,
    43359: 1, 43360: 12, 43391: 12, 43392: 1, 44031: 1, 44032: 4, 55215: 4, 55216: 12, 55295: 12, 63743: 1,
    63744: 12, 64255: 12, 64256: 1, 65039: 1, 65040: 8, 65103: 8, 65104: 1, 65280: 1, 65281: 4, 65376: 4,
    65377: 8, 65500: 8, 65501: 1, 65503: 1, 65504: 8, 65510: 8, 65511: 1, 94175: 2, 94176: 16, 94207: 16,
    94208: 2, 110575: 2, 110576: 16, 110591: 16, 110592: 16, 110959: 16, 110960: 2, 119647: 2, 119648: 12,
    119665: 12, 119666: 2, 127487: 2, 127488: 16, 127743: 16, 127744: 2, 131071: 2, 131072: 16, 195103: 16,
    195104: 2, 196607: 2, 196608: 16, 210047: 16, 210048: 2,
}


def test_estimate_string_chars_at_every_range_boundary():
    got = {cp: estimate_string_chars(_to_units(chr(cp))) for cp in ESTIMATES}
    assert got == ESTIMATES


def test_estimate_string_chars_of_mixed_and_broken_strings():
    # "a中😀" = 1 + 4 + 2; a lone high surrogate (no low half after it) is one unweighted unit
    assert estimate_string_chars(_to_units("a中" + E)) == 7
    assert estimate_string_chars("\ud840") == 1
    assert estimate_string_chars("\ud840a") == 2
    assert estimate_string_chars("\ud840中") == 1 + 4  # a high half before a BMP char is no pair
    assert estimate_string_chars("\ud840\ud840") == 2  # two high halves: no pair
    assert estimate_string_chars("\ud840\udc00") == 16  # the pair of U+20000
    assert estimate_string_chars("\udc00\ud840") == 2  # low before high: no pair
    assert estimate_string_chars(_to_units("é\U00020000")) == 1 + 16


# UTF-16 helpers of the v5 chunker, on strings held as UTF-16 units, at the surrogate range edges: high halves
# D800-DBFF, low halves DC00-DFFF (D7FF, DC00-as-high, DBFF-as-low and E000 are outside).
HI_LO = "\ud800\udfff"  # U+103FF: lowest high, highest low


def test_code_points_pair_only_high_then_low():
    assert _code_points("a\ud800\udc00b") == ["a", "\ud800\udc00", "b"]
    assert _code_points("\udbff\udfff" + HI_LO) == ["\udbff\udfff", HI_LO]
    assert _code_points("\ud7ff\udc00") == ["\ud7ff", "\udc00"]
    assert _code_points("\udc00\udc00") == ["\udc00", "\udc00"]
    assert _code_points("\ud800\udbff") == ["\ud800", "\udbff"]
    assert _code_points("\ud800\ue000") == ["\ud800", "\ue000"]
    assert _code_points("\ud800\ud800\udc00") == ["\ud800", "\ud800\udc00"]
    assert _code_points("x\ud800") == ["x", "\ud800"]  # a high half at the end stays alone


def test_truncate_units_safe_never_ends_inside_a_pair():
    assert _truncate_units_safe("abc", 3) == "abc"
    assert _truncate_units_safe("abcd", 3) == "abc"
    assert _truncate_units_safe("ab\ud800", 3) == "ab\ud800"  # already short enough: as is
    assert _truncate_units_safe("\ud800\udc00", 1) == ""  # a pair never fits in one unit
    assert _truncate_units_safe("ab\ud800\udc00", 3) == "ab"
    assert _truncate_units_safe("ab\ud800x", 3) == "ab\ud800"  # no low half follows: cut as is
    assert _truncate_units_safe("a\udbff\udfff", 2) == "a"
    assert _truncate_units_safe("a" + HI_LO, 2) == "a"
    assert _truncate_units_safe("a\ud7ff\udc00", 2) == "a\ud7ff"
    assert _truncate_units_safe("a\udc00\udc00", 2) == "a\udc00"
    assert _truncate_units_safe("a\ud800\ue000", 2) == "a\ud800"
    assert _truncate_units_safe("a\ud800\udbff", 2) == "a\ud800"


def test_take_tail_by_estimated_chars_and_whole_pairs():
    assert _take_tail("abc", 2) == "bc"
    assert _take_tail("abc", 0) == ""
    assert _take_tail("abc", 5) == "abc"
    assert _take_tail("中中", 7) == "中" and _take_tail("中中", 8) == "中中"
    assert _take_tail("a\ud800\udc00", 2) == "\ud800\udc00"
    assert _take_tail("a\ud800\udc00", 1) == ""  # the pair costs 2
    assert _take_tail("\ud800\udc00", 1) == ""  # a pair at the very start too
    assert _take_tail("a\udbff\udfff", 1) == "" and _take_tail("a" + HI_LO, 1) == ""
    assert _take_tail("x\ud840\udc00", 16) == "\ud840\udc00" and _take_tail("x\ud840\udc00", 15) == ""
    assert _take_tail("\ud7ff\udc00", 1) == "\udc00"  # not pairs: one unit each
    assert _take_tail("\udc00\udc00", 1) == "\udc00"
    assert _take_tail("\ud800\udbff", 1) == "\udbff"
    assert _take_tail("\ud800\ue000", 1) == "\ue000"
    assert _take_tail("\udc00x\ud800", 10) == "\udc00x\ud800"  # the first unit has no unit before it


def test_estimate_string_chars_pairs_at_the_surrogate_edges():
    assert estimate_string_chars("\ud840\udfff") == 16  # U+203FF: bucket 5
    assert estimate_string_chars("\ud87e\udc00") == 16  # U+2F800
    assert estimate_string_chars("\ud840\ue000") == 2  # E000 is no low half: 1 + 1
    assert estimate_string_chars("\ud841\udbff") == 2  # DBFF is no low half: 1 + 1
    assert estimate_string_chars("\uff01\udc00") == 4 + 1  # U+FF01 (bucket 1) is no high half
    assert estimate_string_chars("\ud7ff\udc00") == 13  # D7FF (bucket 2: 1 + 11) is no high half; + 1


def test_curated_entry_kinds():
    assert [curated_entry_kind(x) for x in ("- a", "-a", "# h", "#", "###### h", "####### h", "#h", " - a", "")] == [
        "entry", None, "section", "section", "section", None, None, None, None]
    assert curated_entry_kind("##\tTabbed") == "section"


def test_truncate_to_zero_units_is_empty():
    assert _truncate_units_safe("\udc00\ud800", 0) == ""


def test_estimate_of_a_long_string_ending_in_a_lone_high_half():
    assert estimate_string_chars("a" * 300 + "\ud840") == 301


# The defaults: 400 tokens → maxChars 1600, 80 tokens overlap → 320 chars. A: 21 lines of 79 chars (cost 80):
# 20 fill 1600 exactly; 4 lines (320) are carried. B: 20 lines of 80 chars (cost 81): 19 fit (1539); 3 lines
# (243) are carried, a 4th would make 324. C: a 1601-char line is cut at 1600.
DEFAULT_A = "\n".join(chr(65 + i) * 79 for i in range(21))
DEFAULT_B = "\n".join(chr(97 + i) * 80 for i in range(20))


def test_v1_defaults():
    assert [(c.start_line, c.end_line) for c in chunk_markdown(DEFAULT_A)] == [(1, 20), (17, 21)]
    assert [(c.start_line, c.end_line) for c in chunk_markdown(DEFAULT_B)] == [(1, 19), (17, 20)]
    assert [c.text for c in chunk_markdown("a" * 1601, overlap=0)] == ["a" * 1600, "a"]


def test_v5_defaults():
    assert [(c.start_line, c.end_line) for c in chunk_markdown_v5("- a\n- b")] == [(1, 2)]  # not per entry
    assert [(c.start_line, c.end_line) for c in chunk_markdown_v5(DEFAULT_A)] == [(1, 20), (17, 21)]
    assert [(c.start_line, c.end_line) for c in chunk_markdown_v5(DEFAULT_B)] == [(1, 19), (17, 20)]
    assert [c.text for c in chunk_markdown_v5("a" * 1601, overlap=0)] == ["a" * 1600, "a"]
    # 401 Han chars estimate 1604: split by code points into 400 (1600) and 1; the overlap window
    # min(320, 1600 - 5) leaves a tail budget of 319 → 79 Han chars (316)
    assert [c.text for c in chunk_markdown_v5(HAN * 401)] == [HAN * 400, HAN * 79 + "\n" + HAN]


def test_v1_overlap_takes_a_line_that_fills_the_cap_exactly():
    # 3-char lines cost 4: eight fill 32; the carry takes four (16 = cap)
    out = chunk_markdown("\n".join(c * 3 for c in "abcdefghi"), tokens=8, overlap=4)
    assert [(c.start_line, c.end_line) for c in out] == [(1, 8), (5, 9)]


def test_v1_overlap_stops_at_the_first_line_that_does_not_fit():
    # cap 16: "cc" (3) is carried, the 20-char line (21) does not fit; the empty line before it is not taken
    out = chunk_markdown("\n" + "b" * 20 + "\ncc\n" + "d" * 10, tokens=8, overlap=4)
    assert [(c.start_line, c.end_line) for c in out] == [(1, 3), (3, 4)]


def test_v1_overlap_takes_a_line_only_when_it_fits_the_cap():
    # cap 16: eeee 5, dddd 10, cccc 15; "b" (cost 2) would make 17 > 16
    out = chunk_markdown("a" * 13 + "\nb\ncccc\ndddd\neeee\nffff", tokens=8, overlap=4)
    assert [(c.start_line, c.end_line) for c in out] == [(1, 5), (3, 6)]


def test_v1_budget_restarts_from_zero_after_a_flush_without_overlap():
    # chunk 2: 21 + 11 = 32 fits exactly; the empty line (1) makes 33 and starts chunk 3
    out = chunk_markdown("a" * 31 + "\n" + "b" * 20 + "\n" + "c" * 10 + "\n\n" + "d" * 5, tokens=8, overlap=0)
    assert spans(out) == [(1, 1, "a" * 31), (2, 3, "b" * 20 + "\n" + "c" * 10), (4, 5, "\nddddd")]


def test_chunks_are_immutable_values():
    import dataclasses

    (c,) = chunk_markdown_v5("x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.text = "y"
    assert hash(c) == hash(chunk_markdown_v5("x")[0])  # frozen: hashable, equal by value


def test_surrogate_helpers_on_long_strings_and_after_a_pair():
    assert estimate_string_chars("\ud800x") == 2  # a lone D800 is one unweighted unit
    assert estimate_string_chars("\ud840\udc00中") == 16 + 4  # the unit after a pair is counted
    assert _code_points("中" * 300 + "\ud840") == ["中"] * 300 + ["\ud840"]
