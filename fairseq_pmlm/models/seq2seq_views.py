"""fairseq encoder/decoder views of one UniLMv2 Transformer (docs/DESIGN.md §4, §5).

They let fairseq's own SequenceGenerator (``fairseq-generate``, ``fairseq-interactive``)
and encoder-decoder criteria drive the model. Layout, as in s2s-ft's pseudo-masking:
source ``[SOS] SRC [EOS]`` (context, segment 0), then target token j (ORIGINAL, step j) and
its ``[P]`` (PSEUDO, step j), both at position ``src_len + j - 1``, segment 1. The
attention permissions come from ``modules/attention_rule.py`` like everywhere else.

- encoder: the source alone, bidirectional; keeps every layer's keys/values.
- decoder, teacher forcing: ``prev_output_tokens`` = [EOS, y_1 .. y_{T-1}]; y_1..y_{T-1} go
  in as ORIGINAL tokens and T [P]s predict y_1..y_T. (y_T = EOS is never needed as input:
  no later step could see it.)
- decoder, incremental: step k feeds y_{k} (if k > 0) and a [P] at step k+1; the [P] is
  used for the prediction and written over by the next step. The cache (``modules/kv_cache.py``)
  holds the source's keys/values, copied once, then the target's, with room for the steps to
  come: a layer attends over one contiguous prefix with one fused-attention call.
"""
import functools

import torch
from fairseq.models import FairseqEncoder, FairseqIncrementalDecoder

from ..modules.attention_rule import CONTEXT, ORIGINAL, PAD, PSEUDO, TokenDescription
from ..modules.kv_cache import KVCache
from ..modules.transformer import BIAS_ALIGNMENT

TARGET_SEGMENT = 1
CACHE_ROOM = 64  # target slots a decoding cache starts with (it doubles when full)


class UniLMv2Encoder(FairseqEncoder):
    def __init__(self, dictionary, transformer):
        super().__init__(dictionary)
        object.__setattr__(self, "transformer", transformer)  # owned by the model, not registered twice
        self.pad = dictionary.pad()

    def forward(self, src_tokens, src_lengths=None, **kwargs):
        real = src_tokens.ne(self.pad)
        kinds = real.long() * CONTEXT
        positions = (real.long().cumsum(1) - 1).clamp(min=0)  # left or right padding
        zeros = torch.zeros_like(src_tokens)
        # the layers' keys and values are what the decoder reads; the source's final states nobody does:
        # the last layer computes its keys and values alone (its queries, attention and feed-forward over
        # the source were forward work only: nothing backpropagated through them)
        _, kvs = self.transformer(src_tokens, positions, zeros, kinds, zeros, return_kv=True,
                                  read=src_tokens.size(1))
        return {  # lists of tensors, as fairseq's generator passes them around
            # one row per source, never reordered: beam search's rows find theirs through "rows"
            "encoder_out": [],  # (the source's final states: not computed, see above)
            "kv": [_own(t) for kv in kvs for t in kv],  # flat [k0, v0, k1, v1, ...]
            "desc": list(TokenDescription(kinds, zeros, positions)),
            # one per row of the batch: its source row (none yet: row i is source i), its source length
            "rows": [],
            "src_len": [real.sum(1)],
        }

    def reorder_encoder_out(self, encoder_out, new_order):
        # beam search reorders every step: only the rows' pointers to their source move, so the
        # per-layer keys and values stay one copy per source, however many beams read them
        rows = encoder_out["rows"]
        return {**encoder_out, "rows": [rows[0].index_select(0, new_order) if rows else new_order],
                "src_len": [encoder_out["src_len"][0].index_select(0, new_order)]}

    def max_positions(self):
        return self.transformer.shape.max_positions


def _own(t):
    """``t`` in storage of its own where it is a view of a larger output: without autograd a layer's k
    and v are views of its joined q/k/v projection (``SelfAttention._project``), and kept for the
    whole generation they would keep the source's queries too (a third more of the source's store,
    for every layer)."""
    return t if t.untyped_storage().nbytes() == t.numel() * t.element_size() else t.contiguous()


