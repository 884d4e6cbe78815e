"""The Next.js-docs suite's numbers by hand (services/coordinator/suites/nextjs_docs.py), without the docs
(the scoring reads only samples and the load info): doc hit by citation or by path in the context, reciprocal
rank, API coverage, tokens, latency, the static AGENTS.md row, the baseline choice and the rendered table."""

from __future__ import annotations

import pytest

from services.coordinator.suites.nextjs_docs import NextjsDocsSuite, api_coverage, doc_in_context, doc_rank


def test_doc_rank_context_and_api_rules():
    mems = [{"source": "docs/x.md"}, {"evidence_ids": ["docs/a.md"]}, {"source": "docs/a.md"}]
    assert doc_rank(mems, ["docs/a.md"]) == 2 and doc_rank(mems, ["docs/q.md"]) is None and doc_rank([], ["d"]) is None
    assert doc_rank([{"source": None, "evidence_ids": None}], [""]) == 1  # a missing source reads as ""
    assert doc_in_context(3, "", ["d"]) and doc_in_context(None, "see docs/b.md", ["docs/b.md"])
    assert not doc_in_context(None, "see docs/c.md", ["docs/b.md"])
    assert api_coverage("useRouter and Link", ["useRouter", "Link"]) and not api_coverage("Link", ["useRouter", "Link"])
    assert api_coverage("", [])


def sample(cond, pid, docs, apis, agents_hit, mems, ctx, tokens, latency):
    return {"condition": cond, "probe_id": pid, "meta": {"docs": docs, "apis": apis, "agents_md_hit": agents_hit},
            "retrievals": {cond: {"memories": mems, "formatted_context": ctx, "latency_ms": latency}},
            "context_tokens": tokens}


SAMPLES = [
    # cited by the second memory: hit, RR 1/2; both APIs in the context
    sample("openclaw", "T1", ["docs/a.md"], ["useRouter", "Link"], True,
           [{"source": "docs/x.md"}, {"evidence_ids": ["docs/a.md"]}], "useRouter and Link", 100, 10.0),
    # no memory cites it, but the context carries it under its path: hit, RR 0; "cookies" missing
    sample("openclaw", "T2", ["docs/b.md"], ["cookies"], False, [], "see docs/b.md: headers()", 300, 30.0),
    sample("memory-hook", "T1", ["docs/a.md"], ["useRouter", "Link"], True, [{"source": "docs/a.md"}], "", 50, 5.0),
    sample("memory-hook", "T2", ["docs/b.md"], ["cookies"], False, [{"source": "docs/z.md"}], "nothing", 70, 7.0),
]


@pytest.fixture(scope="module")
def scored():
    suite = NextjsDocsSuite(seed=0)
    suite._info = {"source": "next@15.5.0 dist/docs", "docs": 3, "tasks": 2, "agents_md_index_tokens": 500}
    return suite, suite.score(SAMPLES)


def test_tables_by_hand(scored):
    _, out = scored
    o, h = out["conditions"]["openclaw"], out["conditions"]["memory-hook"]
    assert {k: v["mean"] for k, v in o["overall"].items()} == {"doc_hit": 1.0, "rr": 0.25, "api_coverage": 0.5,
                                                               "token_spend": 200.0, "latency_ms": 20.0}
    assert {k: v["mean"] for k, v in h["overall"].items()} == {"doc_hit": 0.5, "rr": 0.5, "api_coverage": 0.0,
                                                               "token_spend": 60.0, "latency_ms": 6.0}
    assert (o["n"], o["missed"], h["missed"]) == (2, [], ["T2"])
    assert (o["latency"]["n"], o["latency"]["p50_ms"]) == (2, 20.0)
    a = out["agents_md"]
    assert a["n"] == 2 and a["overall"]["doc_hit"]["mean"] == 0.5 and a["overall"]["token_spend"]["mean"] == 500.0
    assert a["overall"]["rr"]["mean"] is None and a["overall"]["api_coverage"]["n"] == 0
    assert out["baseline"] == "openclaw" and list(out["comparisons"]) == ["memory-hook"]
    assert [x["metric"] for x in out["comparisons"]["memory-hook"]["comparisons"]] == [
        "doc_hit", "rr", "api_coverage", "token_spend", "latency_ms"]


