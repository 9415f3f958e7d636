"""The UniLMv2 Transformer, readable top to bottom (docs/DESIGN.md §2).

BERT-style post-LayerNorm encoder whose self-attention is steered by the PMLM rule
(``attention_rule.py``) plus a T5 relative-position bias shared by all layers. The bias
and the permission mask are combined once per forward into one additive tensor that
every layer reuses (SDPA path), or into one block mask and a per-distance bias table
(flex path, ``flex_attention.py``, on CUDA); the shared context block can instead read the
per-distance table in a Triton kernel (``toeplitz_attention.py``).
"""
import functools
import math
from typing import NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..arch import TransformerShape
from . import compiled_layers, flex_attention, toeplitz_attention
from .attention_rule import CONTEXT, TokenDescription, attention_allowed
from .relative_position import relative_position_bucket

# bound of the relative-position bias: half of fp16's largest finite value (65504)
BIAS_LIMIT = torch.finfo(torch.float16).max / 2
BIAS_ALIGNMENT = 8  # elements: SDPA copies a bias whose row stride is not a multiple of it (preprocess_mask)


class PlanBlock(NamedTuple):
    """Query rows [query_start, query_end) attend to the key prefix [0, key_end) with ``bias``:
    an additive float bias [B|1, H|1, Tq, Tk] (-inf = forbidden), a bool mask (True = allowed),
    None (every key allowed, no bias: the fused attention's fastest kernel) or a ``ToeplitzBias``
    (the shared context block for the Triton kernel, materialised where that cannot run)."""

    query_start: int
    query_end: int
    key_end: int
    bias: torch.Tensor


class SelfAttention(nn.Module):
    def __init__(self, s: TransformerShape, impl):
        super().__init__()
        dim, heads = s.encoder_embed_dim, s.encoder_attention_heads
        assert dim % heads == 0, "encoder_embed_dim must be a multiple of encoder_attention_heads"
        self.heads, self.head_dim = heads, dim // heads
        # separate q/k/v projections keep Hugging Face BERT weights importable as they are
        self.query = nn.Linear(dim, dim)
        self.key = nn.Linear(dim, dim)
        self.value = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)
        self.dropout = s.attention_dropout
        self.impl = impl
        self._joined = None  # (weight [3C, C], bias [3C]) of query, key and value: ``_project``

    def _project(self, x, incremental):
        """q, k, v of ``x``, [B, H, T, D] each. Without autograd (decoding, validation, scoring) one
        matmul against the three projections joined, split into heads by one view and one permute:
        5 calls fewer a layer, and decoding, which runs the layers once a token, is bound on a GPU
        by the host's calls. The same values as three matmuls (each output is the same dot
        product: bit for bit on this project's CPUs). The joined weight is made at each
        forward without cached keys (a generation's source, a validation batch) and reused by the
        ``incremental`` steps after it (one generation: no weight changes in between). With
        autograd three matmuls: joining would copy the weights each forward, and x's gradient would
        be summed in another order."""
        if torch.is_grad_enabled():
            if self._joined is not None:
                self._joined = None  # not kept through training
            return self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        if not incremental or self._joined is None:
            dtype = (torch.get_autocast_dtype(x.device.type) if torch.is_autocast_enabled(x.device.type)
                     else self.query.weight.dtype)  # autocast's, as F.linear would cast them
            parts = self.query, self.key, self.value
            self._joined = tuple(torch.cat([getattr(m, n) for m in parts]).to(dtype) for n in ("weight", "bias"))
        B, T, _ = x.shape
        # [B, T, 3 * H * D] -> [B, T, 3, H, D] -> [3, B, H, T, D]
        return F.linear(x, *self._joined).view(B, T, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)

    def _split(self, x):
        B, T, _ = x.shape
        return x.view(B, T, self.heads, self.head_dim).transpose(1, 2)  # B H T D

    def forward(self, x, plan, past=None, read=None):
        """``plan``: list of ``PlanBlock`` (see ``UniLMv2Transformer.attention_plan``) or a
        ``FlexPlan`` (one flex attention call; its SDPA plan if flex fails).
        ``past``: a function that puts the cached keys and values before this call's
        (``KVCache.extend`` of this layer; incremental decoding). ``read``: the output of those
        query columns only (``take_columns``), whose attention ``plan`` is (None: no output, None
        returned), keys and values of all. Returns the output and this call's own (k, v)."""
        if read is None:
            q, k, v = self._project(x, incremental=past is not None)
        else:
            self._joined = None  # (made again from the weights of the moment by the next step that needs it)
            k, v = self._split(self.key(x)), self._split(self.value(x))
            if plan is None:
                return None, (k, v)
            q = self._split(self.query(take_columns(x, read)))
        new_kv = (k, v)
        p = self.dropout if self.training else 0.0
        if isinstance(plan, flex_attention.FlexPlan):
            y = plan.attend(q, k, v)
            if y is not None:
                B, _, T, _ = y.shape
                return self.out(y.transpose(1, 2).reshape(B, T, -1)), new_kv
            plan = plan.sdpa_plan()
        if past is not None:
            k, v = past(k, v)
        ys = []
        for qb, (_, _, key_end, bias) in zip(_query_blocks(q, plan), plan):
            kb, vb = _rows(k, key_end), _rows(v, key_end)
            if isinstance(bias, toeplitz_attention.ToeplitzBias):
                y = toeplitz_attention.attend(qb, kb, vb, bias.table, p, bias.expanded)
                if y is not None:
                    ys.append(y)
                    continue
                bias = bias.dense()
            if self.impl != "reference":
                ys.append(F.scaled_dot_product_attention(qb, kb, vb, attn_mask=bias, dropout_p=p))
            else:
                ys.append(reference_attention(qb, kb, vb, bias, p, self.training))
        # [B, T, H, D] blocks joined along T: one copy (joining [B, H, T, D] along T, then transposing,
        # would copy twice); CUDA's fused kernels return that layout already, so one block needs none
        y = torch.cat([y.transpose(1, 2) for y in ys], dim=1) if len(ys) > 1 else ys[0].transpose(1, 2)
        B, T = y.shape[:2]
        return self.out(y.reshape(B, T, -1)), new_kv


