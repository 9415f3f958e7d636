"""fairseq's ``--optimizer adam`` on a GPU without apex: torch's fused AdamW, not a Python loop.

fairseq 0.12 takes a fused Adam only from apex (``fairseq.optim.fused_adam.get_fused_adam_class``);
without apex it runs its own ``Adam``, a dozen kernels per parameter tensor (8 ms of a base-size
update on an H200). torch ships a fused AdamW (one kernel over every tensor), and fairseq's Adam
is AdamW (decoupled weight decay, bias correction), so this hands fairseq that class where fairseq
would have taken apex's: on CUDA, apex absent, fp32 parameters (fairseq's ``--fp16`` keeps an fp32
master copy; ``--memory-efficient-fp16`` steps fp16 parameters, which keep fairseq's own Adam).

One difference in the last digits: torch divides the square-root second moment by
sqrt(1 - beta2^t) before adding eps where fairseq scales the step, i.e. eps is eps * sqrt(1 - beta2^t)
in fairseq's form (1e-8 -> 0.45e-9 at step 1, -> 1e-8 as t grows); apex's FusedAdam differs from
fairseq's loop as well.
"""
import fairseq.optim.adam as fairseq_adam
import torch
from fairseq.optim.fused_adam import get_fused_adam_class as apex_fused_adam_class


class TorchFusedAdamW(torch.optim.AdamW):
    """torch.optim.AdamW(fused=True) with the constructor and properties fairseq's optimizers have."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, fused=True)

    supports_memory_efficient_fp16 = False
    supports_flat_params = True

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        # a state saved by fairseq's Adam counts steps in a Python int; the fused kernel reads a tensor
        for state in self.state.values():
            if "step" in state and not torch.is_tensor(state["step"]):
                state["step"] = torch.tensor(float(state["step"]), dtype=torch.float32)


def fused_adam(params, use_fp16_stats=False, **config):
    """What ``FairseqAdam`` builds when a fused class is found: ours for fp32 parameters, else
    fairseq's own ``Adam`` (which casts half-precision parameters and gradients itself)."""
    params = list(params)
    tensors = [p for g in params for p in (g["params"] if isinstance(g, dict) else [g])]
    if use_fp16_stats:
        raise NotImplementedError("--fp16-adam-stats is only supported with apex's FusedAdamV1")
    if all(p.dtype == torch.float32 for p in tensors):
        return TorchFusedAdamW(params, **config)
    return fairseq_adam.Adam(params, **config)


def get_fused_adam_class():
    """apex's class where apex is installed (what fairseq chose), else ours."""
    return apex_fused_adam_class() or fused_adam


fairseq_adam.get_fused_adam_class = get_fused_adam_class
