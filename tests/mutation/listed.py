"""The hand-written wrong changes issue 17 listed (each once survived the whole test suite), applied one at a time
to a scratch copy of the repository: each must now fail at least one test of its module's tests in
tests/mutation/modules.toml (quick set, as `make mutation` runs them). Complements cosmic-ray's one-token mutants
with changes a person would make. Not part of `make test` (about 2 minutes).

    python -m tests.mutation.listed            # exit 1 when a change survives
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.mutation.run import load_plan, scratch_copy


@dataclass(frozen=True)
class Change:
    what: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...] = ()  # extra test files beyond the module's plan entry
    count: int = 1  # occurrences of `old` the change replaces (all of them)


CHANGES = (
    Change("bootstrap interval 95% -> 90%", "services/coordinator/stats.py",
           "a = (1.0 - confidence) / 2.0", "a = (1.0 - 0.90) / 2.0", count=2),
    Change("tie rule <= -> <", "services/coordinator/stats.py",
           "if abs(diff) <= threshold:", "if abs(diff) < threshold:"),
    Change("LoCoMo: category 5 counted in the headline F1", "services/coordinator/suites/locomo.py",
           'vals.setdefault("f1_cats_1_4", {})[pid] = f1 if r["category"] != "5" else None',
           'vals.setdefault("f1_cats_1_4", {})[pid] = f1'),
    Change("LoCoMo: session recall@k computed at k+1", "services/coordinator/suites/locomo.py",
           "evidence_recall_at_k(sess, gold_s, k)", "evidence_recall_at_k(sess, gold_s, k + 1)"),
    Change("LongMemEval: abstention questions not skipped", "services/coordinator/suites/longmemeval.py",
           'skip = bool(meta.get("abstention")) or not gold_t', "skip = not gold_t"),
    Change("LongMemEval: ndcg_any replaced by recall_any", "services/coordinator/suites/longmemeval.py",
           "ndcg_any_at_k(\n                            ranked, gold, k, corpus=corpus)",
           "recall_any_at_k(ranked, gold, k)"),
    Change("OpenClaw port (2026.9 path): the search path skips decay", "services/adapters/openclaw/backend.py",
           'decay = ranking_2609.Decay(p["decay_enabled"],', "decay = ranking_2609.Decay(False,"),
    Change("OpenClaw port (2026.9 path): the search path skips MMR", "services/adapters/openclaw/backend.py",
           'p["mmr_enabled"], p["mmr_lambda"],', 'False, p["mmr_lambda"],'),
    Change("OpenClaw port (mid-2026 path): the search path skips decay", "services/adapters/openclaw/backend.py",
           'if p["decay_enabled"]:', "if False:"),
    Change("OpenClaw port (mid-2026 path): the search path skips MMR", "services/adapters/openclaw/backend.py",
           'if p["mmr_enabled"]:', "if False:"),
    Change("cortex-mock: graph channel emptied", "services/cortex_mock/search.py",
           'channels["graph"] = ranking.top_ranked(_masked(act, mask), CHANNEL_DEPTH, 1e-9, tie)',
           'channels["graph"] = ranking.top_ranked(_masked(act, mask), CHANNEL_DEPTH, 1e-9, tie)[:0]'),
    Change("cortex-mock: temporal channel emptied", "services/cortex_mock/search.py",
           'channels["temporal"] = ranking.top_ranked(_masked(prox, tmask), CHANNEL_DEPTH, TEMPORAL_MIN, tie)',
           'channels["temporal"] = ranking.top_ranked(_masked(prox, tmask), CHANNEL_DEPTH, TEMPORAL_MIN, tie)[:0]'),
    Change("cortex-mock: settle delay removed", "services/cortex_mock/ingest.py",
           "now + settle_delay_s", "now",
           ("tests/test_cortex_mock_units.py", "tests/test_pipeline_ranking.py", "tests/test_cortex_mock_api.py"),
           count=2),
    Change("fault proxy: the random stream keyed by the request counter at decision time",
           "services/fault_proxy/engine.py",
           "dec, drawn, rng = decide(spec, info, self.seed, now, state, self._hits.get(key, 0))",
           "dec, drawn, rng = decide(spec, __import__('dataclasses').replace(info, seq=self._seq), self.seed, now, "
           "state, self._hits.get(key, 0))"),
    Change("drills: RSS limit made 1e9", "services/drills/catalog.py",
           '"rss_growth": growth_mb <= c.rss_growth_limit_mb', '"rss_growth": growth_mb <= 1e9'),
    Change("resources: leak slope per sample instead of per second", "collectors/resources.py",
           'est = slope_ci([r["t_s"] for r in rows],', "est = slope_ci(list(range(len(rows))),"),
    Change("open loop: per-phase corrected latency computed as done - sent", "loadtests/open_loop.py",
           '"corrected": hdr_summary_ms(hdr_from_ns((rec.done - rec.intended)[mo])),',
           '"corrected": hdr_summary_ms(hdr_from_ns((rec.done - rec.sent)[mo])),'),
)


def main() -> int:
    defaults, modules, _eq = load_plan()
    tests_of = {m["path"]: list(m["tests"]) for m in modules}
    args = list(defaults.get("args", []))
    scratch = Path(tempfile.mkdtemp(prefix="memrig-listed-"))
    scratch_copy(scratch)
    env = {**os.environ, "PYTHONPATH": f"{scratch}{os.pathsep}{scratch / 'proto'}", "PYTHONDONTWRITEBYTECODE": "1"}
    survived = []
    try:
        for c in CHANGES:
            f = scratch / c.path
            src = f.read_text()
            if src.count(c.old) != c.count:
                print(f"listed: {c.what}: the code to change is not found {c.count} time(s) in {c.path} (moved?)")
                survived.append(c.what)
                continue
            tests = list(dict.fromkeys([*tests_of.get(c.path, []), *c.tests]))
            f.write_text(src.replace(c.old, c.new))
            try:
                cmd = [sys.executable, "-m", "pytest", *args, *tests]
                r = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True, timeout=600)
                caught = r.returncode not in (0, 5)
            except subprocess.TimeoutExpired:
                caught = True
            finally:
                f.write_text(src)
            print(f"listed: {'caught   ' if caught else 'SURVIVED '} {c.what}  ({shlex.join(tests)})", flush=True)
            if not caught:
                survived.append(c.what)
    finally:
        subprocess.run(["rm", "-rf", str(scratch)], check=False)
    print(f"listed: {len(CHANGES) - len(survived)} of {len(CHANGES)} changes caught")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