# Both cut q, k and v, [B, H, T, D] views of the projections' [B, T, H, D] outputs, along T in that
# layout, not in [B, H, T, D]: the same views, but in the backward q's gradient is one join of the
# blocks' gradients, in the layout the projection's matmul reads as it is. Cut in [B, H, T, D], each
# block's q gradient was zero-filled to the whole tensor, the two summed, and the sum copied into
# [B, T, H, D]: per layer two zero-fills, two copies, a sum and a copy of q's whole gradient, where
# one join is left (on a GPU, whose fused kernels give gradients in [B, T, H, D] memory).


def _query_blocks(q, plan):
    """Each block's query rows of ``q``: one split of its [B, T, H, D] layout (a join in the backward);
    q itself for one block (every decoding step: a split is a call, and decoding is bound by calls)."""
    if len(plan) == 1:
        return [q]
    sizes = [block.query_end - block.query_start for block in plan]
    return [t.transpose(1, 2) for t in q.transpose(1, 2).split(sizes, 1)]


def _rows(t, end):
    """The first ``end`` rows (keys) of ``t``, cut in its [B, T, H, D] layout; t itself where that is all
    of it (decoding steps: no calls)."""
    return t if end == t.size(2) else t.transpose(1, 2)[:, :end].transpose(1, 2)


def reference_attention(q, k, v, attn_bias, dropout_p=0.0, training=False):
    """softmax(QK^T / sqrt(d) + bias) V, spelled out: the path the fast one is checked against."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))
    if attn_bias is None:
        pass
    elif attn_bias.dtype == torch.bool:
        scores = scores.masked_fill(~attn_bias, float("-inf"))
    else:
        scores = scores + attn_bias
    # softmax in at least fp32 (half-precision inputs), without demoting float64
    probs = scores.softmax(-1, dtype=torch.promote_types(scores.dtype, torch.float32))
    # a query that may see no key (a row of padding only) gets zeros, as torch's fused
    # attention gives, not 0/0 = NaN, which would poison the gradients of the whole batch
    probs = probs.masked_fill(scores.isneginf().all(-1, keepdim=True), 0.0).type_as(q)
    return F.dropout(probs, dropout_p, training) @ v


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm whose output keeps the autocast dtype under autocast. Autocast runs layer_norm
    in fp32 and returns fp32, so the residual stream would be fp32 and every projection reading it
    (query, key, value, fc1) would cast it again, forward and backward. Here the statistics are
    still accumulated in fp32 inside the kernel, as in fairseq's fp16 models, and the output is in
    the autocast dtype: the bf16 stream costs what the fp16 one does. Without autocast: as nn's."""

    def forward(self, x):
        if not torch.is_autocast_enabled(x.device.type):
            return super().forward(x)
        dtype = torch.get_autocast_dtype(x.device.type)
        with torch.autocast(x.device.type, enabled=False):
            w, b = self.weight.to(dtype), self.bias.to(dtype)
            return F.layer_norm(x.to(dtype), self.normalized_shape, w, b, self.eps)


