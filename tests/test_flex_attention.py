"""The flex attention path (fairseq_pmlm/modules/flex_attention.py, docs/DESIGN.md §2) against
the SDPA path it replaces on CUDA. On the CPU torch compiles flex's forward but has no flex
backward, so the gradient is checked on the score_mod/mask_mod math itself: evaluated densely
(elementwise over broadcast index grids) it is the bias flex's kernel adds, and its gradient
reaches the distance table through autograd as the kernel's does."""
import logging

import pytest
import torch
from test_model import random_batches

from fairseq_pmlm.modules import flex_attention
from fairseq_pmlm.modules.attention_rule import PAD, TokenDescription, attention_allowed, pair_allowed
from fairseq_pmlm.modules.transformer import reference_attention

from helpers import hidden, tiny_transformer

pytestmark = pytest.mark.usefixtures("one_thread")


def description(ni):
    return TokenDescription(ni["kinds"], ni["steps"], ni["positions"])


def dense_mods(plan, B, H):
    """(bias [B, H, T, T], allowed [B, 1, T, T]) of a FlexPlan's score_mod and mask_mod, at the
    padded length: the values flex's kernel adds and keeps, per (query, key)."""
    T = plan.padded
    b = torch.arange(B)[:, None, None, None]
    h = torch.arange(H)[None, :, None, None]
    q = torch.arange(T)[None, None, :, None]
    k = torch.arange(T)[None, None, None, :]
    bias = plan.score_mod(torch.zeros(()), b, h, q, k)
    allowed = plan.block_mask.mask_mod(b, torch.zeros_like(h[:, :1]), q, k)
    return bias, allowed


@pytest.fixture(autouse=True)
def flex_not_failed(monkeypatch):
    """Each test starts with flex on, as a new process does: a test where it failed (a wrong CPU
    kernel, a fake) leaves no trace in the next."""
    monkeypatch.setitem(flex_attention._state, "failure", None)


def skip_where_cpu_flex_is_wrong():
    """Skip a test of the flex path where torch's compiled CPU kernel gave wrong results (the module's
    check before a kernel's first call said so; a run there falls back to SDPA with one warning), with
    the check's reason shown."""
    if isinstance(flex_attention.failure(), flex_attention.WrongResults):
        pytest.skip(str(flex_attention.failure()))


def compile_errors():
    """The error lines of flex's failure (a compiler's output is long)."""
    text = str(flex_attention._state["failure"])
    return "\n".join(line for line in text.splitlines() if "error" in line.lower())[:3000]


def test_the_rule_elementwise_is_the_dense_rule(dictionary):
    (batch, *_) = random_batches(dictionary, 5)
    ni = batch["net_input"]
    kinds, steps = ni["kinds"], ni["steps"]
    T = kinds.size(1)
    q, k = torch.arange(T)[:, None], torch.arange(T)[None, :]
    for b in range(kinds.size(0)):
        got = pair_allowed(kinds[b, q], steps[b, q], kinds[b, k], steps[b, k])
        assert torch.equal(got, attention_allowed(kinds[b], steps[b], kinds[b], steps[b]))


def test_compiled_flex_forward_gives_the_sdpa_paths_hidden_states_on_padded_batches(dictionary):
    sdpa = tiny_transformer(len(dictionary), 32, "sdpa", seed=3)
    flex = tiny_transformer(len(dictionary), 32, "flex", seed=3)
    flex_attention._state["failure"] = None
    for batch in random_batches(dictionary, 1, n_batches=2):
        ni = batch["net_input"]
        real = ni["kinds"] != PAD
        with torch.no_grad():
            assert flex.uses_flex(torch.zeros(1), None)
        want, got = hidden(sdpa, ni), hidden(flex, ni)
        skip_where_cpu_flex_is_wrong()
        assert flex_attention.available(), compile_errors()
        assert (got[real] - want[real]).abs().max() < 1e-5


def test_flex_in_fp16_is_as_close_to_the_fp32_result_as_sdpa_in_fp16(dictionary):
    """The table stays fp32 inside the kernel (SDPA's bias is cast to fp16): no further from fp32."""
    sdpa = tiny_transformer(len(dictionary), 32, "sdpa", seed=3)
    flex = tiny_transformer(len(dictionary), 32, "flex", seed=3)
    flex_attention._state["failure"] = None
    (batch, *_) = random_batches(dictionary, 7, n_batches=1)
    ni = batch["net_input"]
    real = ni["kinds"] != PAD
    want = hidden(sdpa, ni)
    got_sdpa, got_flex = hidden(sdpa.half(), ni).float(), hidden(flex.half(), ni).float()
    skip_where_cpu_flex_is_wrong()
    assert flex_attention.available(), compile_errors()
    sdpa_error = (got_sdpa[real] - want[real]).abs().max()
    assert 0 < sdpa_error < 0.02
    assert (got_flex[real] - want[real]).abs().max() <= 1.5 * sdpa_error


