"""``scripts/bench_gpu.py --profile FILE``: one PMLM update under torch.profiler, its kernels only,
as shares of the measured update time, with named totals (attention, relative bias, optimizer,
copies, other) so that the next regression names itself; on a GPU also where the device idles
(``device_idle``) and where the host waits for the device (``host_syncs``)."""
import bisect
import os
import re
import time

from lib.import_guard import interruptible  # scripts/lib: Ctrl-C during the imports below, one line

with interruptible():
    import bench_pretrain  # scripts/ is on sys.path: the script's own folder
    import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# named totals of the profile, first match wins; a kernel's "chain" is the op that launched it (on the
# CPU: the op itself) and the ranges/ops around that op, innermost first
CATEGORIES = (
    ("attention", "SDPA/flex/Triton attention forward + backward (the relative bias's gradient inside flex and "
                  "the Triton kernel included)"),
    ("relative bias", "the bias table/tensor and its backward, outside the attention kernels"),
    ("optimizer", "gradient unscale, clipping, Adam step, zero_grad"),
    ("copies", "aten::copy_ and memcpy kernels outside the above"),
    ("other", "matmuls, elementwise, layer norm, loss, ..."),
)
# attention: a kernel so named (fused SDPA's fmha/flash, flex's Triton templates triton_tem_*, the plugin's
# toeplitz_attention_*) or launched
# by an op so named. Not every kernel of a compiled region: with --compile-layers a layer's residual,
# LayerNorm and GELU kernels run in one too
ATTENTION = re.compile(r"attention|fmha|flash|flex|triton_tem", re.IGNORECASE)
BIAS_RANGE, OPTIMIZER_RANGE = "pmlm::relative_bias", "pmlm::optimizer"


def labelled(obj, name, label):
    """Wrap ``obj.name`` in a profiler range (the bench's own labels, nothing in the model)."""
    from torch.profiler import record_function

    fn = getattr(obj, name)

    def wrapped(*args, **kwargs):
        with record_function(label):
            return fn(*args, **kwargs)

    setattr(obj, name, wrapped)


def kernel_times(prof, cuda):
    """[(kernel name, microseconds, chain of enclosing op/range events)] of the profiled run.
    CUDA: the device kernels (memcpy/memset included), each with the op that launched it;
    CPU: every op's self CPU time (there the ops are the kernels), ranges and autograd nodes
    left out so that nothing counts twice."""
    from torch.autograd import DeviceType

    events = prof.events()
    # the ops and ranges the profiler records, without the CUDA runtime's own CPU events (torch >= 2.12
    # links those to an op through linked_correlation_id; torch 2.11 has no such field and lists them apart)
    cpu = [e for e in events if e.device_type == DeviceType.CPU and not e.is_async
           and getattr(e, "linked_correlation_id", 0) == 0]

    def chain(e):
        out = []
        while e is not None:
            out.append(e)
            e = e.cpu_parent
        return out

    if cuda:
        # every torch since 1.x hangs each device kernel on the op that launched it (FunctionEvent.kernels);
        # a kernel no op claims still counts, with no chain, so the total stays whole. The device timeline
        # also repeats each profiler range (fairseq's "forward", ...) as a span over its kernels: those carry
        # a CPU event's name, never a kernel's, and are not kernels
        found = [(k.name, k.duration, chain(e)) for e in cpu for k in e.kernels
                 if not (e.is_legacy and k.name == e.name)]  # an op's own time as a "kernel": the legacy fallback
        ranges = {e.name for e in cpu}
        device = sum(e.time_range.elapsed_us() for e in events
                     if e.device_type == DeviceType.CUDA and e.name not in ranges)
        claimed = sum(us for _, us, _ in found)
        return found + ([("(kernels no op launched)", device - claimed, [])] if device - claimed > 1 else [])
    ops = [e for e in cpu if "::" in e.name and not e.name.startswith(("autograd::", "pmlm::"))]
    return [(e.name, e.self_cpu_time_total, chain(e)) for e in ops if e.self_cpu_time_total > 0]


# the stages of an update as fairseq's trainer and task label them (profiler ranges), and the bench's own
STAGES = ("forward", "backward", "reduce-grads", "multiply-grads", "clip-grads", "optimizer")
SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")


