#!/usr/bin/env python
"""PMLM's attention alone, on one real pre-training batch: the 12 layers' attention calls of one
update (their q/k/v/out projections included), forward + backward, with the plan (mask and
relative bias) built once as the model builds it. Variants say where the time goes:

  sdpa            the SDPA plan: two fused calls per layer over a bias that needs a gradient
                  (the context block's shared by every row where the batch allows, as the model does)
  sdpa, per row   the same with a context bias per row (the model before it shared one)
  sdpa, no bias   the same plan with the bias left out (the mask only): the bias gradient's cost
  forward only    without gradient (validation, scoring)
  flex            the flex plan (one call per layer, block mask, the bias as a score_mod)
  flex, table detached / no score_mod / other kernel options: its parts
  triton          the SDPA plan, but the shared context block by the Triton kernel that reads the
                  bias per distance (toeplitz_attention.py)
  ... dropout 0.1 the same with the paper's attention dropout (the rows above train without it)
  context block alone: one call at the batch's context shape, [B, H, P, P], forward + backward:
                  SDPA with the shared bias (needs a gradient), the Triton kernel, flash without bias
  explicit        the SDPA plan, attention spelled out (scores, softmax in fp32, dropout, matmul:
                  ``reference_attention``), which writes the scores SDPA's fused kernels recompute
  appended block alone: one call at the batch's appended shape, [B, H, T-P, T], forward + backward:
                  SDPA with the per-row bias (needs a gradient), spelled out, SDPA with the mask only

    python scripts/bench_attention.py [--smoke] [--steps 10] [--only TEXT ...]

Prints one markdown table (device, commit). ``--smoke``: tiny sizes on the CPU, SDPA rows (the CPU's
flex has no backward), and the Triton kernel's rows where Triton's interpreter is on
(``TRITON_INTERPRET=1``)."""
import argparse
import sys
import time

from lib.import_guard import interruptible  # scripts/lib: Ctrl-C during the imports below, one line

with interruptible():
    import bench_pretrain
    import torch
    import torch.nn.functional as F
    from bench_gpu import SIZES, attention_bench_model, attention_calls, attention_ran, commit, device_info

    from fairseq_pmlm.modules import flex_attention, toeplitz_attention
    from fairseq_pmlm.modules.attention_rule import TokenDescription
    from fairseq_pmlm.modules.transformer import check_prefix_len, reference_attention
    from fairseq_pmlm.runtime.interrupts import one_line_exit

