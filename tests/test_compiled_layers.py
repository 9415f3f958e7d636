"""``--compile-layers`` (modules/compiled_layers.py): compiled layers compute what the eager ones do,
a machine where compiling fails runs them eagerly with one warning, only training on a CUDA device
takes them. Here, on the CPU, the layers are traced as on a GPU (dynamo, AOT autograd, the padding
and the static shapes) with the "aot_eager" backend, which generates no code: the CPU's own
compiled code is not what a GPU runs (and costs ~25 s of compiling)."""
import logging

import numpy as np
import pytest
import torch

from fairseq_pmlm.modules import compiled_layers
from fairseq_pmlm.modules.attention_rule import PAD

from helpers import collate, example, forward_backward, random_context, tiny_transformer, without_dropout

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def fresh_state(monkeypatch):
    """This test's own compiled function and failure, none of another test's."""
    monkeypatch.setattr(compiled_layers, "_state", {"compiled": None, "failure": None, "said": False})


@pytest.fixture
def traced_on_cpu(fresh_state, monkeypatch):
    """The CPU takes the compiled path, traced without generating code."""
    monkeypatch.setattr(compiled_layers, "DEVICES", ("cuda", "cpu"))
    monkeypatch.setattr(compiled_layers, "BACKEND", "aot_eager")


def batch(d, seed=0, size=3):
    rng = np.random.default_rng(seed)
    samples = []
    for _ in range(size):
        ctx, seg, maskable = random_context(rng, d, int(rng.integers(8, 20)), int(rng.integers(8, 20)))
        samples.append(example(int(rng.integers(1 << 30)), ctx, seg, maskable, d, "ae+par", mask_prob=0.3))
    return collate(samples, d)["net_input"]


