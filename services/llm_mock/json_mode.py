"""Structured output: turn the task's reply text into the JSON a `response_format` asks for.

`json_object`: a reply that already is a JSON object (the judges answer `{"score": ..}`) is kept as it is;
any other reply is wrapped as `{"content": <text>}`.

`json_schema`: an instance of the schema is built deterministically. Values come, in order of preference, from
the reply when it is a JSON object holding that property with a fitting type, then from the schema (`const`,
first `enum` value, `default`, `minimum`), else a type's zero value; the reply text fills the first string
slot, so the answer is never lost. Supported keywords: type (or a list of types), properties, items,
minItems, enum, const, default, anyOf/oneOf (first non-null branch), allOf (merged properties), and local
`$ref`s (`#/$defs/..`, `#/definitions/..`). That covers what OpenAI's strict mode accepts (platform.openai.com,
"Structured Outputs", supported schemas); anything else is ignored rather than guessed.
"""

from __future__ import annotations

import json
from typing import Any

# A $ref cycle (a recursive schema) stops expanding here and yields the type's zero value.
MAX_DEPTH = 32


def as_json_object(text: str) -> str:
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return text
    return json.dumps({"content": text}, ensure_ascii=False)


def as_schema_instance(text: str, schema: dict[str, Any]) -> str:
    try:
        source: Any = json.loads(text)
    except ValueError:
        source = None
    builder = _Builder(schema, text)
    return json.dumps(builder.build(schema, source if isinstance(source, dict) else None, 0), ensure_ascii=False)


_ZERO: dict[str, Any] = {"string": "", "integer": 0, "number": 0, "boolean": False, "null": None}


def _fits(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    return value is None


class _Builder:
    def __init__(self, root: dict[str, Any], text: str):
        self.root = root
        self.text = text
        self.text_placed = False

    def _resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        ref = schema.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return schema
        node: Any = self.root
        for part in ref[2:].split("/"):
            node = node.get(part) if isinstance(node, dict) else None
        return node if isinstance(node, dict) else {}

    def _kind(self, schema: dict[str, Any]) -> str | None:
        t = schema.get("type")
        if isinstance(t, list):
            non_null = [k for k in t if k != "null"]
            return non_null[0] if non_null else (t[0] if t else None)
        if isinstance(t, str):
            return t
        if "properties" in schema:
            return "object"
        if "items" in schema:
            return "array"
        return None

    def build(self, schema: Any, source: Any, depth: int) -> Any:
        if not isinstance(schema, dict):
            return self._string()
        schema = self._resolve(schema)
        if "const" in schema:
            return schema["const"]
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return source if source in schema["enum"] else schema["enum"][0]
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                pick = next((b for b in branches if self._kind(self._resolve(b)) != "null"), branches[0])
                return self.build(pick, source, depth + 1)
        if isinstance(schema.get("allOf"), list):
            merged: dict[str, Any] = {"type": "object", "properties": {}}
            for part in schema["allOf"]:
                part = self._resolve(part) if isinstance(part, dict) else {}
                merged["properties"].update(part.get("properties", {}))
            return self.build(merged, source, depth + 1)
        kind = self._kind(schema)
        if source is not None and kind not in (None, "object", "array") and _fits(source, kind):
            return source
        if "default" in schema:
            return schema["default"]
        if depth > MAX_DEPTH:
            return _ZERO.get(kind or "null", {} if kind == "object" else [])
        if kind == "object":
            src = source if isinstance(source, dict) else {}
            props = schema.get("properties", {})
            return {name: self.build(sub, src.get(name), depth + 1) for name, sub in props.items()}
        if kind == "array":
            src = source if isinstance(source, list) else []
            max_items = schema.get("maxItems")
            count = max(len(src), schema.get("minItems", 0) or 0, 1)
            if isinstance(max_items, int):
                count = min(count, max_items)
            items = schema.get("items", {})
            return [self.build(items, src[i] if i < len(src) else None, depth + 1) for i in range(count)]
        if kind == "string" or kind is None:
            return self._string()
        if kind in ("integer", "number"):
            lo = schema.get("minimum", schema.get("exclusiveMinimum"))
            if isinstance(lo, (int, float)) and not isinstance(lo, bool):
                base = lo + 1 if "exclusiveMinimum" in schema and "minimum" not in schema else lo
                return int(base) if kind == "integer" else base
            return 0
        return _ZERO.get(kind)

    def _string(self) -> str:
        if self.text_placed:
            return ""
        self.text_placed = True
        return self.text
