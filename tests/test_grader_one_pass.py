"""The grader's one-pass reading of an injected text gives what the per-budget reading gave.

metrics/shown.shown_at reads the words once up to the largest cut and finds each corpus n-gram at the fewest leading
words that hold it; metrics/budget.chars_within cuts at the bytes of the first B tokens; services/common/tokens keeps
the token ids of a long text. Each is checked here against the straightforward definition it replaced (re-read the
whole text at every cut, sum each token's bytes, encode every time), on hand-made and on seeded random texts that
carry the cases the rule names: HTML entities, backslash escapes, a word split by a cut, non-ASCII characters, short
messages, text shown twice.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from services.common import tokens
from services.coordinator.metrics import budget
from services.coordinator.metrics import shown as S

VOCAB = ["caroline", "melanie", "went", "to", "the", "lgbtq", "support", "group", "on", "7", "may", "2023", "pottery",
         "class", "café", "naïve", "&amp;", "\\n", "\\u2028", "**", "-", "said", "she", "painted", "a", "sunrise",
         "one", "two", "twenty", "\u00e9t\u00e9", "日本", "camping", "last", "week", "&#39;s", "x_y", "...", "\n"]


def old_shown_at(text, cuts, corpus, answer, threshold=S.MESSAGE_SHOWN):
    """The reading before the one pass: every cut re-reads the words of the whole text and their n-grams."""
    ws, ends = S.word_spans(text)
    terms = S.answer_terms(answer) if answer else []
    shown_ids, answer_cov = [], []
    for cut in cuts:
        k = int(np.searchsorted(np.asarray(ends, dtype=np.int64), cut, side="right")) if ends else 0
        head = ws[:k]
        shown_ids.append(corpus.shown(S.text_keys(head, corpus.n), threshold) if corpus is not None else [])
        answer_cov.append(S.answer_coverage(terms, S.shown_terms(head)) if terms else None)
    return shown_ids, answer_cov


def old_chars_within(text, budgets):
    """Each token's bytes summed, then the UTF-8 prefix up to the B-th token's end."""
    enc = tokens._encoding()
    ids = enc.encode(text, disallowed_special=())
    if not ids:
        return 0, [0 for _ in budgets]
    raw = text.encode("utf-8")
    ends, pos = [], 0
    for t in ids:
        pos += len(enc.decode_single_token_bytes(t))
        ends.append(pos)
    cuts = []
    for b in budgets:
        cuts.append(len(text) if b >= len(ids) else 0 if b <= 0 else
                    len(raw[: ends[b - 1]].decode("utf-8", errors="ignore")))
    return len(ids), cuts


def random_text(rng: random.Random, n: int) -> str:
    parts = []
    for _ in range(n):
        w = rng.choice(VOCAB)
        parts.append(w + rng.choice([" ", " ", " ", "", ", ", ".\n", "\n- "]))
    return "".join(parts)


def test_shown_at_by_hand():
    # corpus: m1 has the 3-grams (went to the), (to the group); m2 is two words (a whole-sequence key)
    corpus = S.CorpusIndex([("m1", "went to the group"), ("m2", "pottery class")])
    text = "she went to the group. pottery class"
    # cuts: after "to" (1 of m1's 2 grams: coverage 0.5, shown), after "group" (both), the whole text (m2 too)
    shown, ans = S.shown_at(text, [len("she went to the"), len("she went to the group"), len(text)], corpus,
                            "the pottery group")
    assert shown == [["m1"], ["m1"], ["m1", "m2"]]
    # answer terms: pottery, group (the, a function word, is out): none, then group, then both
    assert ans == [0.0, 0.5, 1.0]
    # a cut in the middle of "group" does not show the word: only (went to the) of m1, still half
    shown, ans = S.shown_at(text, [len("she went to the gro")], corpus, "group")
    assert shown == [["m1"]] and ans == [0.0]
    # the largest cut bounds the scan: words past it never count
    assert S.word_spans("ab cd&amp;ef gh", upto=5) == (["ab", "cd"], [2, 5])
    assert S.word_spans("ab cd&amp;ef gh", upto=4) == (["ab"], [2])


def test_text_grams_hold_each_key_at_its_shortest_prefix():
    ws = ["a", "b", "a", "b", "c"]
    g = S.text_grams(ws, 3)
    for k in range(len(ws) + 1):
        assert set(g.keys[g.need <= k].tolist()) == set(S.text_keys(ws[:k], 3).tolist())
    # "a" first appears with 1 word, (a, b) with 2, (a, b, c) with 5
    need = dict(zip(g.keys.tolist(), g.need.tolist(), strict=True))
    assert need[S.gram_key(["a"])] == 1 and need[S.gram_key(["a", "b"])] == 2
    assert need[S.gram_key(["a", "b", "c"])] == 5
    assert len(S.text_grams([], 3).keys) == 0


@pytest.mark.parametrize("seed", range(12))
def test_shown_at_equals_the_per_cut_reading_on_random_texts(seed):
    rng = random.Random(seed)
    msgs = [(f"m{i}", random_text(rng, rng.choice([1, 2, 3, 8, 20]))) for i in range(25)]
    corpus = S.CorpusIndex(msgs)
    # the injected text: some messages verbatim (one twice), some random words between them
    pieces = [rng.choice(msgs)[1] if rng.random() < 0.6 else random_text(rng, 10) for _ in range(rng.randint(0, 30))]
    text = " ".join(pieces)
    cuts = sorted(rng.randint(0, len(text)) for _ in range(5))
    answer = random_text(rng, rng.randint(1, 6))
    assert S.shown_at(text, cuts, corpus, answer) == old_shown_at(text, cuts, corpus, answer)
    assert S.shown_at(text, cuts, None, answer) == old_shown_at(text, cuts, None, answer)
    assert S.shown_at(text, cuts, corpus, None) == old_shown_at(text, cuts, corpus, None)


@pytest.mark.parametrize("seed", range(8))
def test_chars_within_equals_the_token_by_token_sum(seed):
    if tokens._encoding() is None:
        pytest.skip("the offline cl100k encoding is not installed")
    rng = random.Random(seed)
    text = random_text(rng, rng.choice([0, 1, 50, 400, 1500]))
    budgets = (0, 1, 3, 250, 500, 1000, 2000, 4000)
    assert budget.chars_within(text, budgets) == old_chars_within(text, budgets)


def test_a_long_text_is_encoded_once_and_counts_the_same():
    if tokens._encoding() is None:
        pytest.skip("the offline cl100k encoding is not installed")
    enc = tokens._encoding()
    text = random_text(random.Random(5), 400)
    assert len(text) >= tokens.CACHE_MIN_CHARS
    tokens._cached_ids.cache_clear()
    expect = enc.encode(text, disallowed_special=())
    assert tokens.count_tokens(text) == len(expect)
    assert tokens.truncate_to_tokens(text, 50) == enc.decode(expect[:50])
    assert budget.chars_within(text, (50,)) == old_chars_within(text, (50,))
    info = tokens._cached_ids.cache_info()
    assert (info.misses, info.hits) == (1, 2)
    short = "went to the group"
    assert tokens.count_tokens(short) == len(enc.encode(short)) and tokens._cached_ids.cache_info().misses == 1


async def test_a_run_loads_the_rules_lazy_parts_before_anything_is_timed(tmp_path, monkeypatch):
    """NLTK's stemmer and the tokenizer load before the first backend call, not at the first grading (where the
    import stalled the event loop inside the timings of the calls in flight)."""
    from services.coordinator import report_html, runner
    from services.coordinator.runner import RunConfig, run_suite

    monkeypatch.setenv("MEMRIG_LLM_BASE_URL", "http://127.0.0.1:9/v1")  # nobody calls it: retrieval only
    monkeypatch.setattr(report_html, "render_html", lambda *a, **k: None)
    events: list[str] = []
    monkeypatch.setattr(runner.shown, "load", lambda: events.append("load"))
    real_account = budget.account
    monkeypatch.setattr(budget, "account", lambda *a, **k: events.append("account") or real_account(*a, **k))
    cfg = RunConfig(suite="octybot", backends=["bm25"], out_dir=str(tmp_path / "r"), embedder="hash",
                    in_process=True)
    out = await run_suite(cfg)
    assert out.state == "succeeded", out.failures
    assert events[0] == "load" and events.count("load") == 1 and "account" in events


def test_load_loads_the_stemmer_and_the_tokenizer():
    from services.coordinator.metrics import qa

    qa._stemmer.cache_clear()
    tokens._encoding.cache_clear()
    S.load()
    assert qa._stemmer.cache_info().currsize == 1 and tokens._encoding.cache_info().currsize == 1


def ref_words(text):
    """The rule's words by its definition, with no shortcut (module docstring of metrics/shown.py, Words)."""
    import html
    import unicodedata

    if not text:
        return []
    return S.WORD_RE.findall(unicodedata.normalize("NFKC", html.unescape(S.ESCAPE_RE.sub(" ", text))).lower())


