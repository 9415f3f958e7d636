#!/usr/bin/env python
"""The context block's Triton kernel alone (fairseq_pmlm/modules/toeplitz_attention.py), at the
pre-training shape (32 rows x 12 heads x 512 context tokens, head size 64):

  errors   the kernel's output and gradients (q, k, v and the distance table) against attention in
           fp32 with the bias materialised, beside SDPA's with the same bias in the same precision
           (what the model runs without the kernel), fp16 and bf16, a full last tile (512) and a
           partial one (500). Errors are relative to each tensor's largest entry.
  time     one call, forward + backward, with and without attention dropout: SDPA with the bias
           that needs a gradient, the kernel, flash attention without bias (the floor)
  tiles    the kernel with other tiles, one pass changed at a time (fwd, dK/dV, dQ), then the
           fastest of each together: what to set CUDA_TILES to on another GPU
  host     (--host) the host's time of one call (the device synchronised before, not after), at a
           shape too small to keep the device busy and at the full one, beside SDPA's and split
           into the forward alone, the backward alone (through autograd's engine, and the Function's
           backward called directly) and the three Triton launches alone, and where it goes: the
           functions of most own time in a cProfile of calls at the small shape. On an H200 a call
           cost the host ~1 ms, its kernels' device time 1.4 ms: the path is bound by the host

    python scripts/bench_toeplitz.py [--smoke] [--steps 20] [--no-tiles] [--host]

Prints markdown tables (device, commit). ``--smoke``: a tiny shape in Triton's interpreter on the
CPU (``TRITON_INTERPRET=1``, set here when there is no GPU), fp16 only, two tile variants."""
import argparse
import cProfile
import io
import math
import os
import pstats
import statistics
import sys
import time

if __name__ == "__main__" and "--smoke" in sys.argv and not os.path.exists("/dev/nvidiactl"):
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before Triton is first imported

from lib.import_guard import interruptible  # noqa: E402 - scripts/lib: Ctrl-C during the imports below, one line

with interruptible():
    import bench_pretrain
    import torch
    import torch.nn.functional as F
    from bench_gpu import commit, device_info

    from fairseq_pmlm.modules import toeplitz_attention as ta
    from fairseq_pmlm.modules.toeplitz_attention import Launch
    from fairseq_pmlm.runtime.interrupts import one_line_exit

# (B, H, N, D), the lengths of the errors table, the tiles tried per pass (BM x BN, warps, stages)
SHAPES = {
    "base": dict(B=32, H=12, N=512, D=64, lengths=(512, 500), tries={
        "fwd": [Launch(128, 128, 8, 2), Launch(64, 64, 4, 2), Launch(128, 64, 4, 3), Launch(64, 128, 4, 2)],
        "dkdv": [Launch(32, 128, 8, 2), Launch(64, 128, 8, 2), Launch(32, 64, 4, 2), Launch(64, 64, 4, 3),
                 Launch(64, 64, 8, 2)],
        "dq": [Launch(128, 32, 8, 2), Launch(64, 64, 4, 2), Launch(128, 64, 8, 2), Launch(64, 32, 4, 3),
               Launch(32, 64, 4, 2)]}),
    "smoke": dict(B=1, H=2, N=70, D=16, lengths=(70,), tries={
        "fwd": [Launch(32, 32)], "dkdv": [], "dq": [Launch(32, 16)]}),
}


def inputs(B, H, N, D, dtype, device, seed=0):
    """q, k, v as a layer hands them over ([B, H, N, D] views of [B, N, H, D]) and an fp32 table."""
    g = torch.Generator(device=device).manual_seed(seed)
    q, k, v = (torch.randn(B, N, H, D, generator=g, device=device).to(dtype).transpose(1, 2) for _ in range(3))
    return q, k, v, torch.randn(H, 2 * N - 1, generator=g, device=device)


def grads(fn, leaves, do):
    out = fn(*leaves)
    return [out.detach().float()] + [x.float() for x in torch.autograd.grad(out, leaves, do)]


def errors(B, H, N, D, dtype, device):
    """Relative errors [out, dq, dk, dv, dtable] of the kernel and of SDPA, against fp32."""
    q, k, v, table = inputs(B, H, N, D, dtype, device)
    do = torch.randn_like(q)

    def leaves(*xs):
        return [x.detach().requires_grad_() for x in xs]

    def sdpa(q, k, v, table):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=ta.dense_bias(table, N).to(q.dtype)[None])

    def fp32(q, k, v, table):
        scores = q @ k.transpose(-1, -2) / math.sqrt(D) + ta.dense_bias(table, N)
        return scores.softmax(-1) @ v

    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        want = grads(fp32, leaves(q.float(), k.float(), v.float(), table), do.float())
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    out = []
    for fn in (ta.toeplitz_attention, sdpa):
        got = grads(fn, leaves(q, k, v, table), do)
        out.append([float((a - b).abs().max() / b.abs().max()) for a, b in zip(got, want)])
        del got
    return out