class Block(nn.Module):
    """Post-LN layer as in BERT: x = LN(x + Attn(x)); x = LN(x + FFN(x))."""

    def __init__(self, s: TransformerShape, impl):
        super().__init__()
        dim, ffn_dim = s.encoder_embed_dim, s.encoder_ffn_embed_dim
        self.attn = SelfAttention(s, impl)
        self.attn_ln = LayerNorm(dim, eps=s.layernorm_eps)
        self.fc1 = nn.Linear(dim, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, dim)
        self.ffn_ln = LayerNorm(dim, eps=s.layernorm_eps)
        self.drop = nn.Dropout(s.dropout)

    def forward(self, x, plan, past=None, read=None):
        # dropout is the identity outside training: not called then (decoding is bound by calls)
        drop = self.drop if self.training else _identity
        a, kv = self.attn(x, plan, past, read)
        if a is None:  # keys and values only
            return None, kv
        if read is not None:
            x = take_columns(x, read)
        x = self.attn_ln(x + drop(a))
        x = self.ffn_ln(x + drop(self.fc2(F.gelu(self.fc1(x)))))
        return x, kv


def _identity(x):
    return x


def take_columns(x, read):
    """The columns [B, R, ...] of ``x`` [B, T, ...] that a caller reads: an int s, columns [s, T) (a
    view); a LongTensor [B, R], those columns of each row (``ReadCells.columns``)."""
    if isinstance(read, int):
        return x[:, read:]
    return x.gather(1, read.view(*read.shape, *(1,) * (x.dim() - 2)).expand(*read.shape, *x.shape[2:]))


class ReadCells(NamedTuple):
    """The cells of a [B, T] batch whose final states a caller reads (the pre-training loss's), laid out
    for the last layer, which computes those alone (``UniLMv2Transformer.forward``'s ``read``):
    ``columns`` [B, R], each row's read columns in order, then unread ones standing in for a row that
    reads fewer than R, the most any row reads (computed, then dropped; a row's R columns are distinct,
    so the gather's backward adds into no column twice); ``index`` [N], the read ones
    among those B x R cells; ``cells`` [N], the same cells among the B x T, in B x T order (fairseq's
    ``x[mask]`` order). Worked example, mask rows [0 1 0 1] and [1 0 0 0]: R = 2, columns [[1, 3],
    [0, 1]], index [0, 1, 2], cells [1, 3, 4]."""

    columns: torch.Tensor
    index: torch.Tensor
    cells: torch.Tensor

    @classmethod
    def of(cls, mask):
        """From a bool mask [B, T], in one device sync (as fairseq's ``x[mask]``): N and R, read as one
        number, N * (T + 1) + R; the rest are stable sorts, which put each row's read cells first, in
        their order."""
        B, T = mask.shape
        counts = mask.sum(1)
        N, R = divmod(int(counts.sum() * (T + 1) + counts.max()), T + 1)
        columns = mask.logical_not().to(torch.uint8).argsort(dim=1, stable=True)[:, :max(R, 1)]
        R = columns.size(1)
        real = torch.arange(R, device=mask.device) < counts[:, None]
        index = real.logical_not().flatten().to(torch.uint8).argsort(stable=True)[:N]
        rows = torch.arange(B, device=mask.device)[:, None] * T
        return cls(columns, index, (columns + rows).flatten().index_select(0, index))


class LMHead(nn.Module):
    """dense -> GELU -> LayerNorm -> projection tied to the token embedding + bias."""

    def __init__(self, s: TransformerShape, embed_weight):
        super().__init__()
        self.dense = nn.Linear(s.encoder_embed_dim, s.encoder_embed_dim)
        self.ln = LayerNorm(s.encoder_embed_dim, eps=s.layernorm_eps)
        self.weight = embed_weight
        self.bias = nn.Parameter(torch.zeros(embed_weight.size(0)))

    def forward(self, x):
        return F.linear(self.ln(F.gelu(self.dense(x))), self.weight) + self.bias


