"""The model (docs/DESIGN.md §2): the fused attention path against the explicit one, a
from-the-spec forward pass, the T5 relative-position buckets, the tied LM head and the
projection of the loss positions only."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fairseq_pmlm.modules.attention_rule import PAD, TokenDescription, attention_allowed
from fairseq_pmlm.modules.relative_position import relative_position_bucket

from helpers import collate, example, hidden, random_context, tiny_transformer

pytestmark = pytest.mark.usefixtures("one_thread")


def random_batches(d, seed, n_batches=3, size=6, objective="ae+par"):
    """Padded batches of examples of random lengths and mask ratios."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_batches):
        samples = []
        for _ in range(size):
            ctx, seg, maskable = random_context(rng, d, int(rng.integers(2, 40)), int(rng.integers(2, 40)))
            samples.append(example(int(rng.integers(1 << 30)), ctx, seg, maskable, d, objective,
                                   mask_prob=float(rng.choice([0.15, 0.4]))))
        out.append(collate(samples, d))
    return out


def pair(vocab, buckets):
    """The same random weights behind the "sdpa" and the "reference" attention paths."""
    fast = tiny_transformer(vocab, buckets, "sdpa", seed=3)
    ref = tiny_transformer(vocab, buckets, "reference", seed=4)
    ref.load_state_dict(fast.state_dict())
    return fast, ref


@pytest.mark.parametrize("buckets", [32, None], ids=["relpos", "no-relpos"])
def test_sdpa_and_reference_attention_give_the_same_hidden_states_on_padded_batches(buckets, dictionary):
    fast, ref = pair(len(dictionary), buckets)
    for objective, seed in (("ae+par", 1), ("ae", 2)):
        for batch in random_batches(dictionary, seed, objective=objective):
            ni = batch["net_input"]
            real = ni["kinds"] != PAD
            assert (~real).any()  # there is padding
            want = hidden(ref, ni, prefix_len=None)  # explicit softmax, one dense masked block
            for model, prefix in ((fast, "batch"), (fast, None), (ref, "batch")):
                got = hidden(model, ni, prefix)
                assert got.dtype == torch.float32
                assert (got[real] - want[real]).abs().max() < 1e-5, (model.attention_impl, prefix)