def twins(d, compiled=True):
    """(eager, compiled) tiny models with the same weights, training, no dropout (so that both see
    the same numbers)."""
    models = [tiny_transformer(len(d), 32, "sdpa", seed=5) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    models[1].compile_layers = compiled
    return [without_dropout(m) for m in models]


def assert_same_gradients(eager, compiled):
    for (name, p), q in zip(eager.named_parameters(), compiled.parameters()):
        assert (p.grad is None) == (q.grad is None), name
        if p.grad is not None:
            assert torch.allclose(p.grad, q.grad, atol=1e-5, rtol=1e-4), name


def test_compiled_layers_give_the_eager_layers_hidden_states_and_gradients(dictionary, traced_on_cpu, monkeypatch):
    """Over two batches of lengths that are not multiples of compiled_layers.ALIGN (63, and 61: the
    same rows less their last two appended columns): the PAD columns the compiled path adds change
    no real token's output or gradient, and both lengths run as 64 columns, one compiled graph."""
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    calls = []
    run = compiled_layers.run
    monkeypatch.setattr(compiled_layers, "run", lambda *a: calls.append(1) or run(*a))
    eager, compiled = twins(dictionary)
    lengths = set()
    full = batch(dictionary, 0)
    for ni in (full, {k: v[:, :-2] if torch.is_tensor(v) else v for k, v in full.items()}):
        lengths.add(ni["kinds"].size(1))
        for m in (eager, compiled):
            m.zero_grad()
        want, got = forward_backward(eager, ni), forward_backward(compiled, ni)
        real = ni["kinds"] != PAD
        assert got.shape == want.shape and (got[real] - want[real]).abs().max() < 1e-5
        assert_same_gradients(eager, compiled)
        assert compiled.rel_pos_bias.weight.grad.abs().sum() > 0  # the table's gradient passes the compiled layers
    assert len(lengths) == 2 and any(t % compiled_layers.ALIGN for t in lengths), lengths
    assert compiled_layers.failure() is None and compiled_layers._state["compiled"] is not None
    assert len(calls) == 2 * len(compiled.layers)  # every layer went through the compiled function
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs == 1  # one length, one graph


def test_with_compiled_layers_the_last_runs_eagerly_for_the_read_columns_and_gives_the_eager_models_numbers(
        dictionary, traced_on_cpu, monkeypatch):
    """The last layer computes the read columns alone (``ReadCells``), a shape of its own each batch:
    among compiled layers (static shapes, padded columns) it runs eagerly. The same outputs and
    gradients as the eager model's."""
    from fairseq_pmlm.modules.transformer import ReadCells

    calls = []
    run = compiled_layers.run
    monkeypatch.setattr(compiled_layers, "run", lambda layer, *a: calls.append(layer) or run(layer, *a))
    eager, compiled = twins(dictionary)
    ni = batch(dictionary, 1)
    mask = ni["kinds"] != PAD
    mask[:, 1::3] = False
    read = ReadCells.of(mask)
    args = (ni["src_tokens"], ni["positions"], ni["segments"], ni["kinds"], ni["steps"])
    outs = []
    for m in (eager, compiled):
        out = m(*args, prefix_len=ni["prefix_len"], read=read.columns).flatten(0, 1).index_select(0, read.index)
        (out * torch.randn(out.shape, generator=torch.Generator().manual_seed(0))).sum().backward()
        outs.append(out.detach())
    assert outs[0].shape == (int(mask.sum()), 32) and (outs[0] - outs[1]).abs().max() < 1e-5
    assert_same_gradients(eager, compiled)
    assert compiled_layers._state["compiled"] is not None and calls == list(compiled.layers[:-1])


def test_a_machine_where_compiling_fails_runs_the_layers_eagerly_with_one_warning(dictionary, traced_on_cpu,
                                                                                  monkeypatch, caplog):
    def no_compiler(fn, **options):
        def fails(*args):
            raise RuntimeError("InvalidCxxCompiler: no working C++ compiler found\n(details)")
        return fails

    monkeypatch.setattr(torch, "compile", no_compiler)
    eager, compiled = twins(dictionary)
    ni = batch(dictionary)
    with caplog.at_level(logging.WARNING):
        want = forward_backward(eager, ni)
        for _ in range(2):  # the run goes on, eagerly, and says so once
            compiled.zero_grad()
            got = forward_backward(compiled, ni)
            assert torch.allclose(got, want, atol=1e-6)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "running them eagerly" in warnings[0] and "InvalidCxxCompiler" in warnings[0]
    assert "\n" not in warnings[0]
    assert isinstance(compiled_layers.failure(), RuntimeError)


def test_evaluation_and_decoding_run_the_layers_eagerly(dictionary, traced_on_cpu, monkeypatch):
    monkeypatch.setattr(compiled_layers, "run", lambda *a: pytest.fail("compiled outside training"))
    _, compiled = twins(dictionary)
    compiled.eval()
    ni = batch(dictionary)
    with torch.no_grad():
        compiled(ni["src_tokens"], ni["positions"], ni["segments"], ni["kinds"], ni["steps"],
                 prefix_len=ni["prefix_len"])


def test_on_the_cpu_the_flag_runs_the_layers_eagerly_and_says_so_once(dictionary, fresh_state, monkeypatch, caplog):
    monkeypatch.setattr(compiled_layers, "run", lambda *a: pytest.fail("compiled on the CPU"))
    eager, compiled = twins(dictionary)
    ni = batch(dictionary)
    with caplog.at_level(logging.WARNING):
        want = forward_backward(eager, ni)
        for _ in range(2):
            assert torch.equal(forward_backward(compiled, ni), want)  # the same path, no padding
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["--compile-layers: the layers compile on CUDA devices only; on cpu they run eagerly"]


def test_a_backward_that_fails_to_compile_falls_back_in_the_forward_not_in_the_backward(dictionary, traced_on_cpu,
                                                                                        monkeypatch, caplog):
    """torch compiles a static-shape backward lazily, at the first backward, where no fallback could catch
    its failure: the module has it compiled with the forward, so the update goes on, eagerly."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def no_backward(graph, example_inputs):
        raise RuntimeError("backward codegen failed")

    monkeypatch.setattr(compiled_layers, "BACKEND",
                        aot_autograd(fw_compiler=lambda g, _: make_boxed_func(g), bw_compiler=no_backward))
    eager, compiled = twins(dictionary)
    ni = batch(dictionary)
    with caplog.at_level(logging.WARNING):
        want, got = forward_backward(eager, ni), forward_backward(compiled, ni)
    assert torch.allclose(got, want, atol=1e-6)
    for p, q in zip(eager.parameters(), compiled.parameters()):
        assert (p.grad is None) == (q.grad is None) and (p.grad is None or torch.allclose(p.grad, q.grad, atol=1e-6))
    warnings = [r.getMessage() for r in caplog.records if r.name == compiled_layers.__name__]
    assert len(warnings) == 1 and "backward codegen failed" in warnings[0], warnings


def test_under_bf16_autocast_compiled_layers_trace_the_bf16_layer_norm_and_give_the_eager_outputs(
        dictionary, traced_on_cpu):
    """The model's LayerNorm leaves autocast inside the layer (to write the stream in bf16): the
    compiled path traces it without falling back, and matches the eager layers within bf16's rounding."""
    eager, compiled = twins(dictionary)
    ni = batch(dictionary)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want, got = forward_backward(eager, ni), forward_backward(compiled, ni)
    real = ni["kinds"] != PAD
    assert compiled_layers.failure() is None and compiled_layers._state["compiled"] is not None
    assert got.dtype == want.dtype == torch.bfloat16
    assert (got[real].float() - want[real].float()).abs().max() <= 3e-2 * want[real].float().abs().max()
