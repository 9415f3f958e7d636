"""The Triton kernel of the shared context block (fairseq_pmlm/modules/toeplitz_attention.py), run
by Triton's interpreter on the CPU: its output and every gradient, the bias table's included, are
plain attention's with the dense bias; its dropout draw is one draw in all three passes; a model
on the "triton" path trains as on SDPA; a failing kernel falls back with one log line."""
import logging
import math
import os

import pytest
import torch
from test_model import alike_contexts_batch

from fairseq_pmlm.arch import TransformerShape
from fairseq_pmlm.modules import toeplitz_attention as ta
from fairseq_pmlm.modules.attention_rule import PAD, TokenDescription
from fairseq_pmlm.modules.toeplitz_attention import expand
from fairseq_pmlm.modules.transformer import UniLMv2Transformer

from helpers import forward_backward, without_dropout

pytest.importorskip("triton", reason="Triton is in the suite's requirements (optional: the suite)")


PROBED = set()  # the cases whose probe passed, kept from test to test (the interpreter takes seconds a probe)


@pytest.fixture(autouse=True)
def interpreter(monkeypatch):
    """Triton's interpreter (conftest.py turns it on before Triton's first import, on a machine
    without a GPU), and a fresh record of failures and calls for each test."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("Triton's interpreter is off (conftest.py: this machine has a GPU)")
    monkeypatch.setattr(ta, "_state", {"failure": None, "checked": PROBED, "compiled": set(), "calls": 0,
                                      "told_unavailable": False})


def plain(q, k, v, table, keep=None, p=0.0):
    """softmax(q k^T / sqrt(D) + dense Toeplitz bias), dropout ``keep`` mask applied, times v."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1)) + ta.dense_bias(table, q.size(2))
    probs = scores.softmax(-1)
    if keep is not None:
        probs = probs * keep / (1 - p)
    return probs @ v


def qkv(B, H, N, D, dtype, T=None, seed=0):
    """q, k, v as the model hands them over: [B, H, N, D] views of a [B, T, 3 H D] projection (T >= N:
    the context block of a longer sequence), unit stride on D only."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T or N, H, 3 * D, generator=g).to(dtype)
    return [t.transpose(1, 2)[:, :, :N] for t in x.split(D, -1)]


def gradients(out_fn, inputs):
    inputs = [t.detach().requires_grad_() for t in inputs]
    out = out_fn(*inputs)
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    return out.detach(), torch.autograd.grad((out.double() * w).sum(), inputs)


def tiles(*shapes):
    """The same tiles for the three passes, or one (BM, BN) each."""
    shapes = shapes * 3 if len(shapes) == 1 else shapes
    return ta.Tiles(*(ta.Launch(*s) for s in shapes))


@pytest.mark.parametrize("dtype,B,H,N,D,T,t,tol", [
    (torch.float32, 2, 3, 50, 16, 50, tiles((16, 32)), 1e-5),   # the last tile of each axis partial
    (torch.float32, 1, 2, 37, 32, 45, tiles((32, 16)), 1e-5),   # BM > BN; the block of a longer sequence
    (torch.float32, 2, 2, 64, 16, 64, tiles((16, 16)), 1e-5),   # whole tiles
    (torch.float32, 1, 2, 150, 16, 150, tiles((32, 16), (8, 64), (16, 32)), 1e-5),  # each pass its own
    (torch.float16, 2, 2, 70, 16, 80, tiles((16, 16)), 2e-3),
])
def test_the_kernel_equals_plain_attention_with_the_dense_bias_output_and_every_gradient(
        dtype, B, H, N, D, T, t, tol):
    """Output and dq, dk, dv, dtable against float64 autograd of the dense-bias attention; errors
    relative to each tensor's largest entry (fp16: its rounding)."""
    q, k, v = qkv(B, H, N, D, dtype, T)
    table = torch.randn(H, 2 * N - 1, generator=torch.Generator().manual_seed(2))
    got, got_grads = gradients(lambda *a: ta.toeplitz_attention(*a, 0.0, t), (q, k, v, table))
    want, want_grads = gradients(plain, [t.double() for t in (q, k, v, table)])
    assert got.dtype == dtype and got.shape == (B, H, N, D)
    for name, a, b in [("output", got, want)] + list(zip(("dq", "dk", "dv", "dtable"), got_grads, want_grads)):
        assert a.shape == b.shape, name
        error = float((a.double() - b).abs().max() / b.abs().max())
        assert error < tol, (name, error)
    # every distance of the table reached some (query, key) pair and got a gradient
    assert (got_grads[3] != 0).all()