def test_the_flex_plans_bias_and_mask_are_the_sdpa_plans_and_its_table_gradient_equal(dictionary):
    """float64: the dense evaluation of score_mod/mask_mod, as attention with autograd, gives
    the SDPA plan's output and the same gradient of the relative bias weights."""
    model = tiny_transformer(len(dictionary), 32, "sdpa", seed=3).double()
    (batch, *_) = random_batches(dictionary, 2, n_batches=1)
    ni = batch["net_input"]
    desc = description(ni)
    B, T = ni["kinds"].shape
    H, D = model.shape.encoder_attention_heads, 8
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, H, T, D, generator=gen, dtype=torch.float64) for _ in range(3))
    weight = model.rel_pos_bias.weight

    def sdpa_side():
        ys = [reference_attention(q[:, :, s:e], k[:, :, :ke], v[:, :, :ke], bias)
              for s, e, ke, bias in model.attention_plan(desc, desc, torch.float64, ni["prefix_len"])]
        return torch.cat(ys, 2)

    def flex_side():
        plan = model.flex_plan(desc, torch.float64)
        bias, allowed = dense_mods(plan, B, H)
        bias = bias[:, :, :T, :T].masked_fill(~allowed[:, :, :T, :T], float("-inf"))
        return reference_attention(q, k, v, bias)

    grads = []
    for side in (sdpa_side, flex_side):
        weight.grad = None
        out = side()
        (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)).sum().backward()
        grads.append((out.detach(), weight.grad.clone()))
    (want, want_grad), (got, got_grad) = grads
    assert want_grad.abs().sum() > 0
    assert (got - want).abs().max() < 1e-12
    assert (got_grad - want_grad).abs().max() < 1e-12


def test_the_padded_columns_are_visible_to_nobody_and_pad_to_the_block_size(dictionary):
    model = tiny_transformer(len(dictionary), 32, "sdpa")
    (batch, *_) = random_batches(dictionary, 3, n_batches=1)
    ni = batch["net_input"]
    plan = model.flex_plan(description(ni), torch.float32)
    T = ni["kinds"].size(1)
    assert plan.padded % flex_attention.ALIGN == 0 and plan.padded >= T
    _, allowed = dense_mods(plan, ni["kinds"].size(0), 1)
    assert not allowed[..., T:].any()


def test_a_flex_failure_logs_one_line_and_gives_the_sdpa_result(dictionary, monkeypatch, caplog):
    sdpa = tiny_transformer(len(dictionary), 32, "sdpa", seed=3)
    flex = tiny_transformer(len(dictionary), 32, "flex", seed=3)

    def broken(*args, **kwargs):
        raise RuntimeError("out of resource: shared memory\nsecond line")

    monkeypatch.setitem(flex_attention._state, "compiled", broken)
    monkeypatch.setitem(flex_attention._state, "failure", None)
    batches = random_batches(dictionary, 4, n_batches=2)
    with caplog.at_level(logging.WARNING, logger=flex_attention.__name__):
        for batch in batches:
            ni = batch["net_input"]
            real = ni["kinds"] != PAD
            want, got = hidden(sdpa, ni), hidden(flex, ni)
            assert torch.equal(got[real], want[real])
    lines = [r for r in caplog.records if r.name == flex_attention.__name__]
    assert len(lines) == 1 and "second line" not in lines[0].getMessage()
    assert "out of resource" in lines[0].getMessage()
    assert not flex.uses_flex(torch.zeros(1), None)  # remembered: later batches go straight to SDPA


def test_flex_is_not_taken_where_it_cannot_run(dictionary):
    model = tiny_transformer(len(dictionary), 32, "flex")
    x = torch.zeros(1)
    assert not model.uses_flex(x, past=object())  # decoding steps: cached keys
    model.train()
    with torch.no_grad():
        assert not model.uses_flex(x, None)  # training with attention dropout
    model.eval()
    assert not model.uses_flex(x, None)  # CPU backward
    auto = tiny_transformer(len(dictionary), 32, "auto")
    with torch.no_grad():
        assert not auto.uses_flex(x, None)  # "auto": CUDA only


