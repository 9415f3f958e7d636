"""Half-precision forward passes on CPU tensors: finite everywhere, close to float32.

Four ways of running the model in half precision, as the GPU paths do:
  fp16 / bf16: weights and activations cast (fairseq's --fp16 / --bf16 cast the model);
  fp16 autocast: fp32 weights under torch.autocast(float16) (fairseq's --amp);
  bf16 autocast: fp32 weights under torch.autocast(bfloat16) (the plugin's --bf16-autocast).
Cases that break half precision: padded rows, a row of padding only (no key may be seen),
long sequences, relative-position biases far beyond fp16's range. Paths: pre-training
batches through the fused (sdpa) and the reference attention, and incremental decoding.

``python tests/test_half_precision.py`` prints the relative-error table of docs/BENCHMARKS.md.
"""
import contextlib
import copy

import numpy as np
import pytest
import torch
import torch.nn as nn
from fairseq.data import data_utils

from fairseq_pmlm.models.unilmv2 import UniLMv2Config, UniLMv2Model
from fairseq_pmlm.modules.attention_rule import PAD

from helpers import collate, example, make_dictionary, random_context

pytestmark = pytest.mark.usefixtures("one_thread")

MODES = {  # name: (dtype the model is cast to, autocast dtype)
    "fp16": (torch.float16, None),
    "bf16": (torch.bfloat16, None),
    "fp16 autocast": (None, torch.float16),
    "bf16 autocast": (None, torch.bfloat16),
}
# relative error (L2 over the real tokens) allowed against float32, about 4x the measured
# maximum (fp16 keeps 11 significant bits, bf16 8). Relative-position biases of +-1e3 and
# beyond cannot be represented finely in half precision (bf16's spacing at 1000 is 8): those
# cases must stay finite and within LARGE_BIAS_TOLERANCE.
TOLERANCE = {"fp16": 3e-3, "bf16": 2e-2, "fp16 autocast": 1e-3, "bf16 autocast": 1e-2}
LARGE_BIAS_TOLERANCE = 0.2
PATHS = ["pre-training, fused (sdpa)", "pre-training, reference", "decoding, fused encoder",
         "decoding, reference"]


def model(d, impl, rel_scale=None, seed=0):
    """A 2-layer model with weights ~N(0, 0.1): sharper attention than the 0.02 init, so the
    rounding of the scores matters. ``rel_scale``: relative-position biases ~U(+-rel_scale)."""
    torch.manual_seed(seed)
    cfg = UniLMv2Config(encoder_layers=2, encoder_embed_dim=32, encoder_ffn_embed_dim=64,
                        encoder_attention_heads=4, attention_impl=impl)
    m = UniLMv2Model(cfg, d).eval()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                mod.weight.normal_(0.0, 0.1)
        if rel_scale is not None:
            m.transformer.rel_pos_bias.weight.uniform_(-rel_scale, rel_scale)
    return m


def in_mode(m, mode, fn):
    """``fn(model)`` under ``mode`` (None: float32), on a copy of the model; output in fp32."""
    cast, auto = MODES[mode] if mode else (None, None)
    m = copy.deepcopy(m).to(cast) if cast else m
    ctx = torch.autocast("cpu", dtype=auto) if auto else contextlib.nullcontext()
    with torch.no_grad(), ctx:
        return fn(m).float()


def pretraining_batch(d, seed, lengths, padding_row=False):
    rng = np.random.default_rng(seed)
    samples = []
    for n1, n2 in lengths:
        ctx, seg, maskable = random_context(rng, d, n1, n2)
        samples.append(example(int(rng.integers(1 << 30)), ctx, seg, maskable, d, "ae+par"))
    ni = collate(samples, d)["net_input"]
    if padding_row:  # a row with no token at all: no query of it may see any key
        for k in ("kinds", "steps", "segments", "positions"):
            ni[k][0] = 0
        ni["src_tokens"][0] = d.pad()
    return ni


def decoding_batch(d, seed, src_lens, tgt_len=6):
    rng = np.random.default_rng(seed)
    srcs = [torch.tensor([d.bos()] + rng.integers(4, 100, n).tolist() + [d.eos()]) for n in src_lens]
    tgts = [torch.tensor(rng.integers(4, 100, tgt_len).tolist() + [d.eos()]) for _ in src_lens]
    src = data_utils.collate_tokens(srcs, d.pad())
    prev = data_utils.collate_tokens(tgts, d.pad(), d.eos(), move_eos_to_beginning=True)
    return src, torch.tensor([len(s) for s in srcs]), prev


def hidden_states(ni):
    return lambda m: m(**ni, features_only=True)[0]


def incremental_log_probs(src, lens, prev):
    """Encode once, then one decoder call per target step with the key/value cache."""
    def fn(m):
        enc, state = m.encoder(src, lens), {}
        steps = [m.decoder(prev[:, : t + 1], enc, incremental_state=state)[0].float().log_softmax(-1)
                 for t in range(prev.size(1))]
        return torch.cat(steps, 1)
    return fn


