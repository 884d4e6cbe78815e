"""Append-only containers that let a tenant's snapshot grow by one ingest at a cost in the ingest's size, not the
tenant's (snapshot.TenantIndex.extended).

A snapshot is immutable: a search may hold it while the writer installs its successor. Copying every list, dict
and matrix into the successor made each ingest O(tenant size). These containers share what the two snapshots
have in common instead, and each snapshot sees only its own prefix:

- GrowBuf: a numpy array with spare capacity (doubling). The snapshot holds the view `buf[:n]`; the successor
  writes its rows past n, where no older view looks. Appending from an older length than the buffer's (a fork)
  copies instead, so two successors of one snapshot never write into the same rows.
- CowList: a list in chunks of CHUNK items. A successor copies the outer list of chunks (n / CHUNK pointers) and
  only the chunks it changes (the last one when appending, the one holding a replaced item).
- PrefixMap: key -> position in an append-only sequence, as one insert-only dict shared along a chain of
  snapshots; a snapshot of n items ignores positions >= n. Replacing a key's position would change what an
  older snapshot sees, so that (never needed by the writer) copies the dict first.
- Postings: BM25 postings (token -> fact positions ascending, term frequencies) with one pair of GrowBufs per
  token; a snapshot of n facts sees each token's entries at positions < n (a binary search per lookup). The
  position buffers' spare capacity holds a sentinel above every position, so the search is right on whichever
  generation of a buffer a reader holds.

The writer extends only the newest snapshot (TenantStore.install); every container still handles an extension
from an older one, by copying.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

CHUNK_BITS = 10
CHUNK = 1 << CHUNK_BITS
_CHUNK_MASK = CHUNK - 1
_NO_POS = np.iinfo(np.int64).max  # spare slots of a posting's position buffer: above every position


def _capacity(need: int) -> int:
    """Room for `need` rows and half as many again: appends cost O(1) amortised, and the slack of a large array
    stays untouched (not resident) memory."""
    return max(4, need + need // 2)


class GrowBuf:
    """An append-only array: `buf` has room past the `n` rows written."""

    __slots__ = ("buf", "n", "fill")

    def __init__(self, a: np.ndarray, fill: Any = None):
        self.buf = a
        self.n = int(a.shape[0])
        self.fill = fill

    def view(self) -> np.ndarray:
        return self.buf[:self.n]

    def _alloc(self, cap: int, tail: tuple[int, ...], dtype) -> np.ndarray:
        if self.fill is None:
            return np.empty((cap, *tail), dtype)
        return np.full((cap, *tail), self.fill, dtype)

    def append(self, have: int, rows: Any) -> GrowBuf:
        """The buffer holding this buffer's first `have` rows followed by `rows`: this one, grown in place, when
        `have` is its length; else (a view older than the newest was extended) a new one."""
        rows = np.asarray(rows, dtype=self.buf.dtype)
        tail = self.buf.shape[1:]
        if have != self.n or rows.shape[1:] != tail:
            base = self.buf[:have]
            if rows.shape[1:] != tail:  # an empty matrix whose width was not known yet: (0, 0)
                if have:
                    raise ValueError(f"rows of shape {rows.shape[1:]} appended to rows of shape {tail}")
                base = base.reshape((0, *rows.shape[1:]))
            out = GrowBuf(self._alloc(_capacity(have + rows.shape[0]), rows.shape[1:], self.buf.dtype), self.fill)
            out.buf[:have] = base
            out.buf[have:have + rows.shape[0]] = rows
            out.n = have + rows.shape[0]
            return out
        need = self.n + rows.shape[0]
        if need > self.buf.shape[0]:
            nb = self._alloc(_capacity(need), tail, self.buf.dtype)
            nb[:self.n] = self.buf[:self.n]
            nb[self.n:need] = rows  # filled before it is published: a reader sees a buffer whose rows are all set
            self.buf = nb
        else:
            self.buf[self.n:need] = rows
        self.n = need
        return self


class CowList(Sequence):
    """An immutable sequence sharing its chunks with the one it was derived from (`evolved`)."""

    __slots__ = ("_chunks", "_n")

    def __init__(self, items: Iterable[Any] = ()):
        items = list(items)
        self._chunks = [items[i:i + CHUNK] for i in range(0, len(items), CHUNK)]
        self._n = len(items)

    @classmethod
    def of(cls, items: Sequence[Any]) -> CowList:
        return items if isinstance(items, CowList) else cls(items)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return list(self)[i]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("CowList index out of range")
        return self._chunks[i >> CHUNK_BITS][i & _CHUNK_MASK]

    def __iter__(self) -> Iterator[Any]:
        return itertools.chain.from_iterable(self._chunks)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (CowList, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"CowList({list(self)!r})"

    def evolved(self, updates: Mapping[int, Any], appended: Iterable[Any]) -> CowList:
        """A new list: this one with item i replaced by updates[i], then `appended` added."""
        chunks = list(self._chunks)
        own: set[int] = set()
        for i, v in updates.items():
            if not 0 <= i < self._n:
                raise IndexError(f"CowList update at {i} of {self._n}")
            c = i >> CHUNK_BITS
            if c not in own:
                chunks[c] = list(chunks[c])
                own.add(c)
            chunks[c][i & _CHUNK_MASK] = v
        n = self._n
        for v in appended:
            c = n >> CHUNK_BITS
            if c == len(chunks):
                chunks.append([])
                own.add(c)
            elif c not in own:
                chunks[c] = list(chunks[c])
                own.add(c)
            chunks[c].append(v)
            n += 1
        out = CowList.__new__(CowList)
        out._chunks, out._n = chunks, n
        return out


class _SharedDict:
    __slots__ = ("d", "n")

    def __init__(self, d: dict, n: int):
        self.d, self.n = d, n  # n: the length of the sequence the newest view indexes


class PrefixMap(Mapping):
    """key -> position < n, over a dict shared (insert-only) by a chain of snapshots."""

    __slots__ = ("_s", "_n")

    def __init__(self, shared: _SharedDict, n: int):
        self._s, self._n = shared, n

    @classmethod
    def of(cls, m: Mapping[Any, int], n: int) -> PrefixMap:
        """A plain dict (a snapshot built from SQLite) is copied once: its own snapshot must not see later keys."""
        if isinstance(m, PrefixMap):
            return m
        return cls(_SharedDict(dict(m), n), n)

    def get(self, key: Any, default: Any = None) -> Any:
        v = self._s.d.get(key)
        return v if v is not None and v < self._n else default

    def __getitem__(self, key: Any) -> int:
        v = self.get(key)
        if v is None:
            raise KeyError(key)
        return v

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None

    def __iter__(self) -> Iterator[Any]:
        n = self._n
        return iter([k for k, v in list(self._s.d.items()) if v < n])

    def __len__(self) -> int:
        return len(list(iter(self)))

    def evolved(self, items: Iterable[tuple[Any, int]], n: int, first_wins: bool = False) -> PrefixMap:
        """The view for a sequence grown to n: `items` (key, position) added; with `first_wins` a key already
        present keeps its position (dict.setdefault), else it is replaced."""
        s = self._s
        if s.n != self._n:  # extending an older view: copy its part
            s = _SharedDict({k: v for k, v in list(s.d.items()) if v < self._n}, self._n)
        copied = s is not self._s
        for k, pos in items:
            old = s.d.get(k)
            if old is not None:
                if first_wins:
                    continue
                if not copied:  # older views must keep seeing the old position
                    s = _SharedDict(dict(s.d), s.n)
                    copied = True
            s.d[k] = pos
        s.n = n
        return PrefixMap(s, n)


class _Posting:
    __slots__ = ("pos", "tf")

    def __init__(self, pos: GrowBuf, tf: GrowBuf):
        self.pos, self.tf = pos, tf


class Postings(Mapping):
    """token -> (positions, term frequencies) of the facts < n, over per-token growth buffers shared by a chain
    of snapshots."""

    __slots__ = ("_s", "_n")

    def __init__(self, shared: _SharedDict, n: int):
        self._s, self._n = shared, n

    @classmethod
    def of(cls, postings: Mapping[str, tuple[np.ndarray, np.ndarray]], n: int) -> Postings:
        if isinstance(postings, Postings):
            return postings
        d = {t: _Posting(GrowBuf(np.asarray(i, np.int64), _NO_POS), GrowBuf(np.asarray(tf, np.float64)))
             for t, (i, tf) in postings.items()}
        return cls(_SharedDict(d, n), n)

    def get(self, token: str, default: Any = None) -> Any:
        p = self._s.d.get(token)
        if p is None:
            return default
        pos = p.pos.buf  # a reader holding an older generation of the buffer reads the same prefix
        k = int(np.searchsorted(pos, self._n))
        if k == 0:
            return default
        return pos[:k], p.tf.buf[:k]

    def __getitem__(self, token: str) -> tuple[np.ndarray, np.ndarray]:
        v = self.get(token)
        if v is None:
            raise KeyError(token)
        return v

    def __contains__(self, token: object) -> bool:
        return self.get(token) is not None

    def __iter__(self) -> Iterator[str]:
        return iter([t for t in list(self._s.d) if self.get(t) is not None])

    def __len__(self) -> int:
        return len(list(iter(self)))

    def evolved(self, add: Mapping[str, Mapping[int, int]], n: int) -> Postings:
        """The view for n facts: add[token] = {position >= this view's n: term frequency}, positions ascending."""
        s = self._s
        if s.n != self._n:  # extending an older view: copy its part
            d = {}
            for t in list(s.d):
                v = self.get(t)
                if v is not None:
                    d[t] = _Posting(GrowBuf(np.array(v[0]), _NO_POS), GrowBuf(np.array(v[1])))
            s = _SharedDict(d, self._n)
        for t, entries in add.items():
            p = s.d.get(t)
            if p is not None and len(entries) == 1 and p.pos.n < p.pos.buf.shape[0] \
                    and p.tf.n < p.tf.buf.shape[0]:
                # the common case (a token of one new fact, room left): two element writes, not two appends;
                # tf first, so a reader finds a position only once its frequency is in place
                ((fact, count),) = entries.items()
                k = p.pos.n
                p.tf.buf[k] = count
                p.pos.buf[k] = fact
                p.tf.n = p.pos.n = k + 1
                continue
            idx = np.fromiter(entries.keys(), np.int64, len(entries))
            tf = np.fromiter(entries.values(), np.float64, len(entries))
            if p is None:
                s.d[t] = _Posting(GrowBuf(np.zeros(0, np.int64), _NO_POS).append(0, idx),
                                  GrowBuf(np.zeros(0, np.float64)).append(0, tf))
            else:
                p.tf = p.tf.append(p.tf.n, tf)
                p.pos = p.pos.append(p.pos.n, idx)
        s.n = n
        return Postings(s, n)