def kept(q, k, table, p, t, seed):
    """The kernel's dropout mask, read off its output: with v the one-hot columns of keys c0 ..
    c0+D-1, the output's column c is the dropped-out probability of key c0 + c (zero where dropped)."""
    B, H, N, D = q.shape
    keep = torch.zeros(B, H, N, N, dtype=torch.bool)
    for c0 in range(0, N, D):
        width = min(D, N - c0)
        v = torch.zeros(B, H, N, D)
        v[:, :, c0:c0 + width, :width] = torch.eye(width)
        torch.manual_seed(seed)
        keep[..., c0:c0 + width] = ta.toeplitz_attention(q, k, v, table, p, t)[..., :width] != 0
    return keep


@pytest.mark.parametrize("N,t", [(32, tiles((16, 16))), (133, ta.CUDA_TILES)], ids=["one tile shape", "CUDA tiles"])
def test_dropout_is_one_draw_in_the_forward_and_both_backward_passes(N, t):
    """The same seed (torch's generator) gives plain attention with the mask read off the output
    (``kept``), and the gradients of that, dtable's included: the dQ and dK/dV passes draw what
    the forward drew, also where the passes' tiles differ (the CUDA tiles: 64, 128 and 32 keys at a
    time) and the last tile is partial. About p of the probabilities are dropped; another seed
    draws another mask."""
    B, H, D, p = 2, 2, 16, 0.25
    q, k, v = qkv(B, H, N, D, torch.float32)
    table = torch.randn(H, 2 * N - 1, generator=torch.Generator().manual_seed(3))
    keep = kept(q, k, table, p, t, seed=7)
    assert abs(1 - keep.float().mean().item() - p) < 0.03
    assert not torch.equal(kept(q, k, table, p, t, seed=8), keep)

    def kernel(*a):
        torch.manual_seed(7)
        return ta.toeplitz_attention(*a, p, t)

    got, got_grads = gradients(kernel, (q, k, v, table))
    want, want_grads = gradients(lambda *a: plain(*a, keep=keep, p=p), [t.double() for t in (q, k, v, table)])
    for name, a, b in [("output", got, want)] + list(zip(("dq", "dk", "dv", "dtable"), got_grads, want_grads)):
        assert float((a.double() - b).abs().max() / b.abs().max()) < 1e-5, name


def test_the_expanded_bias_is_the_dense_bias_with_each_row_starting_16_aligned():
    """N = 500: a [H, 500, 512] buffer viewed as [H, 500, 500], so that the kernel's 16-byte loads of
    a row start aligned; its entries are the dense bias's, in the asked dtype."""
    table = torch.randn(3, 999)
    got = ta.expand(table, 500, torch.float16)
    assert got.shape == (3, 500, 500) and got.stride() == (500 * 512, 512, 1) and got.dtype == torch.float16
    assert torch.equal(got, ta.dense_bias(table, 500).half())
    assert ta.expand(table[:, :15], 8, torch.float32).stride() == (8 * 16, 16, 1)


def test_a_half_precision_table_gets_a_half_precision_gradient_equal_to_the_fp32_tables():
    """Under --fp16 the model's distance table is fp16: its gradient comes back in fp16 (autograd
    refuses another dtype), summed in fp32 first."""
    q, k, v = qkv(1, 2, 40, 16, torch.float16)
    table = torch.randn(2, 79, generator=torch.Generator().manual_seed(3))
    _, half = gradients(lambda *a: ta.toeplitz_attention(*a, t=tiles((16, 16))), (q, k, v, table.half()))
    _, full = gradients(lambda *a: ta.toeplitz_attention(*a, t=tiles((16, 16))), (q, k, v, table.half().float()))
    assert half[3].dtype == torch.float16
    assert float((half[3].float() - full[3]).abs().max() / full[3].abs().max()) < 2e-3