def test_auto_never_takes_flex_and_flex_asked_for_takes_it_on_cuda_also_with_gradient(dictionary):
    """Measured on an H200: flex was slower than SDPA in training (1.9x an update) and forward only (3.3x)."""
    auto = tiny_transformer(len(dictionary), 32, "auto").eval()
    cuda_like = type("CudaLike", (), {"is_cuda": True})()
    assert auto.uses_flex(cuda_like, None) is False
    with torch.no_grad():
        assert auto.uses_flex(cuda_like, None) is False
    forced = tiny_transformer(len(dictionary), 32, "flex").eval()
    assert forced.uses_flex(cuda_like, None) is True


class _BackwardFails(torch.autograd.Function):
    """Flex's forward as the identity on q, with a backward that fails as an uncompilable kernel would."""

    @staticmethod
    def forward(ctx, q):
        return q.clone()

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("No valid triton configs: out of resource (backward)")


def test_a_backward_that_fails_to_compile_falls_back_at_the_forward_with_one_log_line(dictionary, monkeypatch,
                                                                                     caplog):
    model = tiny_transformer(len(dictionary), 32, "flex")
    (batch, *_) = random_batches(dictionary, 6, n_batches=1)
    ni = batch["net_input"]
    plan = model.flex_plan(description(ni), torch.float32)
    monkeypatch.setitem(flex_attention._state, "compiled", lambda q, k, v, **kwargs: _BackwardFails.apply(q))
    monkeypatch.setitem(flex_attention._state, "failure", None)
    monkeypatch.setattr(flex_attention.FlexPlan, "check_cpu", lambda self, q: None)  # the fake is no attention
    monkeypatch.setitem(flex_attention._state, "backward_checked", set())
    B, T = ni["kinds"].shape
    q, k, v = (torch.randn(B, 4, T, 8, requires_grad=True) for _ in range(3))
    with caplog.at_level(logging.WARNING, logger=flex_attention.__name__):
        assert plan.attend(q, k, v) is None  # caught here, not at the training step's backward
        assert plan.attend(q, k, v) is None
    assert len([r for r in caplog.records if r.name == flex_attention.__name__]) == 1
    assert q.grad is None and model.rel_pos_bias.weight.grad is None  # the check touched no gradient


def test_the_backward_is_compiled_once_per_input_shape(dictionary, monkeypatch):
    model = tiny_transformer(len(dictionary), 32, "flex")
    (batch, *_) = random_batches(dictionary, 6, n_batches=1)
    ni = batch["net_input"]
    plan = model.flex_plan(description(ni), torch.float32)
    calls = []

    def compiled(q, k, v, **kwargs):
        calls.append(q.shape)
        return q * 2

    monkeypatch.setitem(flex_attention._state, "compiled", compiled)
    monkeypatch.setitem(flex_attention._state, "failure", None)
    monkeypatch.setitem(flex_attention._state, "backward_checked", set())
    monkeypatch.setattr(flex_attention.FlexPlan, "check_cpu", lambda self, q: None)  # the fake is no attention
    B, T = ni["kinds"].shape
    for batch_size in (B, B, B - 1):
        q, k, v = (torch.randn(batch_size, 4, T, 8, requires_grad=True) for _ in range(3))
        assert plan.attend(q, k, v) is not None
    assert len(calls) == 5  # the first call of each shape runs twice (the check), the repeat once
    assert q.grad is None


def test_a_cpu_kernel_that_gives_wrong_results_is_caught_by_the_check_and_falls_back(dictionary, monkeypatch, caplog):
    """torch 2.13's compiled CPU flex can be wrong (seen where its compile cache was written under another
    ATEN_CPU_CAPABILITY): the check before a kernel's first CPU call catches one that runs but misreads
    its mask/score_mod."""
    sdpa = tiny_transformer(len(dictionary), 32, "sdpa", seed=3)
    flex = tiny_transformer(len(dictionary), 32, "flex", seed=3)

    def wrong(q, k, v, **kwargs):  # attention without its mask and score_mod: runs, and is wrong
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    monkeypatch.setitem(flex_attention._state, "compiled", wrong)
    monkeypatch.setitem(flex_attention._state, "failure", None)
    monkeypatch.setitem(flex_attention._state, "cpu_checked", set())
    (batch, *_) = random_batches(dictionary, 4, n_batches=1)
    ni = batch["net_input"]
    real = ni["kinds"] != PAD
    with caplog.at_level(logging.WARNING, logger=flex_attention.__name__):
        want, got = hidden(sdpa, ni), hidden(flex, ni)
    assert torch.equal(got[real], want[real])
    (line,) = [r.getMessage() for r in caplog.records if r.name == flex_attention.__name__]
    assert "WrongResults: compiled flex_attention gives wrong results on this CPU" in line