def assert_same_gradients(fast, ref, ni):
    """In float64 and without dropout (so that rounding cannot hide or fake a difference), the same
    weighted sum of hidden states through ``fast`` (split plan, ``prefix_len``) and ``ref`` (one
    dense masked block): every parameter's gradient agrees. Returns how many had one."""
    for m in (fast, ref):
        m.train().double()
        for mod in m.modules():
            if isinstance(mod, torch.nn.Dropout):
                mod.p = 0.0
        for layer in m.layers:
            layer.attn.dropout = 0.0
    args = (ni["src_tokens"], ni["positions"], ni["segments"], ni["kinds"], ni["steps"])
    keep = (ni["kinds"] != PAD).unsqueeze(-1).double()
    w = torch.randn(*ni["kinds"].shape, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    (fast(*args, prefix_len=ni["prefix_len"]) * keep * w).sum().backward()
    (ref(*args) * keep * w).sum().backward()
    n = 0
    for (name, p), q in zip(fast.named_parameters(), ref.parameters()):
        assert (p.grad is None) == (q.grad is None), name
        if p.grad is not None:
            assert torch.allclose(p.grad, q.grad, atol=1e-9, rtol=1e-6), name
            n += 1
    return n


def test_training_mode_gradients_of_both_attention_paths_agree_without_dropout(dictionary):
    fast, ref = pair(len(dictionary), 32)
    assert assert_same_gradients(fast, ref, random_batches(dictionary, 5, n_batches=1, size=4)[0]["net_input"]) > 10


def t5_bucket(relative_position, num_buckets=32, max_distance=128):
    """Mesh TensorFlow / T5's bidirectional bucket, transcribed: it takes n = -(key - query),
    so "n < 0" (key to the right) selects the upper half."""
    ret = 0
    n = -relative_position
    num_buckets //= 2
    ret += (n < 0).long() * num_buckets
    n = n.abs()
    max_exact = num_buckets // 2
    is_small = n < max_exact
    val_if_large = max_exact + (
        torch.log(n.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    ).long()
    val_if_large = torch.min(val_if_large, torch.full_like(val_if_large, num_buckets - 1))
    return ret + torch.where(is_small, n, val_if_large)


def test_relative_bucket_hand_checked_values():
    rel = torch.tensor([0, 1, -1, 7, -7, 8, -8, 10000, -10000, 128, -128, 127])
    assert relative_position_bucket(rel, 32, 128).tolist() == [0, 17, 1, 23, 7, 24, 8, 31, 15, 31, 15, 31]


def test_relative_bucket_equals_t5_on_every_distance_up_to_1000():
    rel = torch.arange(-1000, 1001)
    assert torch.equal(relative_position_bucket(rel, 32, 128), t5_bucket(rel, 32, 128))
    assert torch.equal(relative_position_bucket(rel, 64, 256), t5_bucket(rel, 64, 256))


def test_keys_to_the_right_land_in_the_upper_half_and_buckets_grow_with_distance_on_each_side():
    d = torch.arange(0, 2000)
    right = relative_position_bucket(d, 32, 128)  # key after the query
    left = relative_position_bucket(-d, 32, 128)  # key before the query
    assert right[0] == 0 and (right[1:] >= 16).all() and (right <= 31).all()
    assert (left >= 0).all() and (left <= 15).all()
    assert (right.diff() >= 0).all() and (left.diff() >= 0).all()
    assert set(right[1:].tolist()) == set(range(17, 32)) and set(left.tolist()) == set(range(0, 16))
    assert (right[:8] == torch.arange(8) + 16 * (d[:8] > 0)).all() and (left[:8] == torch.arange(8)).all()


def test_model_bias_is_the_shared_table_at_the_bucket_of_key_position_minus_query_position(dictionary):
    model = tiny_transformer(len(dictionary), 32)
    tables = [p for n, p in model.named_parameters() if "rel_pos" in n]
    assert len(tables) == 1 and tables[0].shape == (4, 32)  # one table for all layers, [heads, buckets]
    ni = random_batches(dictionary, 6, n_batches=1, size=3)[0]["net_input"]
    desc = TokenDescription(ni["kinds"], ni["steps"], ni["positions"])
    bias = model.attention_bias(desc, desc, torch.float32)
    pos = ni["positions"]
    allowed = attention_allowed(ni["kinds"], ni["steps"], ni["kinds"], ni["steps"])
    for b in range(pos.size(0)):
        rel = pos[b].unsqueeze(0) - pos[b].unsqueeze(1)  # [q, k] = pos[k] - pos[q]
        want = tables[0][:, t5_bucket(rel)]  # [H, Tq, Tk]
        ok = allowed[b]
        assert torch.equal(bias[b][:, ok], want[:, ok])
        assert torch.isneginf(bias[b][:, ~ok]).all()
    assert tiny_transformer(len(dictionary), None).rel_pos_bias is None  # the "-- rel pos" ablation


def test_the_windowed_relative_bias_and_its_gradient_equal_a_lookup_per_pair_for_any_position_bound():
    """The bias is read through per-query windows of a distance table (no per-pair index, whose
    backward dominated a GPU update): values and the table's gradient must be the per-pair
    lookup's, whatever bound above the positions the windows use (the GPU uses the model's limit),
    for queries and keys of different lengths (an appended block, a decoding step)."""
    model = tiny_transformer(300, 32).double()
    table = model.rel_pos_bias.weight
    g = torch.Generator().manual_seed(0)
    q_pos, k_pos = torch.randint(0, 200, (3, 5), generator=g), torch.randint(0, 200, (3, 9), generator=g)
    rel = k_pos.unsqueeze(1) - q_pos.unsqueeze(2)  # [B, Tq, Tk]
    want = table[:, t5_bucket(rel)].transpose(0, 1)  # [B, H, Tq, Tk]
    w = torch.randn(want.shape, dtype=torch.float64, generator=g)
    (want_grad,) = torch.autograd.grad((want * w).sum(), table)
    for bound in (None, 200, 300):
        got = model.relative_bias(q_pos, k_pos, torch.float64, bound=bound)
        assert torch.equal(got, want), bound
        (grad,) = torch.autograd.grad((got * w).sum(), table)
        torch.testing.assert_close(grad, want_grad, rtol=1e-12, atol=1e-12)


def spec_forward(model, ni):
    """docs/DESIGN.md §2 written out: (token + position + segment embedding) -> LayerNorm;
    per layer, post-LN: x = LN(x + Attn(x)), x = LN(x + FFN(x)) with GELU, where every head's
    scores are QK^T / sqrt(d) + rel_table[head, bucket(pos[key] - pos[query])], masked by the
    rule."""
    t, pos, seg = ni["src_tokens"], ni["positions"], ni["segments"]
    x = model.embed_tokens.weight[t] + model.embed_positions.weight[pos] + model.embed_segments.weight[seg]
    x = F.layer_norm(x, (x.size(-1),), model.embed_ln.weight, model.embed_ln.bias, model.embed_ln.eps)
    H = model.shape.encoder_attention_heads
    allowed = attention_allowed(ni["kinds"], ni["steps"], ni["kinds"], ni["steps"]).unsqueeze(1)
    rel = pos.unsqueeze(1) - pos.unsqueeze(2)
    bias = model.rel_pos_bias.weight[:, t5_bucket(rel)].permute(1, 0, 2, 3) if model.rel_pos_bias is not None else 0.0

    def heads(lin, x):
        B, T, C = x.shape
        return lin(x).view(B, T, H, C // H).permute(0, 2, 1, 3)

    for layer in model.layers:
        a = layer.attn
        B, T, C = x.shape
        q, k, v = heads(a.query, x), heads(a.key, x), heads(a.value, x)
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(C // H) + bias
        scores = scores.masked_fill(~allowed, float("-inf"))
        y = torch.einsum("bhqk,bhkd->bhqd", scores.softmax(-1), v).permute(0, 2, 1, 3).reshape(B, T, C)
        x = layer.attn_ln(x + a.out(y))
        x = layer.ffn_ln(x + layer.fc2(F.gelu(layer.fc1(x))))
    return x


@pytest.mark.parametrize("buckets", [32, None], ids=["relpos", "no-relpos"])
def test_forward_equals_the_spec_written_out(buckets, dictionary):
    model = tiny_transformer(len(dictionary), buckets, seed=5)
    with torch.no_grad():  # make the bias matter: the default init (std 0.02) is nearly flat
        if model.rel_pos_bias is not None:
            model.rel_pos_bias.weight.normal_(0, 1.0)
    for batch in random_batches(dictionary, 7, n_batches=2):
        ni = batch["net_input"]
        real = ni["kinds"] != PAD
        with torch.no_grad():
            want = spec_forward(model, ni)
        got = hidden(model, ni)
        assert (got[real] - want[real]).abs().max() < 1e-5


def test_relative_bias_changes_the_output(dictionary):
    """Control for the test above: the bias table is not a no-op."""
    model = tiny_transformer(len(dictionary), 32, seed=5)
    ni = random_batches(dictionary, 7, n_batches=1)[0]["net_input"]
    before = hidden(model, ni)
    with torch.no_grad():
        model.rel_pos_bias.weight.normal_(0, 1.0)
    assert (hidden(model, ni) - before).abs().max() > 1e-3


def test_lm_head_projection_is_the_token_embedding_itself(dictionary):
    model = tiny_transformer(len(dictionary), seed=8)
    head = model.lm_head
    assert head.weight is model.embed_tokens.weight
    assert sum(p is model.embed_tokens.weight for p in model.parameters()) == 1  # one parameter
    x = torch.randn(5, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        head.bias.normal_()
        h = F.layer_norm(F.gelu(head.dense(x)), (32,), head.ln.weight, head.ln.bias, head.ln.eps)
        assert torch.allclose(head(x), h @ model.embed_tokens.weight.T + head.bias, atol=1e-6)
        model.embed_tokens.weight[7] += 1.0  # editing the embedding edits the output projection
        assert torch.allclose(head(x)[:, 7], h @ model.embed_tokens.weight[7] + head.bias[7], atol=1e-6)


def test_model_with_masked_tokens_projects_only_those_positions_and_equals_the_full_projection(dictionary):
    """``masked_tokens`` as fairseq's bool mask or as its ``ReadCells`` (the criterion's)."""
    from fairseq_pmlm.models.unilmv2 import UniLMv2Config, UniLMv2Model
    from fairseq_pmlm.modules.transformer import ReadCells

    torch.manual_seed(0)
    cfg = UniLMv2Config(encoder_layers=2, encoder_embed_dim=32, encoder_ffn_embed_dim=64, encoder_attention_heads=4)
    model = UniLMv2Model(cfg, dictionary).eval()
    assert model.transformer.lm_head.weight is model.transformer.embed_tokens.weight
    batch = random_batches(dictionary, 9, n_batches=1, size=4)[0]
    mask = batch["target"].ne(dictionary.pad())
    assert 0 < int(mask.sum()) < mask.numel()
    with torch.no_grad():
        some, _ = model(**batch["net_input"], masked_tokens=mask)
        indexed, _ = model(**batch["net_input"], masked_tokens=ReadCells.of(mask))
        full, _ = model(**batch["net_input"])
        feats, _ = model(**batch["net_input"], features_only=True)
    assert full.shape == (*mask.shape, len(dictionary)) and feats.shape == (*mask.shape, 32)
    assert some.shape == (int(mask.sum()), len(dictionary))
    assert torch.allclose(some, full[mask], atol=1e-6) and torch.equal(indexed, some)
    assert torch.allclose(full, model.transformer.lm_head(feats), atol=1e-6)


def test_attention_plan_splits_only_full_pre_training_batches_and_is_one_block_with_cached_keys(dictionary):
    """Two blocks (context over context keys, the rest over all keys) only when ``prefix_len``
    leaves an appended part and queries and keys are the same tokens; cached keys (decoding:
    more keys than queries) always get one block, which SelfAttention's cache path reads."""
    model = tiny_transformer(len(dictionary))
    ni = random_batches(dictionary, 7, n_batches=1, size=3)[0]["net_input"]
    desc, p = TokenDescription(ni["kinds"], ni["steps"], ni["positions"]), ni["prefix_len"]
    T = desc.kinds.size(1)
    assert [b[:3] for b in model.attention_plan(desc, desc, torch.float32, p)] == [(0, p, p), (p, T, T)]
    assert [b[:3] for b in model.attention_plan(desc, desc, torch.float32)] == [(0, T, T)]
    context = desc.columns(0, p)
    assert [b[:3] for b in model.attention_plan(context, context, torch.float32, p)] == [(0, p, p)]
    last = desc.columns(T - 2)
    assert [b[:3] for b in model.attention_plan(last, desc, torch.float32, p)] == [(0, 2, T)]


def test_a_prefix_len_that_does_not_describe_the_batch_is_refused_with_its_value(dictionary):
    model = tiny_transformer(len(dictionary))
    ni = random_batches(dictionary, 8, n_batches=1, size=3)[0]["net_input"]
    p, T = ni["prefix_len"], ni["kinds"].size(1)
    assert p < T  # the batch has an appended part
    for bad in (p - 1, p + 1):  # context after it / appended tokens before it
        with pytest.raises(ValueError, match=rf"prefix_len {bad} does not describe the batch"):
            hidden(model, ni, bad)
    for bad in (0, T + 1, torch.tensor(p)):
        with pytest.raises(ValueError, match=rf"prefix_len must be an int in \[1, {T}\]"):
            hidden(model, ni, bad)


def test_the_head_warm_up_finds_the_lm_heads_own_parameters_through_fairseqs_ddp_wrappers(dictionary):
    """Under DDP the task gets the model twice wrapped ("module.module." names): the LM head's own
    parameters (not the tied embedding) are still the ones the warm-up keeps, and the head's record
    is the model's."""
    from fairseq.distributed.module_proxy_wrapper import ModuleProxyWrapper

    from fairseq_pmlm.models.unilmv2 import UniLMv2Config, UniLMv2Model
    from fairseq_pmlm.tasks.pseudo_masked_lm import PseudoMaskedLMTask

    class Wrapper(torch.nn.Module):  # what DistributedDataParallel adds: the model as .module
        def __init__(self, module):
            super().__init__()
            self.module = module

    model = UniLMv2Model(UniLMv2Config(encoder_layers=1, encoder_embed_dim=16, encoder_ffn_embed_dim=32,
                                       encoder_attention_heads=2), dictionary)
    wrapped = ModuleProxyWrapper(Wrapper(model))
    assert next(iter(dict(wrapped.named_parameters()))).startswith("module.module.")
    names = {id(p): n for n, p in model.named_parameters()}
    assert sorted(names[id(p)] for p in PseudoMaskedLMTask.head_parameters(wrapped)) == [
        "transformer.lm_head.bias", "transformer.lm_head.dense.bias", "transformer.lm_head.dense.weight",
        "transformer.lm_head.ln.bias", "transformer.lm_head.ln.weight"]
    assert wrapped.lm_head_trained is model.lm_head_trained


def test_under_autocast_the_bias_is_made_in_the_attention_dtype_with_the_same_outputs(dictionary, monkeypatch):
    """Under autocast the fused attention casts an fp32 bias to its dtype in every layer; the
    model makes the bias in that dtype once. The attention receives the same values: outputs are
    bit-equal to a forward whose plan is built in fp32."""
    model = tiny_transformer(len(dictionary), 32)
    ni = random_batches(dictionary, 7, n_batches=1, size=3)[0]["net_input"]
    seen = []
    plan = model.attention_plan
    monkeypatch.setattr(model, "attention_plan",
                        lambda q, k, dtype, *rest: seen.append(dtype) or plan(q, k, dtype, *rest))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours = hidden(model, ni)
        monkeypatch.setattr(model, "attention_plan", lambda q, k, dtype, *rest: plan(q, k, torch.float32, *rest))
        fp32_bias = hidden(model, ni)
    assert seen == [torch.bfloat16]
    assert torch.equal(ours, fp32_bias)


def test_every_bias_block_reaches_the_fused_attention_with_8_aligned_rows_and_the_same_outputs(dictionary, monkeypatch):
    """SDPA copies a bias whose row stride is not a multiple of 8 elements, in every layer (forward
    and backward); the plan's biases are views of ones built over keys padded to a multiple of 8.
    Their values and the outputs equal a bias built over the real keys alone."""
    from fairseq_pmlm.modules import transformer

    model = tiny_transformer(len(dictionary), 32)
    for seed in (7, 8, 9):
        ni = random_batches(dictionary, seed, n_batches=1, size=3)[0]["net_input"]
        desc = TokenDescription(ni["kinds"], ni["steps"], ni["positions"])
        aligned = model.attention_plan(desc, desc, torch.float32, ni["prefix_len"])
        key_ends = [b.key_end for b in aligned]
        assert any(k % 8 for k in key_ends), key_ends  # the case that needs the padding
        for block in aligned:
            assert block.bias.shape[-1] == block.key_end and block.bias.stride(-2) % 8 == 0
        want = hidden(model, ni)
        monkeypatch.setattr(transformer, "BIAS_ALIGNMENT", 1)
        packed = model.attention_plan(desc, desc, torch.float32, ni["prefix_len"])
        assert not all(b.bias.stride(-2) % 8 == 0 for b in packed)
        for a, b in zip(aligned, packed):
            assert torch.equal(a.bias, b.bias)
        assert torch.equal(hidden(model, ni), want)
        monkeypatch.undo()


def test_the_pmlm_criterion_waits_for_the_device_once_and_gives_the_bool_selections_numbers(dictionary, monkeypatch):
    """One op that would make the host wait for a GPU (the count of the loss positions, with the
    most in a row: ``ReadCells``) where a bool selection per tensor and per loss part made 7; its
    loss, counts and sums are those of the bool selections. (The relative bias's windows over the
    model's limit, as on a GPU: the CPU reads the batch's, free there, a sync on a GPU.)"""
    from types import SimpleNamespace

    from torch.profiler import ProfilerActivity, profile

    from fairseq_pmlm.criterions.pmlm import PART_KINDS, PMLMCriterion
    from fairseq_pmlm.models.unilmv2 import UniLMv2Config, UniLMv2Model

    torch.manual_seed(0)
    cfg = UniLMv2Config(encoder_layers=2, encoder_embed_dim=32, encoder_ffn_embed_dim=64, encoder_attention_heads=4)
    model = UniLMv2Model(cfg, dictionary).eval()
    criterion = PMLMCriterion(SimpleNamespace(target_dictionary=dictionary))
    batch = random_batches(dictionary, 11, n_batches=1, size=4)[0]
    monkeypatch.setattr(type(model.transformer), "position_bound", lambda self, q_pos, k_pos: cfg.max_positions)
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        loss, sample_size, out = criterion(model, batch)
    assert sum(e.name in ("aten::nonzero", "aten::item") for e in prof.events()) == 1
    with torch.no_grad():
        mask = batch["target"].ne(dictionary.pad())
        logits, _ = model(**batch["net_input"], masked_tokens=mask)
        nll = F.cross_entropy(logits, batch["target"][mask], reduction="none")
        kinds = batch["net_input"]["kinds"][mask]
    assert torch.equal(loss, nll.sum())
    counts = {name: int(kinds.eq(kind).sum()) for name, kind in PART_KINDS.items()}
    assert int(sample_size) == max(counts.values()) > 0
    for name, kind in PART_KINDS.items():
        assert int(out[f"{name}_count"]) == counts[name]
        assert torch.allclose(out[f"{name}_loss"], nll[kinds.eq(kind)].sum(), rtol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_the_pmlm_loss_of_half_precision_logits_is_the_fp32_copys(dtype, dictionary):
    """fairseq's --fp16 hands the criterion fp16 logits: its fp32 log-probabilities (no fp32 copy of the
    logits) give the loss and the logits' gradient that cross entropy over an fp32 copy gives."""
    from types import SimpleNamespace

    from fairseq_pmlm.criterions.pmlm import PMLMCriterion

    batch = random_batches(dictionary, 11, n_batches=1, size=4)[0]
    mask = batch["target"].ne(dictionary.pad())
    torch.manual_seed(0)
    logits = (4 * torch.randn(int(mask.sum()), len(dictionary))).to(dtype).requires_grad_()
    criterion = PMLMCriterion(SimpleNamespace(target_dictionary=dictionary))
    loss, _, _ = criterion(lambda **net_input: (logits, {}), batch)
    loss.backward()
    got = logits.grad.clone()
    logits.grad = None
    want = F.cross_entropy(logits.float(), batch["target"][mask], reduction="none").sum()
    want.backward()
    assert loss.dtype == torch.float32 and torch.equal(loss, want)
    assert got.dtype == dtype and torch.equal(got, logits.grad)


def test_read_cells_lay_each_rows_loss_cells_out_for_the_last_layer():
    """The docstring's worked example, a row that reads nothing, and random rows: the cells in
    fairseq's ``x[mask]`` order, no column twice in a row."""
    from fairseq_pmlm.modules.transformer import ReadCells

    read = ReadCells.of(torch.tensor([[0, 1, 0, 1], [1, 0, 0, 0]], dtype=torch.bool))
    assert read.columns.tolist() == [[1, 3], [0, 1]]
    assert read.index.tolist() == [0, 1, 2] and read.cells.tolist() == [1, 3, 4]
    mask = torch.tensor([[0, 0, 0], [0, 1, 1], [1, 0, 1]], dtype=torch.bool)
    read = ReadCells.of(mask)
    assert read.cells.tolist() == mask.flatten().nonzero().squeeze(1).tolist()
    assert read.columns.flatten()[read.index].tolist() == [1, 2, 0, 2]
    mask = torch.rand(6, 40, generator=torch.Generator().manual_seed(0)) < torch.linspace(0, 0.5, 6)[:, None]
    read = ReadCells.of(mask)
    assert read.cells.tolist() == mask.flatten().nonzero().squeeze(1).tolist()
    assert all(len(set(row)) == read.columns.size(1) for row in read.columns.tolist())  # no column twice a row


@pytest.mark.parametrize("case", ["ae+par", "ae", "shared-context", "no-relpos"])
def test_pre_training_computes_what_every_columns_last_layer_gives(case, dictionary, monkeypatch):
    """The loss reads the final states of the masked context cells and the [P]s alone, so the last
    layer runs queries, attention and feed-forward for those columns only (``ReadCells``): the
    criterion's loss, logits and every parameter's gradient are those of the last layer computed for
    every column and then cut (dropout off: its draws would differ). Worked example, the AE+PAR
    batches here: the last layer's queries over 4 x 110 and 4 x 106 columns become 4 x 48 and 4 x 46."""
    from types import SimpleNamespace

    from fairseq_pmlm.criterions.pmlm import PMLMCriterion
    from fairseq_pmlm.models.unilmv2 import UniLMv2Config, UniLMv2Model
    from fairseq_pmlm.modules.transformer import UniLMv2Transformer, take_columns

    torch.manual_seed(0)
    cfg = UniLMv2Config(encoder_layers=2, encoder_embed_dim=32, encoder_ffn_embed_dim=64, encoder_attention_heads=4,
                        dropout=0.0, attention_dropout=0.0, no_rel_pos=case == "no-relpos")
    model = UniLMv2Model(cfg, dictionary).train()
    criterion = PMLMCriterion(SimpleNamespace(target_dictionary=dictionary))
    if case == "shared-context":  # the shared context block's bias (``context_bias``)
        batches = [alike_contexts_batch(dictionary, seed) for seed in (1, 2)]
    else:
        batches = random_batches(dictionary, 5, n_batches=2, size=4, objective="ae" if case == "ae" else "ae+par")
    run = UniLMv2Transformer.forward
    widths = []

    def every_column(self, *args, read=None, **kwargs):
        x = run(self, *args, **kwargs)
        return x if read is None else take_columns(x, read)

    def spy(self, *args, read=None, **kwargs):
        widths.append(None if read is None else tuple(read.shape))
        return run(self, *args, read=read, **kwargs)

    def steps():
        out = []
        for batch in batches:
            model.zero_grad()
            loss, _, _ = criterion(model, batch)
            loss.backward()
            out.append((loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
        return out

    monkeypatch.setattr(UniLMv2Transformer, "forward", spy)
    got = steps()
    assert all(w is not None and w[1] < batch["target"].size(1) for w, batch in zip(widths, batches, strict=True))
    monkeypatch.setattr(UniLMv2Transformer, "forward", every_column)
    want = steps()
    for (loss, grads), (ref_loss, ref_grads) in zip(got, want, strict=True):
        torch.testing.assert_close(loss, ref_loss)
        assert grads.keys() == ref_grads.keys()
        for name in grads:
            torch.testing.assert_close(grads[name], ref_grads[name], msg=name)


def alike_contexts_batch(d, seed, size=4, n1=9, n2=12, **masking):
    """A batch whose contexts all have the same length (so the same positions, no padding); the
    masks, and so the appended parts, differ."""
    rng = np.random.default_rng(seed)
    samples = [example(int(rng.integers(1 << 30)), *random_context(rng, d, n1, n2), d, "ae+par", **masking)
               for _ in range(size)]
    return collate(samples, d)


@pytest.mark.parametrize("buckets", [32, None], ids=["relpos", "no-relpos"])
def test_a_batch_of_alike_contexts_builds_one_context_bias_for_every_row_with_the_same_outputs_and_gradients(
        buckets, dictionary, monkeypatch):
    """Contexts without padding and with the same positions have the same context-block bias: the
    plan builds it once ([1, H, P, P]) and the attention broadcasts it; without relative positions
    the block needs no mask at all (None). With contiguous positions the appended block and the last
    layer's read columns read the context keys' bias from its windows. Hidden states equal the per-row
    bias's; in float64 every parameter's gradient (the bias table's included) matches the explicit-softmax path over one
    dense masked block."""
    from fairseq_pmlm.modules import transformer

    fast, ref = pair(len(dictionary), buckets)
    ni = alike_contexts_batch(dictionary, 3)["net_input"]
    p, B = ni["prefix_len"], ni["kinds"].size(0)
    assert p < ni["kinds"].size(1) and not (ni["kinds"][:, :p] == PAD).any()
    assert transformer.check_prefix_len(p, ni["kinds"], ni["positions"]).shared is True
    desc = TokenDescription(ni["kinds"], ni["steps"], ni["positions"])
    # shared, positions not taken as contiguous: the rule's bias over the first row
    shared = fast.attention_plan(desc, desc, torch.float32, p, transformer.ContextLayout(shared=True, contiguous=False))
    per_row = fast.attention_plan(desc, desc, torch.float32, p)
    if buckets is None:
        assert shared[0].bias is None and per_row[0].bias.all()
    else:
        assert shared[0].bias.shape == (1, 4, p, p) and per_row[0].bias.shape == (B, 4, p, p)
        assert torch.equal(shared[0].bias.expand(B, -1, -1, -1), per_row[0].bias)
    assert torch.equal(shared[1].bias, per_row[1].bias)
    want = hidden(fast, ni)
    with monkeypatch.context() as m:
        m.setattr(transformer, "check_prefix_len", lambda *a: transformer.ContextLayout(False, False))
        assert torch.equal(hidden(fast, ni), want)

    # positions contiguous too: the appended block and the last layer's read columns over the shared
    # context's keys from its windows (shared_context_bias), the same values
    built = []
    real = transformer.UniLMv2Transformer.shared_context_bias
    monkeypatch.setattr(transformer.UniLMv2Transformer, "shared_context_bias",
                        lambda self, *a: built.append(a[0].kinds.shape) or real(self, *a))
    assert transformer.check_prefix_len(p, ni["kinds"], ni["positions"]).contiguous is True
    assert torch.equal(fast.attention_plan(desc, desc, torch.float32, p, transformer.ContextLayout(True, True))[1].bias,
                       per_row[1].bias)
    read = transformer.ReadCells.of(ni["kinds"] != PAD).columns[:, :3]
    with torch.no_grad():
        got = fast(ni["src_tokens"], ni["positions"], ni["segments"], ni["kinds"], ni["steps"], prefix_len=p, read=read)
    assert torch.allclose(got, transformer.take_columns(want, read), atol=1e-6)
    T = ni["kinds"].size(1)
    assert built == ([] if buckets is None else [(B, T - p), (B, T - p), (B, 3)])

    assert assert_same_gradients(fast, ref, ni) > 10
    assert buckets is None or fast.rel_pos_bias.weight.grad.abs().max() > 0


def test_contexts_with_padding_or_other_positions_keep_a_bias_per_row(dictionary):
    """The context bias is shared only where every row's context is the same: one padded row, or
    one row's positions shifted, and each row gets its own."""
    from fairseq_pmlm.modules import transformer

    ni = random_batches(dictionary, 7, n_batches=1, size=3)[0]["net_input"]
    assert (ni["kinds"][:, : ni["prefix_len"]] == PAD).any()
    assert transformer.check_prefix_len(ni["prefix_len"], ni["kinds"], ni["positions"]).shared is False
    ni = alike_contexts_batch(dictionary, 4)["net_input"]
    positions = ni["positions"].clone()
    positions[1] += 1
    assert transformer.check_prefix_len(ni["prefix_len"], ni["kinds"], positions).shared is False
    assert transformer.check_prefix_len(ni["prefix_len"], ni["kinds"], ni["positions"]).shared is True


def test_under_bf16_autocast_a_shared_context_bias_trains_as_the_per_row_one(dictionary, monkeypatch):
    """Under autocast the shared bias is made in bf16 and its gradient summed over the batch in
    bf16: the hidden states equal the per-row bias's, and the bias table's gradient (summed in
    another order) agrees within bf16's rounding."""
    from fairseq_pmlm.modules import transformer

    ni = alike_contexts_batch(dictionary, 5, size=6)["net_input"]
    args = (ni["src_tokens"], ni["positions"], ni["segments"], ni["kinds"], ni["steps"])
    results = []
    for shared in (True, False):
        model = tiny_transformer(len(dictionary), 32).train()
        with monkeypatch.context() as m:
            if not shared:
                m.setattr(transformer, "check_prefix_len", lambda *a: transformer.ContextLayout(False, False))
            with torch.autocast("cpu", dtype=torch.bfloat16):
                torch.manual_seed(0)  # the same dropout masks
                h = model(*args, prefix_len=ni["prefix_len"])
            (h.float() * (ni["kinds"] != PAD).unsqueeze(-1)).square().sum().backward()
        results.append((h, model.rel_pos_bias.weight.grad))
    (h_shared, g_shared), (h_rows, g_rows) = results
    assert torch.equal(h_shared, h_rows)
    assert g_rows.abs().max() > 0
    assert (g_shared - g_rows).abs().max() <= 2e-2 * g_rows.abs().max(), (g_shared - g_rows).abs().max()


class _KernelLayoutGrad(torch.autograd.Function):
    """The identity, whose gradient comes out as CUDA's fused attention kernels give theirs: a
    [B, H, T, D] view of [B, T, H, D] memory."""

    @staticmethod
    def forward(ctx, t):
        return t.view_as(t)

    @staticmethod
    def backward(ctx, g):
        return g.transpose(1, 2).contiguous().transpose(1, 2)


def test_q_k_and_v_gradients_reach_the_projections_in_their_layout_with_no_copy(dictionary, monkeypatch):
    """A layer's q, k and v are [B, H, T, D] views of the projections' [B, T, H, D] outputs, cut into
    the plan's blocks. With gradients from the attention kernel as CUDA's give them, each gradient
    that reaches a projection's [B, T, H, D] output is contiguous there (its matmul reads it as it is,
    no copy), and the model's outputs and gradients are those of the plain path."""
    from fairseq_pmlm.modules.transformer import SelfAttention

    from helpers import forward_backward, without_dropout

    ni = random_batches(dictionary, 5, n_batches=1, size=4)[0]["net_input"]
    plain = without_dropout(tiny_transformer(len(dictionary), 32))
    want = forward_backward(plain, ni)
    fused = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention",
                        lambda q, k, v, **kw: fused(*map(_KernelLayoutGrad.apply, (q, k, v)), **kw))
    layouts = []

    def recording_split(self, x):
        B, T, _ = x.shape
        t = x.view(B, T, self.heads, self.head_dim)
        t.register_hook(lambda g: layouts.append(g.is_contiguous()))
        return t.transpose(1, 2)

    monkeypatch.setattr(SelfAttention, "_split", recording_split)
    model = without_dropout(tiny_transformer(len(dictionary), 32))
    assert ni["prefix_len"] < ni["kinds"].size(1)  # two blocks: the cut rows
    assert torch.equal(forward_backward(model, ni), want)
    assert layouts == [True] * 3 * len(model.layers)
    grads = dict(plain.named_parameters())
    for name, p in model.named_parameters():
        want_grad = grads[name].grad
        assert (p.grad is None) == (want_grad is None), name
        assert p.grad is None or torch.allclose(p.grad, want_grad, rtol=1e-5, atol=1e-7), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_a_shared_contiguous_contexts_bias_read_from_the_windows_is_the_rules_bias_and_gradient(dictionary, dtype):
    """``context_bias`` (a context shared by the batch at contiguous positions) equals the bias
    ``attention_bias`` builds for that block from its description, bit for bit, and so does the
    relative bias weights' gradient through it; its rows 8-aligned. Lengths that are and are not a
    multiple of 8, positions that do not start at 0, the model's last position."""
    from fairseq_pmlm.modules.attention_rule import CONTEXT

    model = tiny_transformer(len(dictionary), 32).to(dtype)
    limit = model.shape.max_positions
    for P, start in ((1, 0), (5, 0), (8, 3), (13, 40), (64, 0), (70, limit - 70)):
        positions = torch.arange(start, start + P).unsqueeze(0)
        desc = TokenDescription(torch.full((1, P), CONTEXT), torch.zeros(1, P, dtype=torch.long), positions)
        upstream = torch.randn(1, model.shape.encoder_attention_heads, P, P, dtype=dtype,
                               generator=torch.Generator().manual_seed(P))
        results = []
        for rule in (True, False):
            model.zero_grad()
            bias = model.attention_bias(desc, desc, dtype) if rule else model.context_bias(P, dtype, "cpu")
            (bias * upstream).sum().backward()
            results.append((bias.detach(), model.rel_pos_bias.weight.grad.clone()))
        (want, want_grad), (got, got_grad) = results
        assert got.shape == want.shape == (1, model.shape.encoder_attention_heads, P, P)
        assert torch.equal(got, want), (P, start)
        assert got.stride(-2) % 8 == 0 and got.stride(-1) == 1
        assert torch.equal(got_grad, want_grad), (P, start)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_a_block_over_a_shared_contiguous_context_and_appended_keys_has_the_rules_bias_and_gradient(dtype):
    """``shared_context_bias`` (the appended block's and the last layer's bias where the batch shares a
    context at contiguous positions: its keys read from the table's windows, the appended ones per
    pair) equals the bias ``attention_bias`` builds by the rule, bit for bit, with the relative bias
    weights' gradient (the same sums, maybe in another order); rows 8-aligned. Queries of every kind
    (appended rows, any columns a loss reads), contexts that start at 0 and do not, lengths that are
    and are not a multiple of 8, appended positions anywhere below the bound (padding at 0), no appended
    keys at all (AE alone's last layer)."""
    from fairseq_pmlm.modules.attention_rule import CONTEXT, ORIGINAL, PSEUDO

    model = tiny_transformer(300, 32).to(dtype)
    limit, H = model.shape.max_positions, model.shape.encoder_attention_heads
    g = torch.Generator().manual_seed(0)
    for P, start, A in ((1, 0, 3), (5, 0, 6), (8, 3, 5), (13, 40, 9), (64, 0, 16), (70, limit - 70, 11), (16, 2, 0)):
        B = 3
        kinds = torch.cat([torch.full((B, P), CONTEXT),
                           torch.tensor([PSEUDO, ORIGINAL, PAD])[torch.randint(0, 3, (B, A), generator=g)]], 1)
        steps = torch.cat([torch.zeros(B, P, dtype=torch.long), torch.randint(1, 4, (B, A), generator=g)], 1)
        steps[kinds == PAD] = 0
        positions = torch.cat([torch.arange(start, start + P).expand(B, P),
                               torch.randint(start, start + P, (B, A), generator=g)], 1)
        positions[kinds == PAD] = 0
        k = TokenDescription(kinds, steps, positions)
        read = torch.stack([torch.randperm(P + A, generator=g)[:4] if P + A >= 4 else torch.arange(P + A)
                            for _ in range(B)])
        for q in ([k.columns(P)] if A else []) + [k.take(read)]:
            upstream = torch.randn(B, H, q.kinds.size(1), P + A, dtype=dtype, generator=g)
            results = []
            for context in (None, P):
                model.zero_grad()
                bias = model.attention_bias(q, k, dtype, context)
                (bias.nan_to_num(neginf=0.0) * upstream).sum().backward()
                results.append((bias.detach(), model.rel_pos_bias.weight.grad.clone()))
            (want, want_grad), (got, got_grad) = results
            assert got.shape == want.shape and torch.equal(got, want), (P, start)
            assert got.stride(-2) % 8 == 0 and got.stride(-1) == 1
            tolerance = {torch.float16: 1e-2, torch.float32: 1e-5, torch.float64: 1e-12}[dtype]
            torch.testing.assert_close(got_grad, want_grad, rtol=tolerance, atol=tolerance)
