"""JavaScript string semantics for Python strings: lengths and slices in UTF-16 code units.

OpenClaw runs on Node: `s.length`, `s.slice(a, b)` count UTF-16 code units, so an astral character (an emoji)
counts 2 and a slice may cut it in half, leaving a lone surrogate. Python strings count code points. These
helpers reproduce the JS behaviour exactly; lone surrogates are kept as Python surrogate code points until a
string leaves the chunker, where `well_formed` turns them into U+FFFD as V8 does when it encodes to UTF-8
(for hashing and for node:sqlite TEXT).
"""

from __future__ import annotations

import hashlib


def _has_astral(s: str) -> bool:
    return not s.isascii() and any(ord(c) > 0xFFFF for c in s)


def js_len(s: str) -> int:
    """`s.length` in JavaScript."""
    if s.isascii():
        return len(s)
    return len(s) + sum(1 for c in s if ord(c) > 0xFFFF)


def _to_units(s: str) -> str:
    """The same text with every astral character written as its surrogate pair (one Python char per unit)."""
    out = []
    for c in s:
        o = ord(c)
        if o <= 0xFFFF:
            out.append(c)
        else:
            o -= 0x10000
            out.append(chr(0xD800 + (o >> 10)) + chr(0xDC00 + (o & 0x3FF)))
    return "".join(out)


def _from_units(u: str) -> str:
    """Join valid surrogate pairs back into astral characters; lone surrogates stay as they are."""
    return u.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _is_high(unit: str) -> bool:
    return "\ud800" <= unit <= "\udbff"


def _is_low(unit: str) -> bool:
    return "\udc00" <= unit <= "\udfff"


def js_slice(s: str, start: int, end: int | None = None) -> str:
    """`s.slice(start, end)` in JavaScript (non-negative indices)."""
    if not _has_astral(s):
        return s[start:end]
    return _from_units(_to_units(s)[start:end])


def truncate_utf16_safe(s: str, cap: int) -> str:
    """OpenClaw `truncateUtf16Safe` (packages/normalization-core/src/utf16-slice.ts): the first `cap` code
    units, one fewer when the cut would split a surrogate pair (a high surrogate followed by a low one); a lone
    surrogate at the cut stays, as upstream."""
    if cap <= 0:
        return ""
    if s.isascii():
        return s[:cap]
    units = _to_units(s)
    if len(units) <= cap:
        return s
    end = cap
    if _is_high(units[end - 1]) and _is_low(units[end]):
        end -= 1
    return _from_units(units[:end])


def well_formed(s: str) -> str:
    """Lone surrogates → U+FFFD, as V8 does when a string is encoded to UTF-8 (a high surrogate followed by a
    low one is a pair in JavaScript, so it becomes the astral character)."""
    if s.isascii():
        return s
    return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def sha256_hex(s: str) -> str:
    """Node `crypto.createHash("sha256").update(s)`: sha256 over the UTF-8 bytes."""
    return hashlib.sha256(well_formed(s).encode("utf-8")).hexdigest()
