"""The response types of the OpenClaw Cortex plugin's client, transcribed by hand (field names, optionality,
types) from `Ubundi/openclaw-cortex` `src/cortex/client.ts` at 2.22.1, commit
6c531b33419e5f6d6a17b8077b81755560870854, plus `check(value, spec)` that lists every mismatch.

Spec language: "string" | "number" | "boolean" | "unknown"; ("nullable", spec); ("list", spec);
("enum", (v1, v2, ...)); or a dict {field: (spec, required)} for an interface (extra fields are allowed, as
TypeScript ignores them). An optional field (`name?: T`) may be absent but, if present, must be a T
(`undefined` does not survive JSON, so a null there is a mismatch unless the type says `| null`).
"""

from __future__ import annotations

from typing import Any

CLIENT_COMMIT = "6c531b33419e5f6d6a17b8077b81755560870854"
REQ, OPT = True, False

NODE_TYPE = ("enum", ("FACT", "ENTITY", "EMOTION", "INSIGHT", "VALUE", "BELIEF", "LIFECONTEXT", "SESSION",
                      "COMMUNITY"))
COVERAGE = ("enum", ("high", "partial", "low", "none"))
MATURITY = ("enum", ("cold", "warming", "mature"))

RETRIEVE_RESULT_METADATA = {
    "speaker": ("string", OPT), "fact_type": ("string", OPT), "entity_refs": (("list", "string"), OPT),
    "occurred_at": (("nullable", "string"), OPT), "session_id": (("nullable", "string"), OPT),
    "source_origin": ("string", OPT), "derivation_mode": ("string", OPT), "source_app": ("string", OPT),
}
RETRIEVE_RESULT = {
    "node_id": ("string", REQ), "type": (NODE_TYPE, REQ), "content": ("string", REQ), "score": ("number", REQ),
    "source": ("string", OPT), "confidence": ("number", OPT), "metadata": (RETRIEVE_RESULT_METADATA, OPT),
    "query_alignment": ("number", OPT),
}
RETRIEVE_RESPONSE = {"results": (("list", RETRIEVE_RESULT), REQ), "coverage": (COVERAGE, OPT)}

INGEST_FACT = {"core": ("string", REQ), "fact_type": ("string", REQ), "occurred_at": (("nullable", "string"), REQ),
               "entity_refs": (("list", "string"), REQ), "speaker": ("string", REQ)}
INGEST_ENTITY = {"name": ("string", REQ), "type": ("string", REQ), "aliases": (("list", "string"), REQ)}
INGEST_RESPONSE = {
    "nodes_created": ("number", REQ), "edges_created": ("number", REQ), "duplicates_merged": ("number", OPT),
    "facts": (("list", INGEST_FACT), REQ), "entities": (("list", INGEST_ENTITY), REQ),
    "emotions": (("list", "unknown"), OPT), "values": (("list", "unknown"), OPT),
    "beliefs": (("list", "unknown"), OPT), "insights": (("list", "unknown"), OPT),
    "life_context": (("nullable", "unknown"), OPT),
}
JOB_SUBMIT_RESPONSE = {"job_id": ("string", REQ), "status": ("string", REQ)}
REFLECT_RESPONSE = JOB_SUBMIT_RESPONSE
JOB_STATUS_RESPONSE = {**JOB_SUBMIT_RESPONSE, "result": (INGEST_RESPONSE, OPT), "error": ("string", OPT)}
WARMUP_RESPONSE = {"tenant_id": ("string", REQ), "already_warm": ("boolean", REQ)}
HEALTH_RESPONSE = {"status": ("string", REQ)}
BATCH_INGEST_RESPONSE = {
    "results": (("list", INGEST_RESPONSE), REQ), "total_nodes_created": ("number", REQ),
    "total_edges_created": ("number", REQ), "failed_count": ("number", REQ), "errors": (("list", "string"), REQ),
}
REMEMBER_ACCEPTED_RESPONSE = {"session_id": (("nullable", "string"), REQ), "status": ("string", OPT),
                              "job_id": ("string", OPT)}
RECALL_MEMORY = {
    "node_id": ("string", OPT), "content": ("string", REQ), "confidence": ("number", REQ),
    "relevance": ("number", OPT), "when": (("nullable", "string"), REQ),
    "session_id": (("nullable", "string"), REQ), "entities": (("list", "string"), REQ), "type": (NODE_TYPE, OPT),
    "memory_type": ("string", OPT), "grounded": ("boolean", OPT), "source_origin": ("string", OPT),
    "derivation_mode": ("string", OPT), "source_app": ("string", OPT), "query_alignment": ("number", OPT),
    "source": (("enum", ("retrieve", "fallback")), OPT),
}
RECALL_RESPONSE = {"coverage": (COVERAGE, OPT), "memories": (("list", RECALL_MEMORY), REQ)}
FORGET_RESPONSE = {"memories_removed": ("number", REQ)}
FORGET_USER_RESPONSE = {"user_id": ("string", REQ), "deleted": ({
    "engraved_memories": ("number", REQ), "resonated_memories": ("number", REQ), "nodes": ("number", REQ),
    "codex_suggestions": ("number", REQ), "codex_suggestion_suppressions": ("number", REQ)}, REQ)}
