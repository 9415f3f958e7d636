"""fairseq's per-tensor optimizer loops, batched (``runtime/batched_optimizer_loops.py``): ``--fp16``'s
flat fp32 master copy gets the same bytes at the same offsets as from fairseq's one-copy-per-tensor
loops (a missing gradient as zeros, a frozen tensor skipped); the gradient norm without apex is
fairseq's fallback loop's value."""
import pytest
import torch
import torch.nn as nn
from fairseq import utils
from fairseq.optim.fp16_optimizer import FP16Optimizer, _FP16OptimizerMixin

import fairseq_pmlm  # noqa: F401  (installs the replacement)
from fairseq_pmlm.runtime import batched_optimizer_loops as fc

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


class Flat(FP16Optimizer):
    """An FP16Optimizer over a flat fp32 copy keyed by the device index (the CPU's: None): fairseq's
    ``build_fp32_params`` asks CUDA for the device, so the test lays the copy out as it does."""

    def __init__(self, params):
        self.fp16_params, self._needs_sync = params, False
        n = sum(p.numel() for p in params)
        flat = nn.Parameter(torch.cat([p.data.float().reshape(-1) for p in params]))
        flat.grad = torch.full((n,), -7.0)  # stale values: every slot that a gradient owns is rewritten
        self.fp32_params = {params[0].device.index: flat}


def flat(opt):
    (buffer,) = opt.fp32_params.values()
    return buffer


def model_params(device):
    torch.manual_seed(0)
    ps = [nn.Parameter(torch.randn(*shape).half().to(device)) for shape in [(3, 5), (7,), (2, 2, 2), (4,), (6, 1)]]
    ps[3].requires_grad_(False)  # frozen: no slot in the flat gradient (fairseq's offsets skip it)
    for p in ps:
        if p.requires_grad:
            p.grad = torch.randn_like(p)
    ps[2].grad = None  # no gradient this update: zeros
    return ps


def test_the_plugin_installs_the_batched_loops_in_fairseq():
    assert _FP16OptimizerMixin._sync_fp16_grads_to_fp32 is fc.sync_fp16_grads_to_fp32
    assert _FP16OptimizerMixin._sync_fp32_params_to_fp16 is fc.sync_fp32_params_to_fp16
    assert utils.multi_tensor_l2norm_available and utils.multi_tensor_total_norm is fc.total_norm  # no apex here


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_reach_the_flat_buffer_as_fairseq_puts_them(device):
    ours, theirs = Flat(model_params(device)), Flat(model_params(device))
    ours._needs_sync = theirs._needs_sync = True
    fc.sync_fp16_grads_to_fp32(ours)
    fc.FAIRSEQ_GRADS_TO_FP32(theirs)
    assert torch.equal(flat(ours).grad, flat(theirs).grad)
    assert not ours._needs_sync
    n_grads = sum(p.numel() for p in ours.fp16_params if p.requires_grad)
    assert (flat(ours).grad[:n_grads] != -7.0).all()


@pytest.mark.parametrize("device", DEVICES)
def test_stepped_values_reach_every_half_precision_parameter_as_fairseq_puts_them(device):
    ours, theirs = Flat(model_params(device)), Flat(model_params(device))
    for opt in (ours, theirs):
        flat(opt).data.copy_(torch.linspace(-3, 3, flat(opt).numel()))
    fc.sync_fp32_params_to_fp16(ours)
    fc.FAIRSEQ_PARAMS_TO_FP16(theirs)
    for p, q in zip(ours.fp16_params, theirs.fp16_params):
        assert p.dtype == torch.float16 and torch.equal(p, q)
    assert ours.fp16_params[0][0, 0] == -3.0


@pytest.mark.parametrize("device", DEVICES)
def test_clip_grad_norm_without_apex_gives_fairseq_loops_norm_and_clips_by_it(device):
    torch.manual_seed(0)
    params = [nn.Parameter(torch.randn(*shape, device=device)) for shape in [(30, 5), (7,), (2, 9, 4), (1,)]]
    for p in params:
        p.grad = torch.randn_like(p) * 3
    params.append(nn.Parameter(torch.randn(3, device=device)))  # no gradient: left out, as fairseq does
    want = torch.norm(torch.stack([torch.norm(p.grad, p=2, dtype=torch.float32) for p in params[:-1]]))
    before = [p.grad.clone() for p in params[:-1]]
    got = utils.clip_grad_norm_(params, max_norm=1.0)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=0)
    for p, g in zip(params, before):
        torch.testing.assert_close(p.grad, g * (1.0 / (want + 1e-6)), rtol=1e-6, atol=0)
    # mixed dtypes, each norm in fp32: a loss-scaled fp16 gradient whose norm is beyond fp16's range
    mixed = [torch.full((100000,), 300.0, device=device).half(), torch.randn(4, device=device)]
    want = torch.norm(torch.cat([mixed[0].float(), mixed[1]]))
    assert want > torch.finfo(torch.float16).max
    torch.testing.assert_close(fc.total_norm(mixed), want, rtol=1e-5, atol=0)