def cases(d):
    """(path, case, model, fn, real) for every path and case."""
    out = []
    padded = [(3, 5), (20, 30), (10, 4)]
    pre = {
        "padded rows": (pretraining_batch(d, 1, padded), None),
        "a row of padding only": (pretraining_batch(d, 2, padded, padding_row=True), None),
        "long (512 tokens)": (pretraining_batch(d, 3, [(250, 257), (100, 60)]), None),
        "relative bias +-1e3": (pretraining_batch(d, 4, padded), 1e3),
        "relative bias +-1e5": (pretraining_batch(d, 5, padded), 1e5),
    }
    for impl, path in (("sdpa", PATHS[0]), ("reference", PATHS[1])):
        for case, (ni, scale) in pre.items():
            out.append((path, case, model(d, impl, scale), hidden_states(ni), ni["kinds"] != PAD))
    dec = {
        "padded sources": (decoding_batch(d, 6, (5, 40, 12)), None),
        "long (source 490 + target 7)": (decoding_batch(d, 7, (488, 300)), None),
        "relative bias +-1e3": (decoding_batch(d, 8, (5, 40, 12)), 1e3),
        "relative bias +-1e5": (decoding_batch(d, 9, (5, 40, 12)), 1e5),
    }
    for impl, path in (("sdpa", PATHS[2]), ("reference", PATHS[3])):
        for case, ((src, lens, prev), scale) in dec.items():
            real = torch.ones(prev.shape, dtype=torch.bool)  # every target step is predicted
            out.append((path, case, model(d, impl, scale), incremental_log_probs(src, lens, prev), real))
    return out


def relative_error(got, want, real):
    return float((got[real] - want[real]).norm() / want[real].norm())


@pytest.fixture(scope="module")
def float32_outputs():
    d = make_dictionary()
    return [(path, case, m, fn, real, in_mode(m, None, fn)) for path, case, m, fn, real in cases(d)]


def test_every_case_is_finite_in_float32_too(float32_outputs):
    """A row of padding only used to give 0/0 = NaN in the reference softmax."""
    bad = [(path, case) for path, case, _, _, _, want in float32_outputs if not torch.isfinite(want).all()]
    assert not bad, bad


@pytest.mark.parametrize("mode", list(MODES))
def test_half_precision_forward_is_finite_and_close_to_float32(mode, float32_outputs):
    for path, case, m, fn, real, want in float32_outputs:
        got = in_mode(m, mode, fn)
        assert torch.isfinite(got).all(), f"{mode}, {path}, {case}: NaN/inf"
        err = relative_error(got, want, real)
        tol = LARGE_BIAS_TOLERANCE if large_bias(case) else TOLERANCE[mode]
        assert err < tol, f"{mode}, {path}, {case}: relative error {err:.2e}"


def large_bias(case):
    return case.startswith("relative bias")


def error_table():
    """Markdown: per path and mode, the largest relative error over the ordinary cases and
    over the large-bias ones."""
    d = make_dictionary()
    worst = {}
    for path, case, m, fn, real in cases(d):
        want = in_mode(m, None, fn)
        for mode in MODES:
            got = in_mode(m, mode, fn)
            err = relative_error(got, want, real) if torch.isfinite(got).all() else float("inf")
            key = (path, large_bias(case), mode)
            worst[key] = max(worst.get(key, 0.0), err)
    lines = ["| path | cases | " + " | ".join(MODES) + " |", "|---|---|" + "---:|" * len(MODES)]
    for path in PATHS:
        for large, label in ((False, "padded, long, padding-only row (pre-training)"), (True, "bias +-1e3, +-1e5")):
            lines.append(f"| {path} | {label} | "
                         + " | ".join(f"{worst[path, large, mode]:.1e}" for mode in MODES) + " |")
    lines.append("| tolerance (tests/test_half_precision.py) | ordinary / large bias | "
                 + " | ".join(f"{TOLERANCE[m]:.0e} / {LARGE_BIAS_TOLERANCE}" for m in MODES) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    torch.set_num_threads(1)
    print(error_table())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_under_autocast_the_residual_stream_stays_in_the_autocast_dtype_with_layer_norm_statistics_in_fp32(dtype):
    """Autocast's own layer_norm returns fp32, so every projection after it would re-cast the stream
    (query, key, value, fc1, forward and backward): the plugin's LayerNorm writes the autocast dtype,
    its statistics still in fp32, as fairseq's fp16 models."""
    d = make_dictionary()
    m = model(d, "sdpa").train()
    seen = []
    for layer in m.transformer.layers:
        for proj in (layer.attn.query, layer.fc1):
            proj.register_forward_pre_hook(lambda mod, args: seen.append(args[0].dtype))
    ni = pretraining_batch(d, 0, [(9, 7), (6, 5)])
    with torch.autocast("cpu", dtype=dtype):
        out = m(**ni)[0]
    out.float().sum().backward()
    assert seen and set(seen) == {dtype}
    # the output is fp32 layer norm rounded once: fp32 statistics, not ones of rounded values
    ln = m.transformer.layers[0].ffn_ln
    x = torch.randn(4, 32) * 50 + 1000  # a large mean: statistics in bf16 would lose the variance
    with torch.autocast("cpu", dtype=dtype):
        y = ln(x.to(dtype))
    want = torch.nn.functional.layer_norm(x.to(dtype).float(), (32,), ln.weight, ln.bias, ln.eps).to(dtype)
    assert y.dtype == dtype
    torch.testing.assert_close(y.float(), want.float(), atol=2e-2, rtol=0)
    assert all(p.grad is None or p.grad.dtype == torch.float32 for p in m.parameters())
