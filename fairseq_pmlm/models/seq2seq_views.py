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
import torch
from fairseq.models import FairseqEncoder, FairseqIncrementalDecoder

from ..modules.attention_rule import CONTEXT, ORIGINAL, PAD, PSEUDO, TokenDescription
from ..modules.kv_cache import KVCache

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
        h, kvs = self.transformer(src_tokens, positions, zeros, kinds, zeros, return_kv=True)
        return {  # lists of tensors, as fairseq's generator passes them around
            # one row per source, never reordered: beam search's rows find theirs through "rows"
            "encoder_out": [h],
            "kv": [t for kv in kvs for t in kv],  # flat [k0, v0, k1, v1, ...]
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

    def forward(self, prev_output_tokens, encoder_out, incremental_state=None, features_only=False, **kwargs):
        if incremental_state is not None:
            x = self._step(prev_output_tokens, encoder_out, incremental_state)
        else:
            x = self._teacher_forced(prev_output_tokens, encoder_out)
        if features_only:
            return x, {"attn": [None]}
        return self.transformer.lm_head(x), {"attn": [None]}

    def _teacher_forced(self, prev, encoder_out):
        B, T = prev.shape
        src_len = encoder_out["src_len"][0]
        tgt = prev[:, 1:]
        tgt_kinds = torch.where(tgt.ne(self.pad), ORIGINAL, PAD)
        p_kinds = torch.where(prev.ne(self.pad), PSEUDO, PAD)  # a [P] per target to predict
        steps = torch.arange(1, T + 1, device=prev.device).expand(B, T)
        positions = self._positions(src_len, torch.arange(T, device=prev.device))
        tokens = torch.cat([tgt, torch.full_like(prev, self.pseudo_idx)], 1)
        kinds = torch.cat([tgt_kinds, p_kinds], 1)
        h = self.transformer(
            tokens, torch.cat([positions[:, :-1], positions], 1), torch.full_like(tokens, TARGET_SEGMENT),
            kinds, torch.cat([steps[:, :-1], steps], 1), past=self._source_cache(encoder_out),
        )
        return h[:, T - 1 :]

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
        if cache is None:  # no target token yet: the source's keys, with room for the target's
            cache = self._source_cache(encoder_out, room=CACHE_ROOM)
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
        h = self.transformer(tokens, positions, torch.full_like(tokens, TARGET_SEGMENT), kinds, steps, past=cache)
        cache.commit(n - 1)  # the committed target token stays; the [P]'s slot is written over
        self.set_incremental_state(incremental_state, "cache", cache)
        return h[:, -1:]

    def reorder_incremental_state(self, incremental_state, new_order):
        cache = self.get_incremental_state(incremental_state, "cache")
        if cache is not None:
            cache.reorder(new_order)

    def max_positions(self):
        return self.transformer.shape.max_positions
