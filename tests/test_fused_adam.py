"""``--optimizer adam`` without apex takes torch's fused AdamW for fp32 parameters (a GPU update's
optimizer in one kernel) and steps as fairseq's own Adam does; half-precision parameters keep
fairseq's Adam. The fused kernel runs on the CPU too, so the arithmetic is checked here."""
import copy

import torch
from fairseq.optim import adam as fairseq_adam

import fairseq_pmlm  # noqa: F401  (installs the replacement)
from fairseq_pmlm.runtime import fused_adam


def test_fairseq_adam_finds_the_torch_fused_class_when_apex_is_absent():
    assert fused_adam.apex_fused_adam_class() is None  # no apex here
    assert fairseq_adam.get_fused_adam_class() is fused_adam.fused_adam


def test_fused_adamw_steps_as_fairseq_adam_with_weight_decay_over_many_steps():
    torch.manual_seed(0)
    config = dict(lr=1e-3, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.01)
    ref = [torch.randn(7, 5), torch.randn(11)]
    ours = [p.clone() for p in ref]
    opt_ref = fairseq_adam.Adam(ref, **config)
    opt_ours = fused_adam.fused_adam(ours, **config)
    assert isinstance(opt_ours, fused_adam.TorchFusedAdamW)
    for _ in range(30):
        grads = [torch.randn_like(p) for p in ref]
        for p, q, g in zip(ref, ours, grads):
            p.grad, q.grad = g.clone(), g.clone()
        opt_ref.step()
        opt_ours.step()
    for p, q in zip(ref, ours):
        # eps enters as eps * sqrt(1 - beta2^t) in torch's form: differences far below one step (1e-3)
        torch.testing.assert_close(q, p, rtol=0, atol=1e-5)


def test_half_precision_parameters_keep_fairseq_adam_and_a_fairseq_state_resumes_in_the_fused_one():
    half = [torch.zeros(3, dtype=torch.float16)]
    assert isinstance(fused_adam.fused_adam(half, lr=1e-3), fairseq_adam.Adam)
    p = torch.zeros(4)
    old = fairseq_adam.Adam([p], lr=1e-2)
    p.grad = torch.ones(4)
    old.step()  # its state counts steps in an int
    q = p.detach().clone()
    new = fused_adam.fused_adam([q], lr=1e-2)
    new.load_state_dict(copy.deepcopy(old.state_dict()))  # as from a checkpoint file
    q.grad = torch.ones(4)
    new.step()
    p.grad = torch.ones(4)
    old.step()
    torch.testing.assert_close(q, p, rtol=0, atol=1e-6)