class UniLMv2Decoder(FairseqIncrementalDecoder):
    def __init__(self, dictionary, transformer, pseudo_idx):
        super().__init__(dictionary)
        object.__setattr__(self, "transformer", transformer)
        self.pad = dictionary.pad()
        self.pseudo_idx = pseudo_idx

    def _positions(self, src_len, offsets, bound=None):
        """``src_len`` + ``offsets``, checked against the model's limit. ``bound``: a host-side
        upper bound of them; below the limit it spares the check's device sync (decoding steps)."""
        pos = src_len.unsqueeze(1) + offsets
        limit = self.transformer.shape.max_positions
        if (bound is None or bound >= limit) and bool((pos >= limit).any()):
            raise ValueError(
                f"source + target need position {int(pos.max())} but the model has {limit} "
                "(lower --max-len-b / --max-target-positions or --max-source-positions)"
            )
        return pos

    def forward(self, prev_output_tokens, encoder_out, incremental_state=None, features_only=False,
                pseudo_tokens=None, **kwargs):
        """``pseudo_tokens`` (teacher forcing; the task's --pseudo-draw): what each [P] is fed, PAD
        where the pseudo token itself; None: the pseudo token everywhere."""
        if incremental_state is not None:
            x = self._step(prev_output_tokens, encoder_out, incremental_state)
        else:
            x = self._teacher_forced(prev_output_tokens, encoder_out, pseudo_tokens)
        if features_only:
            return x, {"attn": [None]}
        return self.transformer.lm_head(x), {"attn": [None]}

    def _teacher_forced(self, prev, encoder_out, pseudo_tokens=None):
        B, T = prev.shape
        src_len = encoder_out["src_len"][0]
        tgt = prev[:, 1:]
        tgt_kinds = torch.where(tgt.ne(self.pad), ORIGINAL, PAD)
        p_kinds = torch.where(prev.ne(self.pad), PSEUDO, PAD)  # a [P] per target to predict
        steps = torch.arange(1, T + 1, device=prev.device).expand(B, T)
        positions = self._positions(src_len, torch.arange(T, device=prev.device))
        fed = (torch.full_like(prev, self.pseudo_idx) if pseudo_tokens is None
               else pseudo_tokens.masked_fill(pseudo_tokens.eq(self.pad), self.pseudo_idx))
        tokens = torch.cat([tgt, fed], 1)
        kinds = torch.cat([tgt_kinds, p_kinds], 1)
        # the [P]s' final states alone: the target tokens' last layer computes their keys and values only
        return self.transformer(
            tokens, torch.cat([positions[:, :-1], positions], 1), torch.full_like(tokens, TARGET_SEGMENT),
            kinds, torch.cat([steps[:, :-1], steps], 1), past=self._source_cache(encoder_out), read=T - 1,
        )

    @staticmethod
    def _source_cache(encoder_out, room=0):
        kv, rows = encoder_out["kv"], encoder_out["rows"]
        kvs = [(kv[i], kv[i + 1]) for i in range(0, len(kv), 2)]
        rows = rows[0] if rows else (torch.arange(kv[0].size(0), device=kv[0].device) if room else None)
        return KVCache.of_source(kvs, TokenDescription(*encoder_out["desc"]), rows, room)

    def _step(self, prev, encoder_out, incremental_state):
        B, T = prev.shape
        k = T - 1  # predicting target k+1 (1-based): its [P] has step k+1
        cache = self.get_incremental_state(incremental_state, "cache")
        biases = self.get_incremental_state(incremental_state, "biases")
        if cache is None:  # no target token yet: the source's keys, with room for the target's
            cache = self._source_cache(encoder_out, room=CACHE_ROOM)
            biases = StepBiases(self.transformer, TokenDescription(*encoder_out["desc"]))
            self.set_incremental_state(incremental_state, "biases", biases)
        src_len = encoder_out["src_len"][0]
        p_tok = torch.full_like(prev[:, -1:], self.pseudo_idx)
        # y_k (ORIGINAL, step k) if k > 0, then the [P] of step k+1; a token of step j sits at
        # position src_len + j - 1. Made on the device (no host-to-device copy a step)
        tokens = p_tok if k == 0 else torch.cat([prev[:, -1:], p_tok], 1)
        n = tokens.size(1)
        steps = torch.arange(k + 2 - n, k + 2, device=prev.device).expand(B, n)
        kinds = torch.full_like(tokens, PSEUDO)
        if k > 0:
            kinds[:, 0] = ORIGINAL
        cache.reserve(n)
        # every source is at most the padded source length long: positions <= source_len + k
        positions = self._positions(src_len, steps - 1, bound=cache.source_len + k)
        bias = functools.partial(biases.step, k, cache.rows, cache.length + n, cache.slots)
        h = self.transformer(tokens, positions, torch.full_like(tokens, TARGET_SEGMENT), kinds, steps, past=cache,
                             bias=bias)
        cache.commit(n - 1)  # the committed target token stays; the [P]'s slot is written over
        self.set_incremental_state(incremental_state, "cache", cache)
        return h[:, -1:]

    def reorder_incremental_state(self, incremental_state, new_order):
        cache = self.get_incremental_state(incremental_state, "cache")
        if cache is not None:
            cache.reorder(new_order)

    def max_positions(self):
        return self.transformer.shape.max_positions