def ref_word_spans(text, upto=None):
    """Each match read on its own: what word_spans gave before plain ASCII words were lower-cased in one call."""
    out, ends = [], []
    for m in S._SPAN_RE.finditer(text):
        if upto is not None and m.end() > upto:
            break
        for w in ref_words(m.group(0)):
            out.append(w)
            ends.append(m.end())
    return out, ends


def test_word_spans_and_words_equal_their_definition_on_entities_escapes_and_non_ascii():
    hand = "Caf\u00e9 &amp; Bar\\nNext &#39;s \u0130stanbul x_y \u65e5\u672c END"
    assert S.word_spans(hand) == ref_word_spans(hand)
    # the entity gives no word, the escape separates, the dotted capital I lower-cases to two code points
    assert S.word_spans(hand)[0][:4] == ["café", "bar", "next", "s"]
    rng = random.Random(7)
    for _ in range(300):
        text = " ".join(rng.choice(VOCAB).upper() if rng.random() < 0.2 else rng.choice(VOCAB)
                        for _ in range(rng.randint(0, 60)))
        assert S.words(text) == ref_words(text)
        assert S.word_spans(text) == ref_word_spans(text)
        for upto in (0, 1, len(text) // 3, len(text) - 1, len(text), len(text) + 5):
            assert S.word_spans(text, upto=upto) == ref_word_spans(text, upto)


def test_gram_keys_tell_apart_every_word_sequence_by_words_order_and_length():
    words = sorted({w for v in VOCAB for w in ref_words(v)})
    seqs = [(a,) for a in words] + [(a, b) for a in words for b in words]
    seqs += [(a, b, c) for a in words[:12] for b in words for c in words]
    keys = [S.gram_key(list(s)) for s in seqs]
    assert len(set(keys)) == len(seqs)
    # the text side (text_keys) and the corpus side (a message's n-grams) key a sequence alike
    ws = ["she", "painted", "a", "sunrise"]
    assert set(S.text_keys(ws, 3).tolist()) == {S.gram_key(ws[i:i + k]) for k in (1, 2, 3)
                                                for i in range(len(ws) - k + 1)}
    idx = S.CorpusIndex([("m1", "she painted a sunrise"), ("m2", "said she")])
    assert set(idx._g.keys[idx._g.owner == 0].tolist()) == {S.gram_key(["she", "painted", "a"]),
                                                             S.gram_key(["painted", "a", "sunrise"])}
    assert idx._g.keys[idx._g.owner == 1].tolist() == [S.gram_key(["said", "she"])]