def test_a_table_of_the_wrong_width_is_refused_with_the_shapes():
    q, k, v = qkv(1, 2, 8, 16, torch.float32)
    with pytest.raises(ValueError, match=r"table \[H, 2N-1\].*table \(2, 16\)"):
        ta.toeplitz_attention(q, k, v, torch.zeros(2, 16))


def model_pair(dictionary):
    """The same tiny model (2 heads of 16: the kernel's smallest head size) on the "triton" and the
    "sdpa" paths, training mode, no dropout."""
    shape = TransformerShape(encoder_layers=2, encoder_embed_dim=32, encoder_ffn_embed_dim=64,
                             encoder_attention_heads=2)
    models = []
    for impl in ("triton", "sdpa"):
        torch.manual_seed(5)
        models.append(without_dropout(UniLMv2Transformer(shape, len(dictionary), impl)))
    models[0].load_state_dict(models[1].state_dict())
    return models


def trained(model, ni):
    """``forward_backward``'s hidden states, and the gradients it left."""
    h = forward_backward(model, ni)
    return h, {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def test_a_model_on_the_triton_path_trains_as_on_sdpa_and_the_kernel_serves_every_layers_context_block(
        dictionary, monkeypatch):
    """A batch of alike contexts (shared, contiguous positions): hidden states and every parameter's
    gradient, the relative-position weights' included, agree with the SDPA path; the kernel served
    one call per layer (the appended block stays on SDPA), the layers sharing one expanded bias."""
    triton_model, sdpa_model = model_pair(dictionary)
    ni = alike_contexts_batch(dictionary, 3, size=3, n1=20, n2=40)["net_input"]
    expansions = []
    monkeypatch.setattr(ta, "expand", lambda *a: expansions.append(a[1:]) or expand(*a))
    h, grads = trained(triton_model, ni)
    grads = {n: g.clone() for n, g in grads.items()}
    assert ta.calls() == len(triton_model.layers) and ta.failure() is None
    expansions.clear()  # those of the first call's probe and backward compile, on their own inputs
    forward_backward(triton_model, ni)
    assert len(expansions) == 1, expansions
    h_ref, grads_ref = trained(sdpa_model, ni)
    real = ni["kinds"] != PAD
    assert (h[real] - h_ref[real]).abs().max() < 1e-5
    assert grads.keys() == grads_ref.keys() and "rel_pos_bias.weight" in grads
    for name, g in grads.items():
        assert torch.allclose(g, grads_ref[name], atol=1e-6, rtol=1e-4), name


def test_the_plan_hands_the_kernel_only_a_shared_context_with_contiguous_positions(dictionary):
    """Positions shifted by one in every row: still shared and contiguous (the kernel's bias is
    of distances); a gap in them: shared but not Toeplitz, so the block's bias is built as before."""
    model, _ = model_pair(dictionary)
    ni = alike_contexts_batch(dictionary, 4, size=2)["net_input"]
    P = ni["prefix_len"]
    for shift, toeplitz in ((1, True), (None, False)):
        positions = ni["positions"].clone()
        if shift:
            positions += shift
        else:
            positions[:, P // 2:] += 3  # a gap inside the context (and after it)
        ni_b = dict(ni, positions=positions)
        trained(model, ni_b)
        assert (ta.calls() > 0) == toeplitz
        ta._state["calls"] = 0
        from fairseq_pmlm.modules.transformer import check_prefix_len
        layout = check_prefix_len(P, ni["kinds"], positions)
        assert layout.shared and layout.contiguous == toeplitz
        desc = TokenDescription(ni["kinds"], ni["steps"], positions)
        uses = model.uses_toeplitz(layout, desc.kinds.device)
        plan = model.attention_plan(desc, desc, torch.float32, P, layout, uses)
        assert isinstance(plan[0].bias, ta.ToeplitzBias) == toeplitz


def test_a_kernel_that_fails_here_falls_back_to_sdpa_with_one_log_line_and_the_same_results(
        dictionary, monkeypatch, caplog):
    triton_model, sdpa_model = model_pair(dictionary)
    ni = alike_contexts_batch(dictionary, 6, size=2)["net_input"]

    def broken(*a):
        raise RuntimeError("out of resource: shared memory\nsecond line")

    monkeypatch.setattr(ta, "_probe", broken)
    ta._state["checked"] = set()  # not yet probed here
    with caplog.at_level(logging.WARNING, logger=ta.__name__):
        h, grads = trained(triton_model, ni)
        trained(triton_model, ni)
    lines = [r.getMessage() for r in caplog.records if r.name == ta.__name__]
    assert lines == ["the Toeplitz attention kernel failed on this machine, using SDPA for the rest of the run: "
                     "RuntimeError: out of resource: shared memory"]
    assert ta.calls() == 0 and not ta.available(torch.device("cpu"))
    h_ref, grads_ref = trained(sdpa_model, ni)
    assert torch.equal(h, h_ref)


def test_a_backward_kernel_that_fails_to_compile_falls_back_in_the_forward_before_any_real_backward(
        dictionary, monkeypatch, caplog):
    """The backward kernels compile at the first backward of each input layout, where nothing could
    fall back: the first forward of each layout runs one on copies of its inputs. A dQ kernel that
    cannot launch is caught there (one log line), the layers go on on SDPA, and training gives SDPA's
    results; the parameters' gradients are touched only by the real backward."""
    from fairseq_pmlm.modules import toeplitz_kernels

    triton_model, sdpa_model = model_pair(dictionary)
    ni = alike_contexts_batch(dictionary, 9, size=2)["net_input"]

    class Broken:
        def __getitem__(self, grid):
            raise RuntimeError("out of resource: registers")

    # as if the probe had passed (it would catch this kernel too): here the layout's check must
    ta._state["checked"] = PROBED | {("cpu", torch.float32, 16, False)}
    monkeypatch.setattr(toeplitz_kernels, "toeplitz_attention_bwd_dq", Broken())
    with caplog.at_level(logging.WARNING, logger=ta.__name__):
        h, grads = trained(triton_model, ni)
    assert [r.getMessage() for r in caplog.records if r.name == ta.__name__] == [
        "the Toeplitz attention kernel failed on this machine, using SDPA for the rest of the run: "
        "RuntimeError: out of resource: registers"]
    assert ta.calls() == 0
    h_ref, grads_ref = trained(sdpa_model, ni)
    assert torch.equal(h, h_ref) and grads.keys() == grads_ref.keys()
    assert all(torch.equal(g, grads_ref[n]) for n, g in grads.items())


def test_the_probe_passes_the_kernel_here_and_catches_a_wrong_one(monkeypatch):
    """The check before a first call: the kernel as it is passes; a kernel whose bias is read one
    distance off is refused as wrong results."""
    ta._probe(torch.device("cpu"), torch.float32, 16, dropout=True)
    monkeypatch.setattr(ta, "dense_bias", lambda table, N: torch.roll(
        table[:, torch.arange(N)[None, :] - torch.arange(N)[:, None] + N - 1], 1, -1))
    with pytest.raises(RuntimeError, match="wrong results"):
        ta._probe(torch.device("cpu"), torch.float32, 16, dropout=False)


def test_without_the_interpreter_the_cpu_keeps_sdpa(dictionary, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET")
    assert not ta.available(torch.device("cpu"))
    triton_model, sdpa_model = model_pair(dictionary)
    ni = alike_contexts_batch(dictionary, 8, size=2)["net_input"]
    h, _ = trained(triton_model, ni)
    assert ta.calls() == 0
    assert torch.equal(h, trained(sdpa_model, ni)[0])