KNOWLEDGE_ENTITY = {"name": ("string", REQ), "memory_count": ("number", REQ), "last_seen": ("string", REQ)}
KNOWLEDGE_RESPONSE = {"total_memories": ("number", REQ), "total_sessions": ("number", REQ),
                      "maturity": (MATURITY, REQ), "entities": (("list", KNOWLEDGE_ENTITY), REQ)}
STATS_RESPONSE = {"pipeline_tier": (("enum", (1, 2, 3)), REQ), "pipeline_maturity": (MATURITY, REQ)}
NODE_OUT = {"id": ("string", REQ), "type": ("string", REQ), "content": ("string", REQ),
            "confidence": ("number", REQ), "metadata": (("nullable", "unknown"), OPT),
            "created_at": (("nullable", "string"), OPT)}
EDGE_OUT = {"type": ("string", REQ), "strength": ("number", REQ), "reason": (("nullable", "string"), OPT)}
NODE_DETAIL_RESPONSE = {
    "node": (NODE_OUT, REQ), "related": (("list", {"node": (NODE_OUT, REQ), "edge": (EDGE_OUT, REQ)}), REQ),
    "confidence_explanation": (("nullable", {
        "base_confidence": ("number", REQ), "supporting_nodes": ("number", REQ),
        "contradicting_nodes": ("number", REQ), "temporal_decay": ("number", REQ),
        "final_confidence": ("number", REQ)}), OPT),
}

# client method -> (HTTP method, path, response spec); the three the mock does not model answer 501.
METHODS: dict[str, tuple[str, str, Any]] = {
    "healthCheck": ("GET", "/health", HEALTH_RESPONSE),
    "warmup": ("POST", "/v1/warmup", WARMUP_RESPONSE),
    "retrieve": ("POST", "/v1/retrieve", RETRIEVE_RESPONSE),
    "ingest": ("POST", "/v1/ingest", INGEST_RESPONSE),
    "ingestConversation": ("POST", "/v1/ingest/conversation", INGEST_RESPONSE),
    "getJob": ("GET", "/v1/jobs/{id}", JOB_STATUS_RESPONSE),
    "submitIngest": ("POST", "/v1/jobs/ingest", JOB_SUBMIT_RESPONSE),
    "submitIngestConversation": ("POST", "/v1/jobs/ingest/conversation", JOB_SUBMIT_RESPONSE),
    "batchIngest": ("POST", "/v1/ingest/batch", BATCH_INGEST_RESPONSE),
    "reflect": ("POST", "/v1/jobs/reflect", REFLECT_RESPONSE),
    "remember": ("POST", "/v1/remember", REMEMBER_ACCEPTED_RESPONSE),
    "rememberConversation": ("POST", "/v1/remember", REMEMBER_ACCEPTED_RESPONSE),
    "recall": ("POST", "/v1/recall", RECALL_RESPONSE),
    "forgetSession": ("DELETE", "/v1/forget/session/{id}", FORGET_RESPONSE),
    "forgetEntity": ("DELETE", "/v1/forget/entity/{name}", FORGET_RESPONSE),
    "forgetUser": ("DELETE", "/v1/forget/user/{id}?confirm=true", FORGET_USER_RESPONSE),
    "knowledge": ("GET", "/v1/knowledge?user_id=", KNOWLEDGE_RESPONSE),
    "getNode": ("GET", "/v1/nodes/{id}", NODE_DETAIL_RESPONSE),
    "stats": ("GET", "/v1/stats?user_id=", STATS_RESPONSE),
    "getLinkStatus": ("GET", "/v1/auth/link?agent_user_id=", None),
    "generatePairingCode": ("POST", "/v1/auth/code", None),
    "submitBridgePassive": ("POST", "/v1/bridge/passive", None),
}
NOT_MODELLED = tuple(m for m, (_, _, spec) in METHODS.items() if spec is None)


def check(value: Any, spec: Any, path: str = "$") -> list[str]:
    """Every place `value` does not match `spec`, as "path: problem"."""
    if spec == "unknown":
        return []
    if spec == "string":
        return [] if isinstance(value, str) else [f"{path}: expected string, got {value!r:.60}"]
    if spec == "number":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return [] if ok else [f"{path}: expected number, got {value!r:.60}"]
    if spec == "boolean":
        return [] if isinstance(value, bool) else [f"{path}: expected boolean, got {value!r:.60}"]
    if isinstance(spec, tuple) and spec[0] == "nullable":
        return [] if value is None else check(value, spec[1], path)
    if isinstance(spec, tuple) and spec[0] == "enum":
        return [] if value in spec[1] and not isinstance(value, bool) else [
            f"{path}: expected one of {spec[1]}, got {value!r:.60}"]
    if isinstance(spec, tuple) and spec[0] == "list":
        if not isinstance(value, list):
            return [f"{path}: expected array, got {value!r:.60}"]
        return [p for i, x in enumerate(value) for p in check(x, spec[1], f"{path}[{i}]")]
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            return [f"{path}: expected object, got {value!r:.60}"]
        out: list[str] = []
        for name, (sub, required) in spec.items():
            if name not in value:
                if required:
                    out.append(f"{path}.{name}: required field missing")
                continue
            out += check(value[name], sub, f"{path}.{name}")
        return out
    raise ValueError(f"bad spec at {path}: {spec!r}")
