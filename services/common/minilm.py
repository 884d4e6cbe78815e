"""all-MiniLM-L6-v2's forward pass on torch, `tokenizers` and `safetensors` alone (issue 46).

Loading the model through sentence-transformers costs a fresh process 16-20 s of CPU before its first vector (torch,
transformers and its modeling machinery, sentence-transformers), for a forward pass of milliseconds. This module
reads the sentence-transformers package directory itself (config.json, model.safetensors, tokenizer.json,
sentence_bert_config.json, modules.json, 1_Pooling/config.json) and runs the same operations in the same order, so
its vectors are bit-identical (float32) to `SentenceTransformer(path, device="cpu").encode(texts, batch_size=...)`
with transformers 5.x's default attention for BERT (torch's scaled_dot_product_attention with a boolean padding mask,
or no mask when a batch has no padding): tests/test_minilm_forward.py checks that against sentence-transformers.

The architecture is BERT: token + segment + position embeddings and a LayerNorm; per encoder layer, multi-head
self-attention, an output projection with a residual LayerNorm, a GELU (erf) feed-forward with a residual LayerNorm;
then mean pooling over the attention mask and L2 normalisation. `encode` batches like sentence-transformers: a call's
texts are ordered by character length, longest first (numpy's default argsort of the negated lengths, ties included),
cut into batches of `batch_size`, each padded to its longest text and truncated at `max_seq_length` tokens.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from services.common.errors import InputError

# The module types a sentence-transformers model directory must list, in this order, for this forward to be its own.
_MODULES = ("sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling",
            "sentence_transformers.models.Normalize")


def _read_json(path: Path) -> dict | list:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(str(path.name), f"missing from the model directory {path.parent}") from None


def check_texts(texts: Sequence[str], field: str = "texts") -> list[str]:
    """`texts` as a list, or InputError naming the first item that is not a str (`texts[3]: must be a str, ...`)."""
    if isinstance(texts, str):
        raise InputError(field, "must be a list of str, got one str")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise InputError(f"{field}[{i}]", f"must be a str, got {type(t).__name__}")
    return out


class MiniLM:
    """A BERT sentence encoder with mean pooling and L2 normalisation, from a sentence-transformers directory."""

    def __init__(self, path: str | Path):
        import torch
        from safetensors.torch import load_file
        from tokenizers import Tokenizer

        self.path = Path(path)
        cfg = _read_json(self.path / "config.json")
        if cfg.get("model_type") != "bert" or cfg.get("position_embedding_type", "absolute") != "absolute":
            raise InputError("config.json", f"expected an absolute-position BERT, got {cfg.get('model_type')!r}")
        if cfg.get("hidden_act") != "gelu":
            raise InputError("config.json.hidden_act", f"expected 'gelu', got {cfg.get('hidden_act')!r}")
        modules = _read_json(self.path / "modules.json")
        if tuple(m.get("type") for m in modules) != _MODULES:
            raise InputError("modules.json", f"expected the modules {list(_MODULES)}, got "
                             f"{[m.get('type') for m in modules]}")
        pooling = _read_json(self.path / modules[1]["path"] / "config.json")
        modes = [k for k, v in pooling.items() if k.startswith("pooling_mode") and v]
        if modes != ["pooling_mode_mean_tokens"]:
            raise InputError("1_Pooling/config.json", f"expected mean pooling alone, got {modes}")
        st = _read_json(self.path / "sentence_bert_config.json")
        self.hidden = int(cfg["hidden_size"])
        self.heads = int(cfg["num_attention_heads"])
        self.head_dim = self.hidden // self.heads
        self.scaling = self.head_dim**-0.5
        self.eps = float(cfg["layer_norm_eps"])
        self.layers = int(cfg["num_hidden_layers"])
        # sentence-transformers' max_seq_length, capped at the position table (as its Transformer module does)
        self.max_seq_length = min(int(st["max_seq_length"]), int(cfg["max_position_embeddings"]))
        self.dim = self.hidden

        tok = Tokenizer.from_file(str(self.path / "tokenizer.json"))
        # the file pins truncation and padding at 128; a call truncates at max_seq_length and pads to its longest
        tok.enable_truncation(self.max_seq_length, stride=0, strategy="longest_first", direction="right")
        pad_id = int(cfg.get("pad_token_id", 0))
        tok.enable_padding(direction="right", pad_id=pad_id, pad_type_id=0, pad_token=tok.id_to_token(pad_id))
        self.tokenizer = tok

        w = load_file(str(self.path / "model.safetensors"), device="cpu")
        self._torch = torch
        self.word = w["embeddings.word_embeddings.weight"]
        self.segment = w["embeddings.token_type_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.emb_ln = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.blocks = []
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            self.blocks.append({k: w[p + name] for k, name in (
                ("wq", "attention.self.query.weight"), ("bq", "attention.self.query.bias"),
                ("wk", "attention.self.key.weight"), ("bk", "attention.self.key.bias"),
                ("wv", "attention.self.value.weight"), ("bv", "attention.self.value.bias"),
                ("wo", "attention.output.dense.weight"), ("bo", "attention.output.dense.bias"),
                ("ln1w", "attention.output.LayerNorm.weight"), ("ln1b", "attention.output.LayerNorm.bias"),
                ("wi", "intermediate.dense.weight"), ("bi", "intermediate.dense.bias"),
                ("wf", "output.dense.weight"), ("bf", "output.dense.bias"),
                ("ln2w", "output.LayerNorm.weight"), ("ln2b", "output.LayerNorm.bias"))})

    def tokenize(self, texts: list[str]) -> dict:
        """{input_ids, token_type_ids, attention_mask}: int64 (n, longest) tensors of one batch."""
        torch = self._torch
        enc = self.tokenizer.encode_batch(texts, add_special_tokens=True)
        return {"input_ids": torch.tensor([e.ids for e in enc], dtype=torch.int64),
                "token_type_ids": torch.tensor([e.type_ids for e in enc], dtype=torch.int64),
                "attention_mask": torch.tensor([e.attention_mask for e in enc], dtype=torch.int64)}

    def forward(self, features: dict) -> dict:
        """One batch: adds `token_embeddings` (n, len, hidden) and `sentence_embedding` (n, hidden, unit rows)."""
        torch = self._torch
        F = torch.nn.functional
        ids, segments, mask = features["input_ids"], features["token_type_ids"], features["attention_mask"]
        n, length = ids.shape
        positions = torch.arange(length, dtype=torch.int64)[None, :]
        x = F.embedding(ids, self.word) + F.embedding(segments, self.segment)
        x = x + F.embedding(positions, self.position)
        x = F.layer_norm(x, (self.hidden,), *self.emb_ln, eps=self.eps)
        keep = mask.to(torch.bool)
        # no mask when nothing is padded (SDPA then takes its unmasked path); else True where a key is a real token
        attn_mask = None if bool(keep.all()) else (
            torch.ones(length, dtype=torch.bool)[None, None, :, None] & keep[:, None, None, :])
        shape = (n, length, self.heads, self.head_dim)
        for b in self.blocks:
            q = F.linear(x, b["wq"], b["bq"]).view(shape).transpose(1, 2)
            k = F.linear(x, b["wk"], b["bk"]).view(shape).transpose(1, 2)
            v = F.linear(x, b["wv"], b["bv"]).view(shape).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=0.0, scale=self.scaling,
                                               is_causal=False)
            a = a.transpose(1, 2).contiguous().reshape(n, length, self.hidden)
            x = F.layer_norm(F.linear(a, b["wo"], b["bo"]) + x, (self.hidden,), b["ln1w"], b["ln1b"], eps=self.eps)
            h = F.gelu(F.linear(x, b["wi"], b["bi"]))
            x = F.layer_norm(F.linear(h, b["wf"], b["bf"]) + x, (self.hidden,), b["ln2w"], b["ln2b"], eps=self.eps)
        weights = mask.unsqueeze(-1).to(x.dtype)
        summed = (x * weights).sum(dim=1, dtype=torch.float32)
        counts = torch.clamp(weights.sum(dim=1, dtype=torch.float32), min=1e-9)
        features["token_embeddings"] = x
        features["sentence_embedding"] = F.normalize(summed / counts, p=2, dim=-1)
        return features

    def encode(self, texts: Sequence[str], batch_size: int = 32, normalize_embeddings: bool = False,
               **_ignored) -> np.ndarray:
        """(n, dim) float32 unit rows of `texts`, batched as sentence-transformers' `encode` batches them (its
        other keyword arguments, e.g. convert_to_numpy and show_progress_bar, change nothing here)."""
        texts = check_texts(texts)
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise InputError("batch_size", f"must be an integer >= 1, got {batch_size!r}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        torch = self._torch
        order = np.argsort([-len(t) for t in texts])
        rows: list = []
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                batch = [texts[i] for i in order[start : start + batch_size]]
                out = self.forward(self.tokenize(batch))["sentence_embedding"]
                if normalize_embeddings:
                    out = torch.nn.functional.normalize(out, p=2, dim=1)
                rows.extend(out)
            rows = [rows[i] for i in np.argsort(order)]
            return torch.stack(rows).numpy()
