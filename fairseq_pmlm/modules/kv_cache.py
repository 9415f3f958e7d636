"""The keys and values that the tokens of a forward attend to before their own (docs/DESIGN.md §5):
the source's, and in decoding steps the target's so far, per layer, with the tokens' descriptions.

Decoding steps write their new keys into room left at the end, so every layer attends over one
contiguous prefix with one fused-attention call and a step allocates nothing. Worked example,
a source of S = 4 tokens, step k = 2 (it feeds y_2 and the [P] that predicts y_3):

    slot   0 1 2 3 | 4    5    6    7 ...
           source  | y_1  y_2  [P]  (room)

Before the step ``length`` = 5 (source + y_1). The step writes y_2 and [P] into slots 5 and 6,
every layer attends over slots 0-6, and the decoder commits one token (y_2): the next step
writes y_3 over the [P] of slot 6.

Without room (``room=0``: the teacher-forced pass over a whole target) the new keys are
concatenated after the source's instead.
"""
import torch

from .attention_rule import TokenDescription


class KVCache:
    def __init__(self, keys, values, desc: TokenDescription, rows=None):
        # per layer [N, H, S, D] and [N, S] x 3 for the N rows of the batch: the source's, read in
        # place, with no room yet
        self.keys, self.values, self.desc = list(keys), list(values), desc
        self.length = self.source_len = desc.kinds.size(1)  # slots in use: source + committed tokens
        # the source row of each row: a reorder among one source's beams leaves the source slots alone
        self.rows = rows
        # once ``reserve`` made room: every layer's keys and values in one buffer [layers, 2, N, H,
        # slots, D] and the description in one [3, N, slots], so a reorder is one copy of each
        self.kv = self.desc_buffer = None

    @classmethod
    def of_source(cls, kvs, desc: TokenDescription, rows=None, room=0):
        """The cache after the source: ``kvs`` = per layer (k, v) [B, H, S, D] and ``desc`` [B, S],
        one row per source; ``rows`` [N]: the source row of each row of the batch (None: the same
        rows; needed with ``room``); ``room``: slots after the source, for decoding steps."""
        keys, values = [k for k, _ in kvs], [v for _, v in kvs]
        if room:
            cache = cls(keys, values, desc, rows)
            cache._allocate(cache.source_len + room, rows)
            return cache
        if rows is not None:
            keys, values = [k.index_select(0, rows) for k in keys], [v.index_select(0, rows) for v in values]
            desc = TokenDescription(*(t.index_select(0, rows) for t in desc))
        return cls(keys, values, desc, rows)

    @property
    def slots(self):
        """Slots in the buffers: source, committed tokens and room."""
        return self.desc.kinds.size(1)

    def reserve(self, n):
        """Room for ``n`` more slots after ``length``, doubling the room when it is full."""
        if self.length + n > self.slots:
            room = self.slots - self.source_len
            self._allocate(self.source_len + max(2 * room, self.length + n - self.source_len))

    def _allocate(self, slots, rows=None):
        """New buffers of ``slots`` slots holding the used ones (taking ``rows`` of them, if given)."""
        (_, H, _, D), used = self.keys[0].shape, self.length
        N = self.keys[0].size(0) if rows is None else rows.numel()
        kv = self.keys[0].new_empty(len(self.keys), 2, N, H, slots, D)
        desc = self.desc.kinds.new_zeros(3, N, slots)

        def copy_used(buffer, t, dim):
            t = t.narrow(dim, 0, used)
            buffer.narrow(dim, 0, used).copy_(t if rows is None else t.index_select(0, rows))

        for i, (k, v) in enumerate(zip(self.keys, self.values, strict=True)):
            copy_used(kv[i, 0], k, 2)
            copy_used(kv[i, 1], v, 2)
        for j, t in enumerate(self.desc):
            copy_used(desc[j], t, 1)
        self.kv, self.desc_buffer = kv, desc
        self._views()

    def _views(self):
        self.keys, self.values = list(self.kv[:, 0].unbind(0)), list(self.kv[:, 1].unbind(0))
        self.desc = TokenDescription(*self.desc_buffer.unbind(0))

    def _append(self, buffer, new, dim):
        """``buffer``'s used slots followed by ``new``: written in place where there is room."""
        end = self.length + new.size(dim)
        if buffer.size(dim) >= end:  # only buffers made by ``_allocate`` have room: never the encoder's
            buffer.narrow(dim, self.length, new.size(dim)).copy_(new)
            return buffer.narrow(dim, 0, end)
        return torch.cat([buffer.narrow(dim, 0, self.length), new], dim)

    def describe(self, new: TokenDescription):
        """The description of every key a forward with tokens ``new`` sees: the cached ones and its own."""
        return TokenDescription(*(self._append(b, t, 1) for b, t in zip(self.desc, new, strict=True)))

    def extend(self, layer, k, v):
        """Layer ``layer``'s keys and values of the cached tokens followed by ``k``, ``v``."""
        return self._append(self.keys[layer], k, 2), self._append(self.values[layer], v, 2)

    def commit(self, n):
        """Keep the first ``n`` tokens of the last forward; slots after them are written over later."""
        self.length += n

    def reorder(self, order):
        """Follow the beams: row i becomes row ``order[i]``. Among one source's beams only the
        committed tokens' slots move (the source's are equal copies); otherwise every slot."""
        assert self.kv is not None and self.rows is not None, "only a decoding cache (with room) follows beams"
        rows = self.rows.index_select(0, order)
        if order.numel() == rows.numel() and torch.equal(rows, self.rows):
            S, n = self.source_len, self.length - self.source_len
            self.kv.narrow(4, S, n).copy_(self.kv.narrow(4, S, n).index_select(2, order))
            self.desc_buffer.narrow(2, S, n).copy_(self.desc_buffer.narrow(2, S, n).index_select(1, order))
            return
        self.rows = rows
        self.kv, self.desc_buffer = self.kv.index_select(2, order), self.desc_buffer.index_select(1, order)
        self._views()
