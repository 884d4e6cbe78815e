"""chunkMarkdown edge cases, expectations worked out by hand from OpenClaw's algorithm (peers.md §1.2, §1.12b)."""

import hashlib

from services.adapters.openclaw.chunker import chunk_markdown
from services.adapters.openclaw.jsstr import js_len, js_slice, truncate_utf16_safe


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
