"""The small template language of HTTP mapping files: JSON-shaped values with `{{ path }}` placeholders.

- A string that is exactly one placeholder (`"{{session.messages}}"`) becomes the typed value (list, number,
  None, ...); any other string interpolates the values as text.
- A dict key ending in `?` is dropped when its value renders to None (`"timestamp?": "{{message.ts}}"`).
- `{"$each": "session.messages", "as": "message", "item": <template>}` renders `item` once per element.
- Datetimes render as JavaScript's `toISOString()` (UTC, milliseconds, `Z`), the form JSON APIs expect.

Unknown variables raise `TemplateError` naming the placeholder, so a mapping can be checked at load time by
rendering every template against sample values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from services.common.errors import InputError

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][\w.]*)\s*\}\}")


class TemplateError(InputError):
    """A template that does not render; `field` is the variable or directive at fault, str(e) the message alone
    (the caller prefixes the mapping key it was rendering)."""

    def __init__(self, field_name: str, message: str):
        super().__init__(field_name, message, text=message)


def js_iso(dt: datetime) -> str:
    dt = dt.astimezone(UTC) if dt.tzinfo else dt.replace(tzinfo=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def lookup(variables: Mapping[str, Any], path: str) -> Any:
    cur: Any = variables
    for part in path.split("."):
        if isinstance(cur, Mapping) and part in cur:
            cur = cur[part]
        else:
            raise TemplateError(path, f"unknown variable {{{{{path}}}}} (no {part!r}); known: {sorted(variables)}")
    return cur


def _plain(v: Any) -> Any:
    if isinstance(v, datetime):
        return js_iso(v)
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def render_string(s: str, variables: Mapping[str, Any], url_quote: bool = False) -> Any:
    whole = PLACEHOLDER.fullmatch(s.strip())
    if whole and not url_quote:
        return _plain(lookup(variables, whole.group(1)))

    def sub(m: re.Match) -> str:
        v = _plain(lookup(variables, m.group(1)))
        text = "" if v is None else str(v)
        return quote(text, safe="") if url_quote else text

    return PLACEHOLDER.sub(sub, s)


def render(template: Any, variables: Mapping[str, Any]) -> Any:
    if isinstance(template, str):
        return render_string(template, variables)
    if isinstance(template, list):
        return [render(t, variables) for t in template]
    if isinstance(template, dict):
        if "$each" in template:
            items = lookup(variables, str(template["$each"]))
            if not isinstance(items, list | tuple):
                raise TemplateError("$each", f"$each {template['$each']!r} is not a list")
            name = str(template.get("as", "item"))
            return [render(template.get("item"), {**variables, name: it}) for it in items]
        out: dict[str, Any] = {}
        for k, t in template.items():
            v = render(t, variables)
            if k.endswith("?"):
                if v is None:
                    continue
                k = k[:-1]
            out[k] = v
        return out
    return template


def extract(obj: Any, path: str | None) -> Any:
    """`a.b.0.c` from a JSON value; "." is the value itself; a missing step gives None."""
    if path is None:
        return None
    if path in (".", ""):
        return obj
    cur = obj
    for part in path.split("."):
        if isinstance(cur, dict):
            cur = cur.get(part)
        elif isinstance(cur, list) and part.lstrip("-").isdigit() and -len(cur) <= int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return None
    return cur
