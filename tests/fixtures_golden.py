"""Crafted suite samples whose every quoted number was computed by hand (tests/test_golden_suites.py scores them).

Each builder returns samples shaped like the runner's (the dicts it writes to samples.jsonl); the hand computations
are written next to each sample so a reader can re-derive them. The suite pipeline tests reuse them.
"""

from __future__ import annotations


def rec(*evidence: list[str], latency: float = 5.0, ids: list[str] | None = None) -> dict:
    """A compact retrieval record: one memory per evidence list, in rank order."""
    mems = [{"id": (ids[i] if ids else f"m{i}"), "score": 1.0 - i * 0.01, "evidence_ids": list(ev), "text": ""}
            for i, ev in enumerate(evidence)]
    return {"memories": mems, "latency_ms": latency, "server_ms": latency, "degraded": False}


# ------------------------------------------------------------------------------------------------------
# LoCoMo

# (probe, category, gold answer, answer, gold evidence, retrieved evidence lists in rank order)
LOCOMO_ROWS = [
    # cat 1: gold parts {Paris, Rome}, prediction part {Paris}: (1 + 0) / 2 = 0.5
    # turns D1:1, D2:5, D3:2, D1:3 vs gold {D1:3, D2:5}: @1 0, @3 1/2, @5 1; sessions S1, S2, S3 vs {S1, S2}:
    # @1 1/2, @3 1
    ("q1", "1", "Paris, Rome", "Paris", ["D1:3", "D2:5"], [["D1:1"], ["D2:5", "D1:1"], ["D3:2"], ["D1:3"]]),
    # cat 2: tokens {7, may, 2023} vs {may, 2023}: P 1, R 2/3, F1 0.8
    # turns D5:1, D6:2, D7:3, D1:4, D1:5 vs {D1:4}: @1 0, @3 0, @5 1; sessions S5, S6, S7, S1 vs {S1}: @3 0, @4 1
    ("q2", "2", "7 May 2023", "May 2023", ["D1:4"], [["D5:1"], ["D6:2"], ["D7:3"], ["D1:4"], ["D1:5"]]),
    # cat 3: gold is the text before ';' -> "hiking": F1 1
    ("q3", "3", "hiking; also camping", "hiking", ["D2:1"], [["D2:1"]]),
    # cat 4: {blue, car} vs {red, car}: P 1/2, R 1/2, F1 0.5; nothing retrieved: recall 0
    ("q4", "4", "blue car", "red car", ["D4:4"], []),
    # cat 5: says "not mentioned": 1 (kept out of the headline)
    ("q5", "5", "Not mentioned in the conversation", "Not mentioned in the conversation.", ["D9:9"], [["D9:9"]]),
    # cat 4: no overlap: F1 0; no gold evidence: recall None (skipped)
    ("q6", "4", "blue", "green", [], [["D8:1"]]),
]


def locomo_samples(cond: str = "openclaw") -> list[dict]:
    return [{"condition": cond, "probe_id": pid, "category": cat, "ground_truth": gold, "answer": ans,
             "evidence_ids": ev, "meta": {}, "context_tokens": 10 * (i + 1),
             "retrievals": {cond: rec(*ret, latency=float(i + 1))}}
            for i, (pid, cat, gold, ans, ev, ret) in enumerate(LOCOMO_ROWS)]


# ------------------------------------------------------------------------------------------------------
# LongMemEval

def lme_sample(pid: str, cat: str, sessions: list[str], users: list[str], gold_t: list[str], ret: list[list[str]],
         correct: bool, abstention: bool = False) -> dict:
    gold_s = sorted({t.rsplit("_", 1)[0] for t in gold_t})
    return {"condition": "openclaw", "probe_id": pid, "category": cat, "evidence_ids": gold_t,
            "meta": {"gold_sessions": gold_s, "user_turns": users, "abstention": abstention, "sessions": sessions},
            "retrievals": {"openclaw": rec(*ret)}, "binary_judge": {"correct": correct}, "context_tokens": 4}