class UniLMv2Transformer(nn.Module):
    """``attention_impl``: "auto" (the measured-fastest path: SDPA), "flex" (flex wherever
    it can: also the CPU's forward without gradient, else SDPA), "triton" (SDPA, but the shared
    context block by the Triton kernel where it can run), "sdpa" (PyTorch's fused kernels) or
    "reference" (explicit softmax). ``compile_layers``: training forwards run each
    layer through torch.compile (``compiled_layers.py``)."""

    def __init__(self, s: TransformerShape, vocab_size, attention_impl="auto", compile_layers=False):
        super().__init__()
        self.shape, self.attention_impl, self.compile_layers = s, attention_impl, compile_layers
        dim = s.encoder_embed_dim
        self.embed_tokens = nn.Embedding(vocab_size, dim)
        self.embed_positions = nn.Embedding(s.max_positions, dim)
        self.embed_segments = nn.Embedding(s.type_vocab_size, dim)
        self.embed_ln = LayerNorm(dim, eps=s.layernorm_eps)
        self.drop = nn.Dropout(s.dropout)
        # Linear(buckets -> heads, no bias) as in the paper/s2s-ft; used as a lookup table
        self.rel_pos_bias = (
            None if s.no_rel_pos else nn.Linear(s.rel_pos_buckets, s.encoder_attention_heads, bias=False)
        )
        self.layers = nn.ModuleList([Block(s, attention_impl) for _ in range(s.encoder_layers)])
        self.lm_head = LMHead(s, self.embed_tokens.weight)
        self.apply(self._init_weights)

    def autocast_weights(self):
        """(module, name) of each parameter that autocast casts to its dtype once a forward: the
        projections' weights and biases (F.linear's casts, which autocast's cache keeps for every use
        in the forward, so that the gradients of a weight used twice are summed in its dtype, as
        here). Not the LayerNorms' (``LayerNorm`` casts at each use, outside that cache: a weight used
        twice, as the layers are in a sequence-to-sequence forward, has its gradients summed in fp32),
        the embeddings (summed in fp32), the relative bias's weights (their table is fp32), the LM
        head's output weight (the token embedding, also looked up) or its bias (added in fp32). None
        with compiled layers (torch.compile would guard on the cast tensors, new each forward).
        ``tasks/autocast.py`` casts them in one batch."""
        if self.compile_layers:
            return None
        # asked every training forward: walking the modules took ~0.25 ms of Python at 12 layers, and
        # they do not change after construction (a pair names its module, so a reloaded weight is found)
        slots = getattr(self, "_autocast_slots", None)
        if slots is None:
            linears = [m for m in self.modules() if isinstance(m, nn.Linear) and m is not self.rel_pos_bias]
            slots = self._autocast_slots = [(m, n) for m in linears for n in ("weight", "bias")
                                            if getattr(m, n) is not None]
        return slots

    @staticmethod
    def _init_weights(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def attention_bias(self, q: TokenDescription, k: TokenDescription, dtype, context=None):
        """One additive bias [B, H, Tq, Tk] (or a bool mask [B, 1, Tq, Tk] without relative
        positions) shared by all layers. ``context``: P, where the keys' first P columns are a context
        shared by every row at contiguous positions (``ContextLayout``): see ``shared_context_bias``."""
        # fused attention pads a bias whose rows are not 8-element aligned (a copy in every layer,
        # forward and backward): build it over keys padded with PAD columns to a multiple of 8 and
        # hand over the view of the real ones. Worked example: Tk = 674 -> built over 680 columns
        Tk, k = k.kinds.size(1), k.padded(BIAS_ALIGNMENT)
        if context is not None and self.rel_pos_bias is not None:
            return self.shared_context_bias(q, k, context, dtype)[..., :Tk]
        allowed = attention_allowed(q.kinds, q.steps, k.kinds, k.steps).unsqueeze(1)
        if self.rel_pos_bias is None:
            return allowed[..., :Tk]
        bias = self.relative_bias(q.positions, k.positions, dtype)
        return torch.where(allowed, bias, float("-inf"))[..., :Tk]

    def shared_context_bias(self, q: TokenDescription, k: TokenDescription, P, dtype):
        """``attention_bias`` of queries over keys whose first P columns are a context shared by every
        row at contiguous positions s, s+1, ...: the appended block's and the last layer's (pre-training).
        Every query sees every context key (the rule), and over them a query at position p reads the
        distance table from s - p on: its window of P, as it is (no rule over those pairs, no gather per
        key). Over the other keys (the appended, a few) the rule, and the table looked up per pair.
        Worked example, table of distances -3 .. 3 = [t0 .. t6], context at positions 0, 1, 2 (P = 3),
        one appended key at position 1: a query at position 2 gets [t1 t2 t3 | t2] (distances -2, -1, 0
        | -1), masked where the rule forbids the appended key. Each cell the rule's bias, bit for bit;
        the [B, H, Tq, bound] windows ``relative_bias`` gathers every key from are not made."""
        bound = self.position_bound(q.positions, k.positions)
        table = self.distance_table(bound, q.positions.device)  # [H, 2 bound - 1]: distance d at d + bound - 1
        origin = (bound - 1) - q.positions  # [B, Tq]: where in the table each query's key position 0 is
        windows = table.unfold(1, P, 1).transpose(0, 1).to(dtype)  # [2 bound - P, H, P]: window w = table[w:w+P]
        context = windows[origin + k.positions[:, :1]].permute(0, 2, 1, 3)  # [B, H, Tq, P]
        rest = k.columns(P)
        # looked up in the table's fp32, then cast: the backward sums every pair of a distance into one
        # cell (hundreds at base size), and the table's sums stay in fp32 (``distance_table``); by
        # index_select, whose backward adds into the table without sorting the pairs (an index's sorts)
        at = origin.unsqueeze(2) + rest.positions.unsqueeze(1)  # [B, Tq, Tk - P]
        pairs = table.t().index_select(0, at.flatten()).view(*at.shape, table.size(0)).to(dtype)  # [B, Tq, Tk - P, H]
        allowed = attention_allowed(q.kinds, q.steps, rest.kinds, rest.steps).unsqueeze(1)
        return torch.cat([context, torch.where(allowed, pairs.permute(0, 3, 1, 2), float("-inf"))], -1)

    def relative_bias(self, q_pos, k_pos, dtype, bound=None):
        """The bias [B, H, Tq, Tk] of key position minus query position, without indexing the
        table once per (query, key) pair: one such lookup's backward (CUDA sorts the ~10M
        indices of a base-size batch) took 84% of a GPU update. Worked example, positions < P = 3:
          table   = bias of distance -2 .. +2, per head        [H, 2P-1] = [t0 t1 t2 t3 t4]
          windows = its P windows of length P, by P-1-q_pos      [P, H, P]: row for q_pos 0 =
                    [t2 t3 t4] (key positions 0, 1, 2), for q_pos 2 = [t0 t1 t2]
          rows    = the window of each query                     [B, Tq, H, P]
          bias    = each row read at the key positions           [B, H, Tq, Tk]
        The two reads index whole rows (B*Tq of them) and gather along the last axis, whose
        backward is a scatter without sort; bucket and clamp run on 2P-1 distances only."""
        # P (``bound``): any bound above every position gives the same bias; the batch's own costs
        # a device sync, free on the CPU, a stall of the launch queue on a GPU (there: the model's limit)
        P = bound or self.position_bound(q_pos, k_pos)
        table = self.distance_table(P, q_pos.device)
        windows = table.unfold(1, P, 1).transpose(0, 1).to(dtype)  # [P, H, P]
        rows = windows[P - 1 - q_pos].permute(0, 2, 1, 3)  # [B, H, Tq, P]
        B, H, Tq, _ = rows.shape
        return rows.gather(-1, k_pos[:, None, None, :].expand(B, H, Tq, k_pos.size(1)))

    def context_bias(self, P, dtype, device):
        """The bias [1, H, P, P] of a context shared by the batch at contiguous positions: every key is
        visible (no mask), and query i reads the distance table at j - i for key j, which is the table's
        window of P that starts at distance -i. So the windows, in reverse order, are the bias: the
        values ``attention_bias`` gives that block, without its rule over the pairs, its gather per
        key and its mask. Worked example, P = 3 (rows padded to 8 columns aside):
          table   = distances -2 .. 2                 [t0 t1 t2 t3 t4]
          windows = [t0 t1 t2], [t1 t2 t3], [t2 t3 t4] (start at distance -2, -1, 0)
          bias    = query 0 [t2 t3 t4], query 1 [t1 t2 t3], query 2 [t0 t1 t2]"""
        W = P + (-P % BIAS_ALIGNMENT)  # windows of W columns: the rows' stride aligned for fused attention
        windows = self.distance_table(W, device).unfold(1, W, 1)  # [H, W, W]: window w starts at w + 1 - W
        rows = windows.index_select(1, torch.arange(W - 1, W - 1 - P, -1, device=device))  # query i: w = W-1-i
        return rows.to(dtype)[..., :P].unsqueeze(0)

    def position_bound(self, q_pos, k_pos):
        return self.shape.max_positions if q_pos.is_cuda else int(torch.maximum(q_pos.max(), k_pos.max())) + 1

    def distance_buckets(self, P, device):
        """The bucket of each distance 1-P .. P-1. Computed once per device for the model's position
        limit M and sliced (its centre), so a forward, or each decoding step, does not redo the
        log/clamp/where over the distances. A plain attribute: no state-dict entry."""
        M = self.shape.max_positions
        cache = getattr(self, "_buckets", None)
        if P > M or cache is None or cache.device != device:
            bucket = relative_position_bucket(torch.arange(1 - max(P, M), max(P, M), device=device),
                                              self.shape.rel_pos_buckets, self.shape.max_rel_distance)
            if P > M:
                return bucket
            self._buckets = cache = bucket
        return cache[M - P : M + P - 1]

    def distance_table(self, P, device):
        """[H, 2P-1]: the bias of key position minus query position = 1-P .. P-1, per head,
        read from the bucketed weights (bucket and clamp run on 2P-1 distances only)."""
        bucket = self.distance_buckets(P, device)
        # at least fp32 (float64 stays): the table's gradient sums many distances and windows
        weight = self.rel_pos_bias.weight
        table = weight.to(torch.promote_types(weight.dtype, torch.float32))[:, bucket]
        # finite in every attention dtype (fp16's range is the smallest), with room left for
        # the q.k scores: a learned bias cast to fp16 must not become +-inf (softmax -> NaN)
        return table.clamp(-BIAS_LIMIT, BIAS_LIMIT)

    def uses_flex(self, x, past):
        """The flex path, where asked for ("flex"), takes full sequences (no cached keys) where
        it has what the layer needs: attention dropout inactive (flex has none) and, on the CPU,
        no gradient (its backward is CUDA-only). "auto" never takes it: on an H200 it was slower
        than SDPA both in training (1.9x an update: the bias table's gradient is summed by atomics
        in the kernel) and forward only (3.3x the 12 layers' attention; docs/BENCHMARKS.md)."""
        if self.attention_impl != "flex" or past is not None or not flex_attention.available():
            return False
        if self.training and self.shape.attention_dropout > 0:
            return False
        return x.is_cuda or not torch.is_grad_enabled()

    def uses_toeplitz(self, layout, device, compiled=False):
        """Whether the shared context block goes to the Triton kernel: asked for ("triton"), a context
        ``layout`` (``check_prefix_len``) shared and with contiguous positions, a relative bias, the
        layers not compiled, and the kernel available on ``device``."""
        return (self.attention_impl == "triton" and layout is not None and layout.shared and layout.contiguous
                and not compiled and self.rel_pos_bias is not None and toeplitz_attention.available(device))

    def flex_plan(self, q: TokenDescription, dtype, prefix_len=None, layout=None):
        """The flex path's plan: one block mask and score_mod for the whole sequence, and the
        SDPA plan built only if flex fails."""
        # the model's position limit, not the batch's: no device sync, and one table shape, so the
        # compiled kernel is not recompiled for each batch's longest row
        table = None if self.rel_pos_bias is None else self.distance_table(self.shape.max_positions, q.positions.device)
        return flex_attention.FlexPlan(q, table, lambda: self.attention_plan(q, q, dtype, prefix_len, layout))

    def embed(self, tokens, positions, segments):
        x = self.embed_tokens(tokens) + self.embed_positions(positions) + self.embed_segments(segments)
        return self.drop(self.embed_ln(x))

    def attention_plan(self, q: TokenDescription, k: TokenDescription, dtype, prefix_len=None,
                       layout: "ContextLayout | None" = None, toeplitz=False):
        """Which query rows attend to which key prefix, with what bias: a list of ``PlanBlock``.

        With ``prefix_len`` (the padded context length, context first in every row: checked by
        ``check_prefix_len``), the rule's block structure is used: context rows see only
        context keys, so they attend over the first ``prefix_len`` keys alone; appended rows
        attend over all keys. This skips the context-to-appended block (forbidden by the rule)
        instead of computing and masking it: PMLM's "no redundant computation".
        Otherwise one block over all keys: every caller but pre-training, a batch with no
        appended part, and always with cached keys (Tk > Tq), which decoding relies on.

        ``layout`` (with ``prefix_len``: what ``check_prefix_len`` found; None: nothing shared) says
        which context bias serves every row:
        - ``shared``: every row's context is the same, no padding and the same positions, so the
          context block's bias is every row's: it is built once, [1, H, P, P], and broadcast. Worked
          example, a batch of 32 contexts of 512 tokens, 12 heads: 3.1M bias cells to build and reduce
          the gradient of, not 100M. Without relative positions such a block needs no mask either
          (every context key is visible): None.
        - and ``contiguous``: the context's positions are p, p+1, ..., so that bias is read from the
          distance table's windows as they are (``context_bias``): no rule, no gather per key, no
          mask, the same values; and so is the appended block's over the context keys
          (``shared_context_bias``; the last layer's block too, ``read_plan``).

        ``toeplitz`` (``uses_toeplitz``: a shared contiguous context, relative positions, the kernel
        available): that block's bias is a ``ToeplitzBias``, the [H, 2P-1] distance table the
        Triton kernel reads, materialised as above only where the kernel cannot run.
        """
        Tq, Tk = q.kinds.size(1), k.kinds.size(1)
        if prefix_len is None or Tq != Tk:
            return [PlanBlock(0, Tq, Tk, self.attention_bias(q, k, dtype))]
        device = q.positions.device
        shared_context = layout is not None and layout.shared
        windowed = shared_context_columns(prefix_len, layout)
        if toeplitz:
            bias = toeplitz_attention.ToeplitzBias(self.distance_table(prefix_len, device),
                                                   lambda: self.context_bias(prefix_len, dtype, device))
        elif shared_context and self.rel_pos_bias is None:
            bias = None
        elif windowed is not None:
            bias = self.context_bias(prefix_len, dtype, device)
        else:
            ctx = q.columns(0, prefix_len)
            if shared_context:
                ctx = ctx.first_row()
            bias = self.attention_bias(ctx, ctx, dtype)
        blocks = [PlanBlock(0, prefix_len, prefix_len, bias)]
        if prefix_len < Tq:
            app = q.columns(prefix_len)
            blocks.append(PlanBlock(prefix_len, Tq, Tk, self.attention_bias(app, k, dtype, windowed)))
        return blocks

    def forward(self, tokens, positions, segments, kinds, steps, prefix_len=None, past=None, return_kv=False,
                bias=None, read=None):
        """Returns final hidden states [B, T, C] (and per-layer (k, v) if asked).

        ``prefix_len``: optional int, every row's context occupies columns [0, prefix_len)
        and nothing there may see the columns after it (see ``attention_plan``).
        ``past``: a ``KVCache`` (``kv_cache.py``) whose tokens come before the ones given here
        (the source, and in decoding steps the target so far). With ``return_kv``, each layer's
        (k, v) of these tokens. ``bias``: with ``past``, a function of the attention dtype giving
        these tokens' bias over the cached keys and their own, where the caller has it already
        (decoding steps: ``seq2seq_views.StepBiases``); by default it is built from the descriptions.
        ``read``: the caller reads the final states of those columns alone (``take_columns``): an int s,
        columns [s, T) (with ``past`` or without ``prefix_len``: a one-block plan), or a LongTensor
        [B, R] (``ReadCells.columns``: the pre-training loss's cells). The last layer computes the
        other columns' keys and values only, not their attention and feed-forward: [B, R, C] is
        returned, or None for s = T (keys and values alone: the sequence-to-sequence source)."""
        # the check's device sync first, then the embedding: on a GPU its kernels run while the host builds
        # the plan below (the other way round the device idles through that, the embedding done at the sync)
        layout = check_prefix_len(prefix_len, kinds, positions) if prefix_len is not None else None
        x = self.embed(tokens, positions, segments)
        q = TokenDescription(kinds, steps, positions)
        k = q if past is None else past.describe(q)
        T, flex = x.size(1), self.uses_flex(x, past)
        compiled = (self.compile_layers and self.training and past is None and not return_kv and not flex
                    and compiled_layers.wanted(x.device))
        if compiled:  # static shapes: few lengths (compiled_layers.py)
            x, q = compiled_layers.pad(x, q)
            k = q
        dtype = x.dtype
        if torch.is_autocast_enabled(x.device.type):
            # autocast runs the fused attention in its lower precision and would cast an fp32 bias
            # to it in every layer: make it in that dtype once (the same values reach the kernel)
            dtype = torch.get_autocast_dtype(x.device.type)
        if bias is not None:
            plan = [PlanBlock(0, T, k.kinds.size(1), bias(dtype))]
        elif flex:
            plan = self.flex_plan(q, dtype, prefix_len, layout)
        else:
            plan = self.attention_plan(q, k, dtype, prefix_len, layout, self.uses_toeplitz(layout, x.device, compiled))
        assert past is None or len(plan) == 1, "with cached keys every query attends over all keys: one block"
        kvs, last = [], len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            if i == last and read is not None:  # eager also among compiled layers: the read columns alone
                x, kv = layer(x, self.read_plan(plan, read, q, k, dtype, shared_context_columns(prefix_len, layout)),
                              None if past is None else functools.partial(past.extend, i), read)
            elif compiled:
                x, kv = compiled_layers.run(layer, x, plan)
            else:
                x, kv = layer(x, plan, None if past is None else functools.partial(past.extend, i))
            if return_kv:
                kvs.append(kv)
        if compiled and read is None:  # the padding's columns cut off
            x = x[:, :T]
        return (x, kvs) if return_kv else x

    def read_plan(self, plan, read, q: TokenDescription, k: TokenDescription, dtype, context=None):
        """The last layer's plan for the query columns ``read`` alone (``forward``), None for none. Columns
        [s, T): the one block's rows from s. Columns [B, R]: one block over all keys, its bias built for
        those columns ([B, H, R, Tk]: every query kind's rule at once, so no prefix split; ``context``:
        ``attention_bias``'s)."""
        if not isinstance(read, int):
            bias = self.attention_bias(q.take(read), k, dtype, context)
            return [PlanBlock(0, read.size(1), k.kinds.size(1), bias)]
        if read == q.kinds.size(1):
            return None
        if isinstance(plan, flex_attention.FlexPlan):
            plan = plan.sdpa_plan()
        assert len(plan) == 1, "columns [s, T) need a one-block plan"
        block = plan[0]
        return [block._replace(query_end=block.query_end - read,
                               bias=None if block.bias is None else block.bias[..., read:, :])]


class ContextLayout(NamedTuple):
    """What ``check_prefix_len`` found: every row's context the same (``shared``: no padding, the
    same positions), and those positions ``contiguous`` (p, p+1, ...: its bias is Toeplitz)."""

    shared: bool
    contiguous: bool


def shared_context_columns(prefix_len, layout):
    """P = ``prefix_len`` where every row's first P columns are the same context at contiguous positions
    (``layout``), whose bias the distance table's windows give (``context_bias``,
    ``shared_context_bias``); else None."""
    return prefix_len if layout is not None and layout.shared and layout.contiguous else None


def check_prefix_len(prefix_len, kinds, positions):
    """``prefix_len`` travels from the pre-training collater through the model; the plan that
    skips the context-to-appended block is right only if it describes the batch: an int within
    the sequence, context (or padding) only before it, no context after it. Checked once a
    forward, before any layer, in one device sync that also returns the context's
    ``ContextLayout`` (``attention_plan``'s ``layout``, and ``uses_toeplitz``'s). Batches of
    length-sorted examples mostly are shared (docs/DESIGN.md §2)."""
    T = kinds.size(1)
    if not isinstance(prefix_len, int) or not 0 < prefix_len <= T:
        raise ValueError(f"prefix_len must be an int in [1, {T}] (the padded context length), got {prefix_len!r}")
    ctx_kinds, ctx_positions = kinds[:, :prefix_len], positions[:, :prefix_len]
    wrong = (ctx_kinds > CONTEXT).any() | (kinds[:, prefix_len:] == CONTEXT).any()
    shared = (ctx_kinds == CONTEXT).all() & (ctx_positions == ctx_positions[:1]).all()
    first = ctx_positions[0]
    contiguous = (first == first[0] + torch.arange(prefix_len, device=first.device)).all()
    wrong, shared, contiguous = torch.stack([wrong, shared, contiguous]).tolist()
    if wrong:
        raise ValueError(f"prefix_len {prefix_len} does not describe the batch: columns before it must be context "
                         "or padding and none after it context (PseudoMaskedLMDataset.collater lays batches out so)")
    return ContextLayout(shared, contiguous)