# kernel options tried besides the module's own (fwd: query x key block; bwd: dK/dV pass M1 x N1, dQ pass M2 x N2)
OTHER_OPTIONS = {
    "fwd 128x64, 3 stages; bwd 64x128 / 128x64, 2 stages": {
        "fwd_BLOCK_M": 128, "fwd_BLOCK_N": 64, "fwd_num_stages": 3,
        "bwd_BLOCK_M1": 64, "bwd_BLOCK_N1": 128, "bwd_BLOCK_M2": 128, "bwd_BLOCK_N2": 64, "bwd_num_stages": 2},
    "fwd 128x128, 2 stages; bwd 64x64 / 64x64, 2 stages": {
        "fwd_BLOCK_M": 128, "fwd_BLOCK_N": 128, "fwd_num_stages": 2,
        "bwd_BLOCK_M1": 64, "bwd_BLOCK_N1": 64, "bwd_BLOCK_M2": 64, "bwd_BLOCK_N2": 64, "bwd_num_stages": 2},
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true",
                   help="tiny sizes on the CPU: SDPA rows, and the Triton kernel's under TRITON_INTERPRET=1")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--only", metavar="TEXT", action="append", default=None,
                   help="only the rows whose label contains TEXT (repeatable; e.g. --only triton --only 'context')")
    a = p.parse_args(argv)
    s = SIZES["smoke" if a.smoke else "base"]
    device, name, _ = device_info(None)
    if device == "cpu" and not a.smoke:
        sys.exit("bench_attention.py: error: no CUDA device; use --smoke for the CPU check")
    _, sample, model = attention_bench_model(s, device, "bench_attention_")
    ni = sample["net_input"]
    dtype = next(model.parameters()).dtype
    desc = TokenDescription(*(ni[k].to(device) for k in ("kinds", "steps", "positions")))
    B, T = desc.kinds.shape
    x = torch.randn(B, T, s["dim"], device=device, dtype=dtype, requires_grad=True)
    attns = [layer.attn for layer in model.layers]

    def run(make_plan, backward=True):
        def update():
            with torch.set_grad_enabled(backward):
                plan = make_plan()
                y = x
                for attn in attns:
                    y = attn(y, plan)[0]
            if backward:
                y.float().sum().backward()
        return update

    layout = check_prefix_len(ni["prefix_len"], desc.kinds, desc.positions)
    shared = layout.shared

    def sdpa(bias=True, share=shared, toeplitz=False):
        def make():
            plan = model.attention_plan(desc, desc, dtype, ni["prefix_len"], layout if share else None, toeplitz)
            return plan if bias else [b._replace(bias=b.bias.isfinite()) for b in plan]
        return make

    P, H = ni["prefix_len"], s["heads"]
    # the context block's inputs as a layer hands them over ([B, H, P, D] views of [B, P, H, D]), its
    # bias (SDPA) and distance table (the kernel) as leaves that need a gradient: built once, as the
    # model builds them once for its 12 layers
    qkv = [torch.randn(B, P, H, s["dim"] // H, device=device, dtype=dtype).transpose(1, 2).requires_grad_()
           for _ in range(3)]
    bias = model.attention_plan(desc, desc, dtype, P, layout)[0].bias.detach().requires_grad_()
    table = model.distance_table(P, device).detach().requires_grad_()

    def context_block(how):
        """One call at the context block's shape, forward + backward."""
        def call():
            dropout = attns[0].dropout
            if how == "triton":
                y = toeplitz_attention.attend(*qkv, table, dropout)
                if y is None:
                    raise RuntimeError("the Triton kernel does not run here")
            else:
                y = F.scaled_dot_product_attention(*qkv, attn_mask=bias if how == "sdpa" else None, dropout_p=dropout)
            y.float().sum().backward()
        return call

    def explicit(timed):
        """``timed`` with the layers' attention spelled out (``reference_attention``)."""
        def call():
            impls = [attn.impl for attn in attns]
            for attn in attns:
                attn.impl = "reference"
            try:
                timed()
            finally:
                for attn, impl in zip(attns, impls):
                    attn.impl = impl
        return call

    # the appended block's inputs and its bias (per row, needs a gradient), as for the context block
    appended = model.attention_plan(desc, desc, dtype, P, layout)[1:]
    if appended:
        app_bias = appended[0].bias.detach().requires_grad_()
        app_q = torch.randn(B, T - P, H, s["dim"] // H, device=device, dtype=dtype).transpose(1, 2).requires_grad_()
        app_kv = [torch.randn(B, T, H, s["dim"] // H, device=device, dtype=dtype).transpose(1, 2).requires_grad_()
                  for _ in range(2)]

    def appended_block(how):
        """One call at the appended block's shape, forward + backward."""
        def call():
            dropout = attns[0].dropout
            if how == "explicit":
                y = reference_attention(app_q, *app_kv, app_bias, dropout, True)
            else:
                mask = app_bias if how == "sdpa" else app_bias.isfinite()
                y = F.scaled_dot_product_attention(app_q, *app_kv, attn_mask=mask, dropout_p=dropout)
            y.float().sum().backward()
        return call

    def flex(detach=False, score_mod=True):
        def make():
            plan = model.flex_plan(desc, dtype, ni["prefix_len"])
            if detach or not score_mod:
                table = model.distance_table(model.shape.max_positions, device).detach()
                positions = F.pad(desc.positions, (0, plan.padded - T))
                plan.score_mod = flex_attention.score_mod_of(table, positions) if score_mod else None
            return plan
        return make

    model.train()
    # (label, the timed call, kernel options to recompile flex with, attention dropout): flex has no
    # dropout, so the rows train without it (they compare), but for the rows that say so
    rows = [("sdpa (the plan with the relative bias, which needs a gradient)", run(sdpa()), None, 0.0),
            ("sdpa, a context bias per row", run(sdpa(share=False)), None, 0.0),
            ("sdpa, no bias (mask only)", run(sdpa(bias=False)), None, 0.0),
            ("sdpa, forward only (no gradient: validation, scoring)", run(sdpa(), False), None, 0.0)]
    if layout.shared and layout.contiguous:
        rows += [("triton (the context block by the Toeplitz kernel, the appended block on SDPA)",
                  run(sdpa(toeplitz=True)), None, 0.0),
                 ("triton, forward only", run(sdpa(toeplitz=True), False), None, 0.0),
                 ("sdpa, attention dropout 0.1", run(sdpa()), None, 0.1),
                 ("triton, attention dropout 0.1", run(sdpa(toeplitz=True)), None, 0.1)]
        for dropout in (0.0, 0.1):
            rows += [(f"context block alone{f', dropout {dropout}' if dropout else ''}: {what}",
                      context_block(how), None, dropout)
                     for how, what in (("sdpa", "SDPA, shared bias with gradient"), ("triton", "Triton kernel"),
                                       ("none", "SDPA, no bias (flash)"))]
    rows += [("explicit (the SDPA plan, attention spelled out)", explicit(run(sdpa())), None, 0.0),
             ("explicit, attention dropout 0.1", explicit(run(sdpa())), None, 0.1)]
    if appended:
        rows += [(f"appended block alone: {what}", appended_block(how), None, 0.0)
                 for how, what in (("sdpa", "SDPA, per-row bias with gradient"),
                                   ("explicit", "spelled out, per-row bias with gradient"),
                                   ("mask", "SDPA, mask only (no bias gradient)"))]
    if device == "cuda":
        rows += [("flex, forward only (no gradient)", run(flex(), False), None, 0.0),
                 ("flex (the module's kernel options)", run(flex()), None, 0.0),
                 ("flex, table detached (no bias gradient)", run(flex(detach=True)), None, 0.0),
                 ("flex, no score_mod (mask only)", run(flex(score_mod=False)), None, 0.0)]
        rows += [(f"flex, {label}", run(flex()), options, 0.0) for label, options in OTHER_OPTIONS.items()]
    if a.only:
        rows = [r for r in rows if any(text in r[0] for text in a.only)]
    out = []
    sdpa_calls, fused = [0], F.scaled_dot_product_attention

    def counted(*args, **kwargs):  # which rows called SDPA ("ran")
        sdpa_calls[0] += 1
        return fused(*args, **kwargs)

    F.scaled_dot_product_attention = counted
    try:
        for label, timed, options, dropout in rows:
            for attn in attns:
                attn.dropout = dropout
            if options is not None:  # recompile with them
                flex_attention.CUDA_KERNEL_OPTIONS.clear()
                flex_attention.CUDA_KERNEL_OPTIONS.update(options)
                torch._dynamo.reset()
                flex_attention._state["compiled"] = None
                flex_attention._state["backward_checked"].clear()
            calls, before, start = attention_calls(), sdpa_calls[0], time.perf_counter()
            try:
                ms = 1000 * bench_pretrain.time_calls(timed, 0 if a.smoke else 2, a.steps)
                ran = attention_ran(calls)
                if label.startswith("context block alone"):  # one call, no plan: no SDPA beside the kernel
                    ran = ran.replace("Triton context block + SDPA", "Triton kernel")
                if ran == "SDPA" and sdpa_calls[0] == before:  # no fused call: attention spelled out
                    ran = "explicit"
            except Exception as e:  # noqa: BLE001 - a variant that does not compile is a row, not the end
                ms, ran = None, f"failed: {type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}"
            # a fallback is this row's: the next tries flex (the kernel) again
            flex_attention._state["failure"] = toeplitz_attention._state["failure"] = None
            took = time.perf_counter() - start
            out.append((label, ms, ran))
            print(f"bench_attention: {label}: {'-' if ms is None else f'{ms:.1f} ms'} ({ran}; "
                  f"{took:.0f} s with compiling)", file=sys.stderr, flush=True)
    finally:
        F.scaled_dot_product_attention = fused
    print(f"\ndevice: {name}; commit: {commit()}; torch {torch.__version__}; {s['layers']} layers' attention "
          f"(q/k/v/out projections included), batch {B} x {T} tokens ({ni['prefix_len']} context), "
          f"{s['heads']} heads, fp16 on CUDA; forward + backward unless said, median of {a.steps}; context "
          f"bias {'shared by every row' if shared else 'per row (the batch has padding)'}\n")
    print("| variant | ms | ran |\n|---|---:|---|")
    for label, ms, ran in out:
        print(f"| {label} | {'-' if ms is None else f'{ms:.2f}'} | {ran} |")


if __name__ == "__main__":
    # Ctrl-C or SIGTERM: 130, its temporary corpus removed, no traceback
    sys.exit(one_line_exit("bench_attention.py", main))