def test_render_by_hand(scored):
    suite, out = scored
    lines = suite.render(out).split("\n")
    assert lines[2].startswith("Corpus: next@15.5.0 dist/docs, 3 docs, 2 coding tasks. Doc hit@k = ")
    assert lines[4].startswith("**The evals' pass/fail part")
    i = lines.index("| configuration | doc hit@k | MRR | API coverage | ctx tokens | p50 ms |")
    hook, oc, agents = (lines[i + k].split(" | ") for k in (2, 3, 4))
    assert hook[0] == "| memory-hook" and hook[1].startswith("50.0% [") and hook[2:] == [
        "0.500", "0.0% [0.0%, 65.8%]", "60", "6.0 |"]  # Wilson, 0 of 2: z²/(2 + z²)
    assert oc == ["| openclaw", "100.0% [34.2%, 100.0%]", "0.250", oc[3], "200", "20.0 |"] and oc[3].startswith("50.0% [")
    assert agents[0] == "| agents-md-index (static, computed)" and agents[2:] == [
        "—", "— (agent must open the file)", "500", "0 |"]
    assert "Missed (no answering doc retrieved): memory-hook: T2; openclaw: none" in lines


def test_full_context_is_the_baseline_when_present():
    suite = NextjsDocsSuite(seed=0)
    suite._info = {}
    extra = [dict(s, condition="full-context", retrievals={"full-context": s["retrievals"][s["condition"]]})
             for s in SAMPLES[:2]]
    out = suite.score(SAMPLES + extra)
    assert out["baseline"] == "full-context" and sorted(out["comparisons"]) == ["memory-hook", "openclaw"]
    assert out["agents_md"]["overall"]["token_spend"]["mean"] == 0.0  # no index size known
    assert "Corpus: ?, ? docs, ? coding tasks." in suite.render(out)
    assert suite.score([])["baseline"] is None and "agents_md" not in suite.score([])


def test_load_from_a_crafted_docs_dir(tmp_path):
    from services.coordinator.suites.data.nextjs_docs_tasks import TASKS

    needed = sorted({d for _, _, ds, _ in TASKS for d in ds})
    have = needed[:-1]  # one answering doc absent: its tasks drop out and it is reported missing
    _docs_dir(tmp_path, have + ["01-app/99-extra/a.md", "01-app/99-extra/b.md", "02-pages/p.md"])
    suite = NextjsDocsSuite({"docs_dir": str(tmp_path)}, seed=0)
    data = suite.load()
    paths = [d.path for d in data.corpora["nextjs-docs"].documents]
    assert paths == sorted(have + ["01-app/99-extra/a.md", "01-app/99-extra/b.md"])  # section 01-app only
    tasks = [t for t in TASKS if any(d in have for d in t[2])]
    assert [p.id for p in data.probes] == [t[0] for t in tasks]
    p0, t0 = data.probes[0], tasks[0]
    assert (p0.expected, p0.meta["docs"], p0.meta["apis"], p0.meta["agents_md_hit"], p0.namespace) == (
        list(t0[3]), list(t0[2]), list(t0[3]), True, "nextjs-docs")
    assert p0.category == t0[2][0].split("/")[2]  # the third path part, e.g. 04-functions
    info = data.info
    assert info["answering_docs_missing"] == [needed[-1]] and info["docs"] == len(paths)
    assert info["tasks"] == len(tasks) and info["source"] == str(tmp_path)
    assert info["docs_chars"] == sum(len(f"# {p}\n") for p in paths) and info["agents_md_index_tokens"] > 0
    # max_docs keeps every answering doc and fills up with a seeded sample of the others
    small = NextjsDocsSuite({"docs_dir": str(tmp_path), "max_docs": len(have) + 1}, seed=0).load()
    kept = {d.path for d in small.corpora["nextjs-docs"].documents}
    assert set(have) <= kept and len(kept) == len(have) + 1
    assert NextjsDocsSuite.defaults["version"] == "16.4.6" and NextjsDocsSuite.defaults["sections"] == "01-app"


def _docs_dir(tmp_path, rels):
    for rel in rels:
        f = tmp_path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"# {rel}\n")
    return str(tmp_path)


def test_categories_of_every_task(tmp_path):
    """Category = the first answering doc's sub-section (its third path part) when it lies that deep, else guide."""
    from collections import Counter

    from services.coordinator.suites.data.nextjs_docs_tasks import TASKS

    d = _docs_dir(tmp_path, sorted({x for _, _, ds, _ in TASKS for x in ds}))
    probes = NextjsDocsSuite({"docs_dir": d}, seed=0).load().probes
    assert Counter(p.category for p in probes) == {"04-functions": 13, "03-file-conventions": 4, "02-components": 3,
                                                   "01-directives": 1, "guide": 1}
    cat = {p.id: p.category for p in probes}
    assert (cat["use-cache-lifetime"], cat["product-404"], cat["form-errors"]) == (
        "01-directives", "04-functions", "guide")