class StepBiases:
    """The attention bias of every decoding step of one generation, built at its first step (and
    again when the cache's room grows) by the model's ``attention_bias`` from the description of
    all the steps' tokens: a step reads its two rows (one small copy) instead of building them
    (some 45 small ops a step, and decoding is bound by the host's calls on a GPU).

    Step k (k > 0) feeds y_k (ORIGINAL, step k, position src_len + k - 1) and the [P] of step k+1
    (PSEUDO, position src_len + k); its keys are the cache's slots up to S + k: the source's S, then
    y_1 .. y_k, then its [P]. All steps' queries in one description, interleaved: row 2m is the [P]
    of step m+1 and row 2m+1 is y_{m+1}, both at position src_len + m, so step k reads rows 2k-1
    and 2k (step 0, its [P] alone: row 0). All steps' keys in one description: the source, then
    slot S + t as every step after t+1 sees it, y_{t+1}. The one slot a step sees otherwise is its
    [P]'s (S + k, written over by y_{k+1} in the next step), read by no other step's rows: those
    two cells of each row pair come from the rule for the [P] instead. Worked example, S = 2, room
    for 3 target slots; what each row's step holds in the slots it attends over:

        slot                 s0 s1 | S+0   S+1   S+2
        row 0 [P] of step 1   x  x | [P]
        row 1 y_1             x  x | y_1   [P]       <- step 1 reads rows 1, 2 over 4 slots
        row 2 [P] of step 2   x  x | y_1   [P]
        row 3 y_2             x  x | y_1   y_2   [P] <- step 2: rows 3, 4 over 5 slots
        row 4 [P] of step 3   x  x | y_1   y_2   [P]

    The values are those of the step's own descriptions, bit for bit (tested): the same rule, the
    same table entries."""

    def __init__(self, transformer, source: TokenDescription):
        self.transformer, self.source = transformer, source  # the source's description, one row per source
        self.bias, self.key = None, None  # [sources, H or 1, 2 * room - 1, slots padded]; (room, dtype)

    def step(self, k, rows, end, slots, dtype):
        """Step ``k``'s bias [N, H or 1, 1 or 2, ``end``] for the batch's ``rows`` (their source rows)
        in a cache of ``slots`` slots (an 8-aligned row stride, as ``attention_bias``'s)."""
        room = slots - self.source.kinds.size(1)
        if self.key != (room, dtype):
            self.bias, self.key = self._build(room, dtype), (room, dtype)
        first, n = (0, 1) if k == 0 else (2 * k - 1, 2)
        return self.bias.narrow(2, first, n).index_select(0, rows).narrow(3, 0, end)

    def _build(self, room, dtype):
        src = self.source
        N, S = src.kinds.shape
        device = src.kinds.device
        m = torch.arange(room, device=device)
        # position src_len + m; past the model's limit clamped (a step there stops before it reads them)
        at = (src.kinds.ne(PAD).sum(1, keepdim=True) + m).clamp(max=self.transformer.shape.max_positions - 1)
        r = torch.arange(2 * room - 1, device=device)
        queries = TokenDescription(torch.where(r % 2 == 0, PSEUDO, ORIGINAL).expand(N, -1),
                                   (r // 2 + 1).expand(N, -1), at[:, r // 2])
        targets = TokenDescription(torch.full_like(at, ORIGINAL), (m + 1).expand(N, -1), at)
        keys = TokenDescription(*(torch.cat([a, b], 1) for a, b in zip(src, targets, strict=True)))
        bias = self.transformer.attention_bias(queries, keys.padded(BIAS_ALIGNMENT), dtype)
        pseudo = targets._replace(kinds=torch.full_like(at, PSEUDO))  # each step's [P], where its y goes later
        own = (r + 1) // 2  # the step whose [P] row r's step feeds
        bias[:, :, r, S + own] = self.transformer.attention_bias(queries, pseudo, dtype)[:, :, r, own]
        return bias
