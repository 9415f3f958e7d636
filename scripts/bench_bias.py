#!/usr/bin/env python
"""The relative-position bias of one pre-training update, timed alone, block by block: each block's
bias as the model builds it for one real batch (32 contexts of 512 tokens, 12 heads: bench_gpu.py's
base sizes), forward + backward down to the bias weights, on a GPU or on the CPU. A bias that every
row shares gets its gradient summed over the batch, as the attention's broadcast gives it.

  context block          the shared context's [1, H, P, P] (or the Triton kernel's distance table)
  appended block         the appended rows over every key
  last layer's columns   the columns the loss reads, over every key (``read_plan``)
  the whole plan         all three: what ``bench_gpu.py --profile`` reports as the bias "timed alone"
  ... by the rule        the same block built by the rule over every key, as ``attention_bias`` does
                         without a shared context (the two blocks' construction before
                         ``shared_context_bias``), in the same process

    python scripts/bench_bias.py [--smoke] [--steps 5]

Prints one markdown table (device, commit, dtype: fp16 on a GPU, fp32 on the CPU): each row's time and
the ops it dispatches (forward + backward, views apart: on a GPU a launch each, and where the bias
alone is bound by the host's calls, as on an H200, the count is what moves it). ``--smoke``: tiny
sizes (the tests run it)."""
import argparse
import sys
from collections import Counter

from lib.import_guard import interruptible  # scripts/lib: Ctrl-C during the imports below, one line

with interruptible():
    import bench_pretrain
    import torch
    from bench_gpu import SIZES, attention_bench_model, commit, device_info
    from torch.utils._python_dispatch import TorchDispatchMode

    from fairseq_pmlm.modules import toeplitz_attention
    from fairseq_pmlm.modules.attention_rule import TokenDescription
    from fairseq_pmlm.modules.transformer import ReadCells, check_prefix_len, shared_context_columns


def bias_blocks(transformer, sample, pad):
    """(label, build) for each block of one update's bias, ``build()`` giving the tensors whose
    gradient reaches the bias weights (``backward``): the rows above, "the whole plan" last."""
    device = next(transformer.parameters()).device
    dtype = next(transformer.parameters()).dtype
    ni = {k: v.to(device) for k, v in sample["net_input"].items() if torch.is_tensor(v)}
    q = TokenDescription(ni["kinds"], ni["steps"], ni["positions"])
    P = sample["net_input"]["prefix_len"]
    layout = check_prefix_len(P, q.kinds, q.positions)
    toeplitz = transformer.uses_toeplitz(layout, device, transformer.compile_layers)
    context = shared_context_columns(P, layout)
    read = ReadCells.of(sample["target"].to(device).ne(pad)).columns

    def plan():
        blocks = transformer.attention_plan(q, q, dtype, P, layout, toeplitz)
        return [b.bias for b in blocks + transformer.read_plan(blocks, read, q, q, dtype, context)]

    rows = [("context block", lambda: [b.bias for b in transformer.attention_plan(
        q.columns(0, P), q.columns(0, P), dtype, P, layout, toeplitz)])]
    if P < q.kinds.size(1):
        rows += [("appended block", lambda: [transformer.attention_bias(q.columns(P), q, dtype, context)]),
                 ("appended block, by the rule", lambda: [transformer.attention_bias(q.columns(P), q, dtype)])]

    def last_layer(context):
        return lambda: [b.bias for b in transformer.read_plan(None, read, q, q, dtype, context)]

    rows += [("last layer's columns", last_layer(context)), ("last layer's columns, by the rule", last_layer(None)),
             ("the whole plan", plan)]
    return [(label, _forward_backward(build, q.kinds.size(0))) for label, build in rows]


def _forward_backward(build, B):
    def call():
        out = [b.table if isinstance(b, toeplitz_attention.ToeplitzBias) else b.expand(B, -1, -1, -1)
               for b in build() if b is not None]
        out = [b for b in out if b.requires_grad]
        if out:
            torch.autograd.backward(out, [torch.ones_like(b) for b in out])
    return call


class DispatchedOps(TorchDispatchMode):
    """Counts the ops that reach torch's dispatcher, views apart (they launch nothing)."""

    def __init__(self):
        super().__init__()
        self.ops = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func.is_view] += 1
        return func(*args, **(kwargs or {}))


def dispatched(call):
    """(ops, views) of one ``call()``."""
    with DispatchedOps() as mode:
        call()
    return mode.ops[False], mode.ops[True]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="tiny sizes")
    p.add_argument("--steps", type=int, default=5)
    a = p.parse_args(argv)
    s = SIZES["smoke" if a.smoke else "base"]
    device, name, _ = device_info(None)
    torch.manual_seed(0)
    task, sample, transformer = attention_bench_model(s, device, "bench_bias_")
    dtype = next(transformer.parameters()).dtype
    rows = measure(transformer, sample, task.source_dictionary.pad(), a.steps)
    B, T = sample["net_input"]["kinds"].shape
    print(f"\ndevice: {name}; commit {commit()}; torch {torch.__version__}; {str(dtype).replace('torch.', '')}; "
          f"batch {B} x {T} tokens ({sample['net_input']['prefix_len']} context), {s['heads']} heads\n")
    print("\n".join(table(rows)))


def measure(transformer, sample, pad, steps):
    """[(label, seconds, ops, views)] of ``bias_blocks``' rows, the whole plan last."""
    return [(label, bench_pretrain.time_calls(call, 1, steps), *dispatched(call))
            for label, call in bias_blocks(transformer, sample, pad)]


def table(rows):
    """``measure``'s rows as markdown lines."""
    return ["| bias block, forward + backward | ms | ops, views apart (views) |", "|---|---:|---:|",
            *(f"| {label} | {1000 * sec:.2f} | {ops} ({views}) |" for label, sec, ops, views in rows)]


if __name__ == "__main__":
    from fairseq_pmlm.runtime.interrupts import one_line_exit

    sys.exit(one_line_exit("bench_bias.py", main))