def test_category_depth_by_the_first_doc(tmp_path, monkeypatch):
    from services.coordinator.suites import nextjs_docs as N

    monkeypatch.setattr(N, "TASKS", [
        ("t1", "q1", ["01-app/02-guides/forms.md", "01-app/03-api/04-functions/x.md"], ["a"]),
        ("t2", "q2", ["01-app/03-api/04-functions/y.md", "01-app/02-guides/z.md"], ["b"]),
        ("t3", "q3", ["01-app/index.md"], ["c"])])
    d = _docs_dir(tmp_path, ["01-app/02-guides/forms.md", "01-app/03-api/04-functions/x.md",
                             "01-app/03-api/04-functions/y.md", "01-app/02-guides/z.md", "01-app/index.md"])
    assert [p.category for p in NextjsDocsSuite({"docs_dir": d}, seed=0).load().probes] == [
        "guide", "04-functions", "guide"]


def test_max_docs_of_one_keeps_only_the_answering_docs(tmp_path):
    from services.coordinator.suites.data.nextjs_docs_tasks import TASKS

    needed = sorted({x for _, _, ds, _ in TASKS for x in ds})
    d = _docs_dir(tmp_path, needed + ["01-app/99-extra/a.md", "01-app/99-extra/b.md"])
    for max_docs in (1, len(needed)):
        kept = [x.path for x in NextjsDocsSuite({"docs_dir": d, "max_docs": max_docs}, seed=0)
                .load().corpora["nextjs-docs"].documents]
        assert kept == needed
    with pytest.raises(ValueError, match="max_docs"):
        NextjsDocsSuite({"docs_dir": d, "max_docs": -1})


def test_defaults_registration_and_the_fallback_baseline():
    from services.coordinator.suites.registry import get_suite

    assert NextjsDocsSuite.defaults == {"version": "16.4.6", "docs_dir": None, "sections": "01-app", "max_docs": 0,
                                        "top_k": 6, "mode": "fast"}
    assert get_suite("nextjs-docs") is NextjsDocsSuite
    assert NextjsDocsSuite().seed == 0 and NextjsDocsSuite(seed=3).seed == 3  # the max_docs sample's seed
    suite = NextjsDocsSuite(seed=0)
    suite._info = {}
    renamed = [dict(s, condition={"openclaw": "zeta", "memory-hook": "alpha"}[s["condition"]]) for s in SAMPLES]
    out = suite.score(renamed)
    assert out["baseline"] == "alpha" and list(out["comparisons"]) == ["zeta"]  # the first by name


def test_directions_static_hits_and_the_scorecard(scored):
    suite, out = scored
    flags = {x["metric"]: x["higher_is_better"] for x in out["comparisons"]["memory-hook"]["comparisons"]}
    assert flags == {"doc_hit": True, "rr": True, "api_coverage": True, "token_spend": False, "latency_ms": False}
    assert "#### Scorecard: memory-hook vs openclaw" in suite.render(out).split("\n")
    alone = suite.score([s for s in SAMPLES if s["condition"] == "openclaw"])
    assert not any(line.startswith("#### ") for line in suite.render(alone).split("\n"))
    all_hit = suite.score([dict(s, meta={**s["meta"], "agents_md_hit": True}) for s in SAMPLES])
    assert all_hit["agents_md"]["overall"]["doc_hit"]["mean"] == 1.0
    row = next(line for line in suite.render(all_hit).split("\n") if line.startswith("| agents-md-index"))
    assert row.split(" | ")[1] == "100.0% [34.2%, 100.0%]"  # Wilson, 2 of 2: lower bound 2/(2 + z²), in percent


def test_missing_tokens_and_run_probe():
    import asyncio

    from services.common.tokens import count_tokens
    from services.coordinator.suites.base import Probe

    suite = NextjsDocsSuite(seed=0)
    suite._info = {}
    row = {k: v for k, v in SAMPLES[0].items() if k != "context_tokens"}
    assert suite.score([row])["conditions"]["openclaw"]["overall"]["token_spend"]["mean"] == 0.0

    class Ctx:
        async def retrieve(self, backend, probe):
            return {"memories": [], "formatted_context": "use the Link component"}

    cond = suite.conditions(["openclaw"], {})[0]
    r = asyncio.run(suite.run_probe(Ctx(), Probe("t", "q", "guide"), cond))
    assert list(r["retrievals"]) == ["openclaw"] and r["context_tokens"] == count_tokens("use the Link component") > 0