def timed_call(s, dtype, device, how, dropout, t=None):
    """One forward + backward at the shape: "kernel" (tiles t), "sdpa" (bias with gradient), "flash"."""
    q, k, v, table = (x.detach().requires_grad_() for x in inputs(s["B"], s["H"], s["N"], s["D"], dtype, device))
    bias = ta.dense_bias(table, s["N"]).to(dtype)[None].detach().requires_grad_()

    def call():
        if how == "kernel":
            y = ta.toeplitz_attention(q, k, v, table, dropout, t)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias if how == "sdpa" else None, dropout_p=dropout)
        y.backward(torch.ones_like(y))
    return call


def launches_only(s, dtype, device, dropout):
    """The kernel's three launches (forward, dQ, dK/dV) on buffers allocated once: the host's part
    that is Triton's alone, without autograd and the wrapper's torch ops."""
    q, k, v, table = inputs(s["B"], s["H"], s["N"], s["D"], dtype, device)
    t = ta.tiles(device)
    bias = ta.expand(table, s["N"], dtype)
    o = torch.empty_like(q)
    lse = torch.empty(s["B"] * s["H"], s["N"], dtype=torch.float32, device=device)
    do, dq, dk, dv = (torch.randn_like(q) for _ in range(4))
    delta = torch.empty_like(lse)
    dtable = torch.zeros(s["B"], s["H"], 2 * s["N"] - 1, dtype=torch.float32, device=device)

    def call():
        ta.launch_forward(q, k, v, bias, o, lse, 1, dropout, t)
        ta.launch_backward(q, k, v, bias, o, lse, do, delta, dq, dk, dv, dtable, 1, dropout, t)
    return call


def backward_only(s, dtype, device, dropout, engine=True):
    """The kernel's backward alone, of one forward kept (``retain_graph``): through autograd's engine
    (``engine``), or the Function's ``backward`` called directly on what its forward saved: the
    engine's own share of the host's time is the difference."""
    q, k, v, table = (x.detach().requires_grad_() for x in inputs(s["B"], s["H"], s["N"], s["D"], dtype, device))
    y = ta.toeplitz_attention(q, k, v, table, dropout)
    do = torch.ones_like(y)
    if engine:
        return lambda: torch.autograd.grad(y, (q, k, v, table), do, retain_graph=True)
    ctx = y.grad_fn  # the Function's ctx: its saved tensors and arguments
    # y kept alive with it: torch 2.11 (the GPU image's) frees a saved output with the output, and the
    # call then fails ("backward through the graph a second time"); 2.13 keeps it
    return lambda y=y: ta._Attention.backward(ctx, do)


def forward_only(s, dtype, device, dropout):
    q, k, v, table = inputs(s["B"], s["H"], s["N"], s["D"], dtype, device)

    def call():
        with torch.no_grad():
            ta.toeplitz_attention(q, k, v, table, dropout)
    return call


def host_ms(call, steps):
    """Medians of ``steps`` calls, ms: the host's time (the device synchronised before, not after)
    and the wall time (until the device is done)."""
    call()
    took, wall = [], []
    for _ in range(steps):
        bench_pretrain.synchronize()
        start = time.perf_counter()
        call()
        took.append(time.perf_counter() - start)
        bench_pretrain.synchronize()
        wall.append(time.perf_counter() - start)
    return 1000 * statistics.median(took), 1000 * statistics.median(wall)


