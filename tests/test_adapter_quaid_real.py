"""quaid-real: Quaid's own code as a backend. Unit tests of the evidence-id mapping and availability need nothing;
the sidecar tests run Quaid itself (../shared/third_party/quaid + `make setup-quaid`) and skip `[requires:quaid]`."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from services.adapters.base import BackendContext
from services.adapters.external.availability import THIRD_PARTY, tree_digest
from services.adapters.quaid_real import source
from services.adapters.quaid_real.backend import (
    QuaidRealBackend,
    QuaidSidecarError,
    decode_source,
    encode_source,
    namespace_key,
    transcript,
)
from services.adapters.registry import get_spec
from services.common.types import Document, IngestBatch, Message, RetrieveQuery, Session
from tests.inprocess_llm import InProcessMockLLM

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def make(**cfg) -> QuaidRealBackend:
    b = QuaidRealBackend(cfg, BackendContext(embedder_name="hash"))
    b.context._llm = InProcessMockLLM()
    return b


# ------------------------------------------------------------------------------------------ evidence-id mapping
def test_source_id_round_trips_message_ids_including_commas_and_quotes():
    ids = ["conv-1:D1:3", 'odd,"id"', "m 7"]
    s = encode_source(ids)
    assert s == 'memrig:["conv-1:D1:3", "odd,\\"id\\"", "m 7"]'
    assert decode_source(s) == ids


@pytest.mark.parametrize("raw", [None, "", "sess-42", "memrig:not json", 'memrig:{"a": 1}'])
def test_source_id_quaid_wrote_itself_is_not_read_as_message_ids(raw):
    assert decode_source(raw) is None


def test_evidence_for_prefers_the_rig_record_then_source_id_then_the_session():
    b = make()
    s = Session("s1", T0, (Message("m1", "user", "a b c"), Message("m2", "assistant", "d e f")))
    b.store.apply("ns", IngestBatch(sessions=(s,), documents=(Document("d1", "doc text here", T0),)))
    b.evidence["ns"] = {"n1": ["m9", "m1"]}
    # 1. the rig's own record (dedup hits unioned) wins over the node's fields
    assert b.evidence_for("ns", "n1", {"source_id": encode_source(["m2"]), "session_id": "s1"}) == ["m9", "m1"]
    # 2. message ids the rig wrote into source_id
    assert b.evidence_for("ns", "n2", {"source_id": encode_source(["m2"]), "session_id": "s1"}) == ["m2"]
    # 3. Quaid's own extraction: source_id = session id -> every message of that session
    assert b.evidence_for("ns", "n3", {"source_id": "s1", "session_id": "s1"}) == ["m1", "m2"]
    # a document's facts carry the document's evidence
    assert b.evidence_for("ns", "n4", {"source_id": "doc:d1", "session_id": "doc:d1"}) == ["d1"]
    # an unknown session gives no evidence rather than a guess
    assert b.evidence_for("ns", "n5", {"source_id": "s9", "session_id": "s9"}) == []
    assert b.evidence_for("other", "n1", None) == []


def test_transcript_is_quaids_user_assistant_form_without_other_roles():
    msgs = (Message("1", "user", "hi there"), Message("2", "system", "ignored"), Message("3", "assistant", "hello"))
    assert transcript(msgs) == "User: hi there\n\nAssistant: hello"


def test_namespace_key_is_a_safe_file_name_and_distinct():
    a, b = namespace_key("cortex-v1/p1"), namespace_key("cortex-v1/p2")
    assert a != b and a.startswith("ns-") and len(a) == 27 and "/" not in a


def test_quaid_home_is_absolute_even_under_a_relative_data_dir(monkeypatch):
    # the sidecar runs with cwd = QUAID_HOME; a relative home would resolve twice and Quaid would read no config
    b = QuaidRealBackend({}, BackendContext(embedder_name="hash", data_dir=Path("rel-data")))
    assert b.root.is_absolute() and b.root.parent == (Path.cwd() / "rel-data" / "quaid-real")
    assert b.version == f"quaid {source.quaid_version()} @ 9262e69"


def test_config_values_are_checked_by_name():
    with pytest.raises(ValueError, match="'extraction' must be auto|quaid|rig"):
        make(extraction="llm")
    with pytest.raises(ValueError, match="'llm_stages'"):
        make(llm_stages="maybe")


def test_offline_mock_turns_llm_stages_off_and_uses_the_rig_extraction():
    b = make()
    assert b.extraction == "rig" and b.llm_stages is False
    cfg = b.memory_json()
    assert cfg["retrieval"]["useHyde"] is False and cfg["retrieval"]["reranker"]["enabled"] is False
    assert cfg["janitor"]["dedup"]["llmVerifyEnabled"] is False
    assert cfg["retrieval"]["minSimilarity"] == 0.6  # Quaid's installer value, not the dataclass default 0.80
    assert cfg["ollama"]["embeddingModel"] == b.context.embedder.name == "hash-384 (unit tests only)"


def test_missing_source_makes_it_unavailable_with_the_path(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMRIG_QUAID_SOURCE", str(tmp_path / "nowhere"))
    a = source.availability()
    assert not a.ok and str(tmp_path / "nowhere") in a.reason and "MEMRIG_QUAID_SOURCE" in a.reason
    ok, reason = get_spec("quaid-real").available()
    assert not ok and reason == a.reason


def test_a_source_at_another_commit_is_refused_by_name(tmp_path, monkeypatch):
    # every file the sidecar needs is there, but the tree is not commit 9262e69's: named, never benchmarked
    for rel in source.SOURCE.required:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("# not Quaid's\n")
    monkeypatch.setenv("MEMRIG_QUAID_SOURCE", str(tmp_path))
    a = source.availability()
    assert not a.ok and a.reason.startswith(f"Quaid's modules/quaid at {tmp_path} is not commit 9262e69 of "
                                            "Quaid-Labs/quaid (digest ")
    assert get_spec("quaid-real").available() == (False, a.reason)
    b = QuaidRealBackend({}, BackendContext(embedder_name="hash", data_dir=tmp_path / "data"))
    with pytest.raises(QuaidSidecarError, match="is not commit 9262e69"):
        asyncio.run(b.start())


@pytest.mark.skipif(not (THIRD_PARTY / "quaid").is_dir(), reason="../shared/third_party/quaid is absent")
def test_the_shared_snapshot_is_the_pinned_commit(monkeypatch):
    monkeypatch.delenv("MEMRIG_QUAID_SOURCE", raising=False)
    assert source.SOURCE.check() == ""


QUAID_SYMLINKS = {"modules/quaid/clawdbot.plugin.json": "adaptors/openclaw/clawdbot.plugin.json",
                  "modules/quaid/openclaw.plugin.json": "adaptors/openclaw/clawdbot.plugin.json",
                  "modules/quaid/adaptors/openclaw/openclaw.plugin.json": "clawdbot.plugin.json"}  # git ls-tree: 120000


@pytest.mark.skipif(not (THIRD_PARTY / "quaid").is_dir(), reason="../shared/third_party/quaid is absent")
def test_a_checkout_with_real_symlinks_is_the_pinned_commit_and_a_changed_file_is_refused(tmp_path, monkeypatch):
    # a git clone of 9262e69 has modules/quaid's three symlinks as symlinks (the shared snapshot may hold them as
    # plain files of their target path): a copy with real ones must still be the pinned commit
    shared = THIRD_PARTY / "quaid"
    for f in (shared / "modules" / "quaid").rglob("*"):
        rel = f.relative_to(shared).as_posix()
        dst = tmp_path / rel
        if f.is_dir() and not f.is_symlink():
            dst.mkdir(parents=True, exist_ok=True)
        elif rel in QUAID_SYMLINKS:
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(QUAID_SYMLINKS[rel], dst)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(f.read_bytes())
    assert all((tmp_path / rel).is_symlink() and (tmp_path / rel).is_file() for rel in QUAID_SYMLINKS)
    monkeypatch.setenv("MEMRIG_QUAID_SOURCE", str(tmp_path))
    assert source.SOURCE.check() == ""
    assert "not commit" not in source.availability().reason
    # another commit's tree: one file changed
    cfg = tmp_path / "modules/quaid/config.py"
    cfg.write_bytes(cfg.read_bytes() + b"# changed\n")
    got = tree_digest(tmp_path, source.SOURCE.patterns)
    a = source.availability()
    assert not a.ok and a.reason == (f"Quaid's modules/quaid at {tmp_path} is not commit 9262e69 of Quaid-Labs/quaid "
                                     f"(digest {got[:12]}, pinned 882cd3923fce)")
    assert get_spec("quaid-real").available() == (False, a.reason)


# ------------------------------------------------------------------------------------------ Quaid itself
def need_quaid():
    a = source.availability()
    if not a.ok:
        pytest.skip(f"[requires:quaid] {a.reason}")


@pytest.mark.slow
async def test_store_dedup_and_recall_carry_evidence_back_through_quaid():
    need_quaid()
    b = make()
    fact = "The dev server runs on port 3001."
    s1 = Session("s1", T0, (Message("m1", "user", fact), Message("m2", "user", "My sister Maya lives in Lisbon.")))
    s2 = Session("s2", T0, (Message("m5", "user", fact),))
    try:
        await b.ingest("ns", IngestBatch(sessions=(s1,)))
        await b.ingest("ns", IngestBatch(sessions=(s2,)))
        # Quaid's hash dedup answered the second store with the first node: one node, both sessions' evidence.
        assert b.items["ns"] == 2
        nodes = (await b.call("nodes", ns=namespace_key("ns")))["nodes"]
        assert len(nodes) == 2
        n = next(x for x in nodes if x["name"] == fact)
        assert decode_source(n["source_id"]) == ["m1"] and n["session_id"] == "s1"
        assert n["confirmation_count"] == 1 and n["confidence"] == pytest.approx(0.52)
        r = await b.retrieve("ns", RetrieveQuery(fact, 5))
        top = r.memories[0]
        assert top.id == n["id"] and top.text == fact
        assert top.evidence_ids == ["m1", "m5"]
        # Hand-computed composite (query = the fact: cosine 1; intent PROJECT ("server"), Fact boost 1.0):
        # .60*1 + .20*recency 1 (accessed today) + .15*frequency 0 + confidence .52*.05 + confirmation min(.05, 1*.01)
        # + storage min(.03, .03*.003) = 0.83609 -> Quaid rounds to 3 places
        assert top.score == pytest.approx(round(0.6 + 0.2 + 0.52 * 0.05 + 0.01 + 0.03 * 0.003, 3))
        # recall() counted the access in Quaid's own row
        after = {x["id"]: x for x in (await b.call("nodes", ns=namespace_key("ns")))["nodes"]}
        assert after[n["id"]]["access_count"] == 1
    finally:
        await b.close()


@pytest.mark.slow
async def test_namespaces_are_separate_quaid_databases_and_reset_drops_one():
    need_quaid()
    b = make()
    try:
        await b.ingest("a", IngestBatch(sessions=(Session("s", T0, (Message("x1", "user", "Alpha team deploys on Fridays."),)),)))
        await b.ingest("b", IngestBatch(sessions=(Session("s", T0, (Message("y1", "user", "Beta team deploys on Mondays."),)),)))
        ra = await b.retrieve("a", RetrieveQuery("Alpha team deploys on Fridays.", 5))
        assert [m.evidence_ids for m in ra.memories] == [["x1"]]
        assert (b.root / "data" / f"{namespace_key('a')}.db").exists()
        await b.reset("a")
        assert not (b.root / "data" / f"{namespace_key('a')}.db").exists()
        assert (await b.retrieve("a", RetrieveQuery("Alpha team deploys on Fridays.", 5))).memories == []
        rb = await b.retrieve("b", RetrieveQuery("Beta team deploys on Mondays.", 5))
        assert [m.evidence_ids for m in rb.memories] == [["y1"]]
        d = b.describe_config()
        assert d["quaid_commit"] == source.QUAID_COMMIT and d["extraction_effective"] == "rig"
        assert d["embedding_model"] == b.context.embedder.name and "sqlite" in d["sqlite"].lower()
        assert json.loads((b.root / "config" / "memory.json").read_text())["ollama"]["url"].startswith("http://127.0.0.1:")
    finally:
        await b.close()
    assert not b.root.exists()