def device_idle(events, n):
    """Where the device waits for the host, from the profiled updates' events: the gaps between
    the device's busy intervals (its kernels and copies, merged), each put under the stage the host
    was in at the gap's middle (fairseq's ranges: forward, backward, clip-grads, optimizer, ...;
    "between stages" outside them) and the innermost op then running, marked "(sync)" where the host
    was waiting in a device synchronization (``.item()``, ``nonzero``, ``.tolist()``, a device->host
    copy). Returns ({(stage, op): (gaps, microseconds)} per update, the total per update).
    Worked example: kernels at 0-10 and 40-60 us, the host in forward's aten::nonzero from 10 to
    40: one gap of 30 us, ("forward", "aten::nonzero")."""
    from torch.autograd import DeviceType

    ranges = {e.name for e in events if e.device_type == DeviceType.CPU}
    busy = sorted((e.time_range.start, e.time_range.end) for e in events
                  if e.device_type == DeviceType.CUDA and e.name not in ranges)
    merged = []
    for start, end in busy:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    gaps = [(gap_start, gap_end) for (_, gap_start), (gap_end, _) in zip(merged, merged[1:])]
    mids = [(a + b) / 2 for a, b in gaps]  # ascending, as the gaps are
    # the host events around each gap's middle, found by bisection (an update has thousands of gaps and
    # tens of thousands of host events: not every pair)
    arounds = [[] for _ in gaps]
    for e in events:
        if e.device_type == DeviceType.CPU and not e.is_async:
            for i in range(bisect.bisect_left(mids, e.time_range.start), bisect.bisect_right(mids, e.time_range.end)):
                arounds[i].append(e)
    out, total = {}, 0.0
    for (gap_start, gap_end), around in zip(gaps, arounds):
        stages = [e.name for e in around if e.name in STAGES]
        ops = sorted((e for e in around if "::" in e.name), key=lambda e: e.time_range.elapsed_us())
        op = ops[0].name if ops else "(no op)"
        if any(e.name.startswith(SYNCS) for e in around):
            op += " (sync)"
        key = (stages[0] if stages else "between stages", op)
        gaps, us = out.get(key, (0, 0.0))
        out[key] = (gaps + 1 / n, us + (gap_end - gap_start) / n)
        total += (gap_end - gap_start) / n
    return out, total


def host_syncs(step):
    """Where one ``step()`` makes the host wait for the device (``.item()``, ``nonzero``, a device->host
    copy): torch's sync debug mode warns at each; the innermost fairseq/plugin frame of the stack then
    names the line that asked. Returns markdown lines: the count per line, most first."""
    import traceback
    import warnings

    counts = {}

    def seen(message, category, filename, lineno, file=None, line=None):
        if "synchroniz" not in str(message):
            return
        frames = [f for f in traceback.extract_stack()[:-1]
                  if ("fairseq" in f.filename or "scripts/" in f.filename) and f.filename != __file__]
        # else the line the warning names (code outside fairseq, the plugin and the scripts)
        where = f"{frames[-1].filename}:{frames[-1].lineno} {frames[-1].name}" if frames else f"{filename}:{lineno}"
        where = where.split("site-packages/")[-1].split(f"{REPO}/")[-1]
        counts[where] = counts.get(where, 0) + 1

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = seen
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
            bench_pretrain.synchronize()
    lines = [f"host waits for the device in one update (torch's sync debug mode): {sum(counts.values())}"]
    if counts:
        lines += ["", "| innermost fairseq / plugin line | syncs |", "|---|---:|"]
        lines += [f"| {k} | {v} |" for k, v in sorted(counts.items(), key=lambda kv: kv[1], reverse=True)[:15]]
    return lines


def categorize(name, chain, bias_seq):
    """The named total a kernel belongs to. The bias's backward runs in autograd nodes that carry
    the sequence number of the forward op they differentiate: those of ops in the bias's range."""
    names = [name] + [e.name for e in chain]
    if any(ATTENTION.search(n) for n in names):
        return "attention"
    if any(e.name == BIAS_RANGE or ("Backward" in e.name and e.sequence_nr in bias_seq) for e in chain):
        return "relative bias"
    if any(e.name.startswith(OPTIMIZER_RANGE) or e.name.startswith("Optimizer.") for e in chain):
        return "optimizer"
    if "memcpy" in name.lower() or (chain and chain[0].name == "aten::copy_") or name == "aten::copy_":
        return "copies"
    return "other"