def host(s, dev, steps):
    """The host's time of one call, fp16, dropout 0.1, beside SDPA's (bias with gradient) and split
    into its parts (forward alone; backward alone, through autograd and called directly; the three
    launches alone), at 1 x 2 heads x 128 (the device
    idle) and at the full shape; then the top of a cProfile of ``steps`` calls at the small one."""
    small = dict(s, B=1, H=2, N=min(128, s["N"]))
    print(f"\nThe host's time of one call, fp16, dropout 0.1, ms (median of {steps}; host: until the "
          "call returns, the device synchronised before; wall: until the device is done):\n")
    print("| shape | what | host | wall |\n|---|---|---:|---:|")
    half = torch.float16
    rows = [("kernel, forward + backward", lambda sh: timed_call(sh, half, dev, "kernel", 0.1)),
            ("SDPA, bias with gradient, forward + backward", lambda sh: timed_call(sh, half, dev, "sdpa", 0.1)),
            ("kernel, forward only (no gradient)", lambda sh: forward_only(sh, half, dev, 0.1)),
            ("kernel, backward only, through autograd", lambda sh: backward_only(sh, half, dev, 0.1)),
            ("kernel, backward only, the Function's backward called directly",
             lambda sh: backward_only(sh, half, dev, 0.1, engine=False)),
            ("the kernel's three launches alone", lambda sh: launches_only(sh, half, dev, 0.1))]
    for shape in [small] + ([s] if s != small else []):
        for what, make in rows:
            took, wall = host_ms(make(shape), steps)
            print(f"| {shape['B']} x {shape['H']} x {shape['N']} x {shape['D']} | {what} | {took:.3f} | {wall:.3f} |",
                  flush=True)
    call = timed_call(small, torch.float16, dev, "kernel", 0.1)
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(steps):
        call()
    bench_pretrain.synchronize()
    profile.disable()
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(15)
    print(f"\ncProfile of {steps} calls at the small shape, by own time:\n\n```")
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[-3000:])
    print("```")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="a tiny shape in Triton's interpreter on the CPU")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--no-tiles", action="store_true", help="skip the tiles table")
    p.add_argument("--host", action="store_true", help="also the host's time of a call, and its profile")
    a = p.parse_args(argv)
    s = SHAPES["smoke" if a.smoke else "base"]
    device, name, _ = device_info(None)
    if device == "cpu" and not (a.smoke and ta.interpreted()):
        sys.exit("bench_toeplitz.py: error: no CUDA device; use --smoke for the CPU (Triton's interpreter)")
    dev = torch.device(device)
    if not ta.available(dev):
        sys.exit("bench_toeplitz.py: error: the Triton kernel cannot run here (is Triton installed?)")
    dtypes = [torch.float16] + ([torch.bfloat16] if device == "cuda" else [])
    warmup = 0 if a.smoke else 3
    print(f"device: {name}; commit: {commit()}; torch {torch.__version__}; Triton "
          f"{__import__('triton').__version__}; {s['B']} x {s['H']} heads x N x {s['D']}\n")

    print("| dtype | N | path | out | dq | dk | dv | dtable |\n|---|---:|---|---:|---:|---:|---:|---:|")
    for dtype in dtypes:
        for N in s["lengths"]:
            for path, errs in zip(("Triton kernel", "SDPA, dense bias"), errors(s["B"], s["H"], N, s["D"], dtype, dev)):
                print(f"| {str(dtype)[6:]} | {N} | {path} | " + " | ".join(f"{e:.1e}" for e in errs) + " |", flush=True)

    def ms(how, dtype, dropout, t=None):
        try:
            return 1000 * bench_pretrain.time_calls(timed_call(s, dtype, dev, how, dropout, t), warmup, a.steps)
        except Exception as e:  # noqa: BLE001 - a tile that does not compile is a row, not the end
            print(f"bench_toeplitz: {how} {t}: {type(e).__name__}: {str(e).splitlines()[0][:120]}", file=sys.stderr)
            return None

    def cell(x):
        return "-" if x is None else f"{x:.3f}"

    print(f"\nOne call, forward + backward, ms (median of {a.steps}):\n")
    print("| dtype | dropout | SDPA, bias with gradient | Triton kernel | flash, no bias | kernel vs SDPA |")
    print("|---|---:|---:|---:|---:|---:|")
    for dtype in dtypes:
        for dropout in (0.0, 0.1):
            sd, kern, flash = (ms(how, dtype, dropout) for how in ("sdpa", "kernel", "flash"))
            ratio = f"{sd / kern:.2f}x" if sd and kern else "-"
            print(f"| {str(dtype)[6:]} | {dropout} | {cell(sd)} | {cell(kern)} | {cell(flash)} | {ratio} |", flush=True)
    if a.host:
        host(s, dev, a.steps)
    if a.no_tiles:
        return

    base = ta.tiles(dev)
    print(f"\nThe kernel's tiles, fp16, dropout 0.1, forward + backward ms (one pass changed; BM x BN, warps, "
          f"stages; the module's: {base}):\n")
    print("| pass | tiles | ms |\n|---|---|---:|")
    best = {}
    for pass_ in ("fwd", "dkdv", "dq"):
        for launch in [getattr(base, pass_)] + s["tries"][pass_]:
            t = base._replace(**{pass_: launch})
            x = ms("kernel", torch.float16, 0.1, t)
            print(f"| {pass_} | {launch.BM}x{launch.BN}, {launch.warps}, {launch.stages} | {cell(x)} |", flush=True)
            if x is not None and (pass_ not in best or x < best[pass_][0]):
                best[pass_] = x, launch
    together = base._replace(**{k: v[1] for k, v in best.items()})
    print(f"| all three fastest | {together} | {cell(ms('kernel', torch.float16, 0.1, together))} |")


if __name__ == "__main__":
    sys.exit(one_line_exit("bench_toeplitz.py", main))
