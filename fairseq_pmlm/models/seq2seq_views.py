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
  used for the prediction and dropped from the cache. The cache holds the target tokens'
  keys/values only; the source's stay in ``encoder_out`` and are read in place, so a step
  copies nothing of the (long) source.
"""
import torch
from fairseq.models import FairseqEncoder, FairseqIncrementalDecoder

from ..modules.attention_rule import CONTEXT, ORIGINAL, PAD, PSEUDO, TokenDescription

TARGET_SEGMENT = 1


def _select(x, order):
    return x.index_select(0, order)


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
        return {  # lists of [B, ...] tensors, as fairseq's generator reorders them
            "encoder_out": [h],
            "kv": [t for kv in kvs for t in kv],  # flat [k0, v0, k1, v1, ...]
            "desc": list(TokenDescription(kinds, zeros, positions)),
            "src_len": [real.sum(1)],
            "rows": [torch.arange(src_tokens.size(0), device=src_tokens.device)],  # source row of each row
        }

    def reorder_encoder_out(self, encoder_out, new_order):
        # beam search reorders every step, mostly among the beams of one sentence, whose rows
        # are copies of the same source: then nothing changes and nothing is copied
        rows = encoder_out["rows"][0]
        if new_order.numel() == rows.numel() and torch.equal(_select(rows, new_order), rows):
            return encoder_out
        return {key: [_select(t, new_order) for t in value] for key, value in encoder_out.items()}

    def max_positions(self):
        return self.transformer.shape.max_positions


class UniLMv2Decoder(FairseqIncrementalDecoder):
    def __init__(self, dictionary, transformer, pseudo_idx):
        super().__init__(dictionary)
        object.__setattr__(self, "transformer", transformer)
        self.pad = dictionary.pad()
        self.pseudo_idx = pseudo_idx

    def _positions(self, src_len, offsets):
        pos = src_len.unsqueeze(1) + offsets
        limit = self.transformer.shape.max_positions
        if bool((pos >= limit).any()):
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
            kinds, torch.cat([steps[:, :-1], steps], 1), past=self._source_past(encoder_out),
        )
        return h[:, T - 1 :]

    @staticmethod
    def _source_kv(encoder_out):
        kv = encoder_out["kv"]
        return [(kv[i], kv[i + 1]) for i in range(0, len(kv), 2)]

    def _source_past(self, encoder_out):
        return [[kv] for kv in self._source_kv(encoder_out)], TokenDescription(*encoder_out["desc"])

    def _step(self, prev, encoder_out, incremental_state):
        B, T = prev.shape
        k = T - 1  # predicting target k+1 (1-based): its [P] has step k+1
        src_kv = self._source_kv(encoder_out)
        src_desc = TokenDescription(*encoder_out["desc"])
        cache = self.get_incremental_state(incremental_state, "cache")
        if cache is None:  # no target token yet
            empty = src_kv[0][0][:, :, :0]
            tgt_kv = [(empty, empty)] * len(src_kv)
            tgt_desc = src_desc.columns(0, 0)
        else:
            tgt_kv = [(cache[f"k{i}"], cache[f"v{i}"]) for i in range(len(src_kv))]
            tgt_desc = TokenDescription(*(cache[name] for name in TokenDescription._fields))
        src_len = encoder_out["src_len"][0]
        p_tok = torch.full_like(prev[:, -1:], self.pseudo_idx)
        if k == 0:
            tokens, kinds, steps, offsets = p_tok, [PSEUDO], [1], [0]
        else:
            tokens = torch.cat([prev[:, -1:], p_tok], 1)
            kinds, steps, offsets = [ORIGINAL, PSEUDO], [k, k + 1], [k - 1, k]

        def per_row(values):
            return torch.tensor(values, device=prev.device).expand(B, len(values))

        new_desc = TokenDescription(per_row(kinds), per_row(steps), self._positions(src_len, per_row(offsets)))
        past_desc = TokenDescription(*(torch.cat([s, t], 1) for s, t in zip(src_desc, tgt_desc, strict=True)))
        h, kvs = self.transformer(
            tokens, new_desc.positions, torch.full_like(tokens, TARGET_SEGMENT), new_desc.kinds, new_desc.steps,
            past=([[s, t] for s, t in zip(src_kv, tgt_kv, strict=True)], past_desc), return_kv=True,
        )
        # keep the committed target token's keys/values and description, drop the [P]'s
        new = {}
        for i, ((old_k, old_v), (cur_k, cur_v)) in enumerate(zip(tgt_kv, kvs, strict=True)):
            new[f"k{i}"] = torch.cat([old_k, cur_k[:, :, :-1]], 2)
            new[f"v{i}"] = torch.cat([old_v, cur_v[:, :, :-1]], 2)
        for name, old, cur in zip(TokenDescription._fields, tgt_desc, new_desc, strict=True):
            new[name] = torch.cat([old, cur[:, :-1]], 1)
        self.set_incremental_state(incremental_state, "cache", new)
        return h[:, -1:]

    def reorder_incremental_state(self, incremental_state, new_order):
        cache = self.get_incremental_state(incremental_state, "cache")
        if cache is not None:
            cache = {key: _select(t, new_order) for key, t in cache.items()}
            self.set_incremental_state(incremental_state, "cache", cache)

    def max_positions(self):
        return self.transformer.shape.max_positions