def profile_update(s, args, device, ran):
    """One PMLM AE+PAR update (fp16, or bf16 autocast where ``args`` say so) under torch.profiler:
    its kernels by self time on the device (CUDA kernels on a GPU; on a CPU, ops by self CPU time),
    each as a share of the MEASURED update time (the median of timed updates without the profiler),
    and named totals (attention, relative bias, optimizer, copies, other), so a regression names
    itself; on a GPU also where the device idles and where the host waits for it (``host_syncs``).
    Also the relative-position bias's forward + backward timed alone at the update's shapes.
    ``ran()``: what the timed updates ran (the attention path, compiled layers), for the title.
    Returns the text (markdown)."""
    import bench_bias  # here: it imports bench_gpu, which imports this file
    from torch.profiler import ProfilerActivity, profile

    from fairseq_pmlm.modules.transformer import check_prefix_len

    task, trainer = bench_pretrain.setup(args)
    sample = bench_pretrain.full_length_batch(task.dataset("train"), s["batch"], s["length"])
    update = bench_pretrain.time_updates(trainer, sample, s["warmup"], s["steps"])
    attention = ran()
    transformer = trainer.model.transformer
    for name in ("relative_bias", "distance_table"):
        labelled(transformer, name, BIAS_RANGE)
    for name in ("multiply_grads", "clip_grad_norm", "step", "zero_grad"):
        labelled(trainer.optimizer, name, f"{OPTIMIZER_RANGE}.{name}")
    cuda = device == "cuda"
    n = min(3, s["steps"])  # a few updates, averaged: one alone is noisy on a shared machine
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        start = time.perf_counter()
        for _ in range(n):
            trainer.train_step([sample])
        bench_pretrain.synchronize()
        profiled = (time.perf_counter() - start) / n
    bias_ranges = [e for e in prof.events() if e.name == BIAS_RANGE]
    bias_seq = {e.sequence_nr for r in bias_ranges for e in prof.events()
                if e.sequence_nr >= 0 and e.thread == r.thread and r.time_range.start <= e.time_range.start
                and e.time_range.end <= r.time_range.end}
    kernels = kernel_times(prof, cuda)
    by_name, totals = {}, dict.fromkeys([c for c, _ in CATEGORIES], 0.0)
    for name, us, chain in kernels:  # per update
        calls, t = by_name.get(name, (0, 0.0))
        by_name[name] = (calls + 1 / n, t + us / n)
        totals[categorize(name, chain, bias_seq)] += us / n
    total = sum(totals.values())
    ms = 1000 * update

    def share(us):
        return f"{100 * us / 1e3 / ms:.1f}%"

    what = ("CUDA kernels by self device time" if cuda else
            "CPU ops by self CPU time (on a CPU the ops are the kernels: no device, no launches)")
    precision = "bf16 autocast" if "--bf16-autocast" in args else "fp16"
    lines = [f"one PMLM AE+PAR {precision} update ({attention}), the mean of {n} profiled: {what}; shares are "
             f"of the measured update, {ms:.2f} ms (median of {s['steps']} unprofiled updates; profiled: "
             f"{1000 * profiled:.1f} ms); kernels total {total / 1e3:.1f} ms = {share(total)}", "",
             "| kernel | calls | ms | share |", "|---|---:|---:|---:|"]
    for name, (calls, us) in sorted(by_name.items(), key=lambda kv: kv[1][1], reverse=True)[:15]:
        short = name if len(name) <= 90 else name[:87] + "..."
        lines.append(f"| {short.replace('|', '/')} | {calls:g} | {us / 1e3:.2f} | {share(us)} |")
    lines += ["", "| total | ms | share | what |", "|---|---:|---:|---|"]
    lines += [f"| {c} | {totals[c] / 1e3:.2f} | {share(totals[c])} | {why} |" for c, why in CATEGORIES]
    lines.append(f"| all kernels | {total / 1e3:.2f} | {share(total)} | the rest of the update: "
                 f"{'device idle (launch gaps, host work)' if cuda else 'Python and fairseq between ops'} |")
    if cuda:
        try:
            idle, idle_us = device_idle(prof.events(), n)
        except Exception as e:  # noqa: BLE001 - a diagnosis that fails must not cost the run its table
            lines += ["", f"device idle: not analysed ({type(e).__name__}: {e})"]
        else:
            lines += ["", f"device idle between kernels in the profiled updates (the profiler's own host work "
                          f"included): {idle_us / 1e3:.2f} ms an update; by the stage and the op the host was in "
                          "at each gap", "", "| stage | host op | gaps | ms |", "|---|---|---:|---:|"]
            for (stage, op), (gaps, us) in sorted(idle.items(), key=lambda kv: kv[1][1], reverse=True)[:12]:
                lines.append(f"| {stage} | {op} | {gaps:g} | {us / 1e3:.2f} |")
    if cuda:
        try:
            lines += ["", *host_syncs(lambda: trainer.train_step([sample]))]
        except Exception as e:  # noqa: BLE001 - as device_idle's
            lines += ["", f"host syncs: not analysed ({type(e).__name__}: {e})"]
    # the bias alone: the plan's biases as the model builds them (bench_bias.py's "the whole plan")
    ni = sample["net_input"]
    layout = check_prefix_len(ni["prefix_len"], ni["kinds"], ni["positions"])
    shared = layout.shared
    toeplitz = transformer.uses_toeplitz(layout, next(transformer.parameters()).device, transformer.compile_layers)
    blocks = bench_bias.measure(transformer, sample, task.source_dictionary.pad(), s["steps"])
    bias = blocks[-1][1]  # the whole plan
    path = ("Triton path outside the kernel (the context block's distance table, the appended block's bias; "
            if toeplitz else "SDPA path (both attention blocks; ") + "the last layer's block of the loss's columns; "
    lines += ["", f"relative-position bias of the {path}forward + backward, timed alone; "
                  f"context bias {'shared by every row' if shared else 'per row'}): "
                  f"{1000 * bias:.2f} ms of a {ms:.1f} ms update = {100 * bias / update:.1f}% (target <= 3%); "
                  "by block (scripts/bench_bias.py):", "", *bench_bias.table(blocks)]
    return "\n".join(lines)