LME_SAMPLES = [
    # user turns retrieved sA_1, sB_1, sC_1 (sA_2 is an assistant turn, dropped); gold sB_1 at rank 2.
    # any/all: @1 0, @3 1. ndcg_any: @1 0; @3 (official DCG, rank 2 weighs 1/log2(2) = 1) 1 / 1 = 1.
    lme_sample("q1", "multi-session", ["sA", "sB", "sC"], ["sA_1", "sA_3", "sB_1", "sC_1"], ["sB_1"],
         [["sA_1"], ["sA_2"], ["sB_1"], ["sC_1"]], True),
    # ranking sE_3, sF_1, sD_1 vs gold {sD_1, sE_3}: any@1 1, all@1 0, all@3 1;
    # ndcg_any@1 = 1 / 1; @3 = (1 + 0 + 1/log2 3) / (1 + 1/log2 2) = 1.63093 / 2
    lme_sample("q2", "temporal-reasoning", ["sD", "sE", "sF"], ["sD_1", "sE_3", "sF_1"], ["sD_1", "sE_3"],
         [["sE_3"], ["sF_1"], ["sD_1"]], False),
    # abstention: nothing retrieved; scoring it would add zeros
    lme_sample("q3_abs", "multi-session", ["sG"], ["sG_1"], ["sG_1"], [], True, abstention=True),
    # no user-side gold turn: skipped too
    lme_sample("q4", "knowledge-update", ["sH"], ["sH_1"], [], [["sH_1"]], True),
]


# ------------------------------------------------------------------------------------------------------
# MADial

def madial_sample(pid: str, gold: list[str], memories: list[dict]) -> dict:
    rec = {"memories": memories, "latency_ms": 2.0, "server_ms": 2.0}
    return {"condition": "openclaw", "probe_id": pid, "category": "user-1", "evidence_ids": gold,
            "meta": {"primary": gold[0]}, "retrievals": {"openclaw": rec}, "context_tokens": 7}


MADIAL_SAMPLES = [
    # ranked mem-7, mem-1 (no evidence ids: the memory id counts), mem-3; gold {mem-3, mem-7}, primary mem-3
    # recall@1 1/2, @3 1; any@1 1; primary_hit@1 0, @3 1; mrr 1; primary_mrr 1/3
    madial_sample("d1", ["mem-3", "mem-7"], [{"id": "x1", "evidence_ids": ["mem-7"]}, {"id": "mem-1", "evidence_ids": []},
                                       {"id": "x3", "evidence_ids": ["mem-3", "chunk-9"]}]),
    # nothing relevant: all 0
    madial_sample("d2", ["mem-2"], [{"id": "x", "evidence_ids": ["mem-5"]}, {"id": "y", "evidence_ids": ["mem-9"]}]),
    # hit at rank 1: all 1
    madial_sample("d3", ["mem-4"], [{"id": "x", "evidence_ids": ["mem-4"]}]),
]


# ------------------------------------------------------------------------------------------------------
# Cortex V1

# (probe, category, compaction retains?, compacted score, OpenClaw score, OpenClaw hit, memories returned)
CV1_ROWS = [
    ("A01", "A", "yes", 3, 3, True, 2),
    ("A02", "A", "no", 1, 3, True, 1),
    ("B01", "B", "yes", 2, 2, False, 0),
    ("C01", "C", "no", 0, 2, True, 3),
    ("D01", "D", "yes", 3, 1, False, 2),
]


def cv1_samples() -> list[dict]:
    out = []
    for i, (pid, cat, keeps, s_comp, s_oc, hit, n_mem) in enumerate(CV1_ROWS):
        base = {"probe_id": pid, "category": cat, "meta": {"compaction_retains": keeps}}
        out.append({**base, "condition": "compacted", "judge": {"score": s_comp}, "context_tokens": 100})
        rec = {"memories": [{"id": f"m{j}"} for j in range(n_mem)], "hit": hit, "latency_ms": 10.0 * (i + 1),
               "server_ms": 5.0 * (i + 1), "degraded": i == 4}
        out.append({**base, "condition": "OpenClaw native", "judge": {"score": s_oc}, "context_tokens": 300 + i,
                    "retrievals": {"openclaw": rec}})
    return out
