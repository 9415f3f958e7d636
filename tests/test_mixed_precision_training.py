"""Mixed-precision training on the CPU, as far as the CPU can take it.

- the plugin's ``--bf16-autocast`` (fairseq's ``--bf16`` means TPU): the criterion's forward
  runs under bf16 autocast, the backward outside it, weights stay fp32;
- fairseq's ``--fp16`` (with ``--fp16-no-flatten-grads``: the flattened fp32 master copy
  is placed with ``torch.cuda.current_device()``) and ``--memory-efficient-fp16``: the model
  really is cast to fp16 and the trainer's loss scaling runs;
- fairseq's ``FP16Optimizer`` / ``MemoryEfficientFP16Optimizer`` on an overflow;
- ``--bf16-autocast``'s weights cast in one batch: the same loss and gradients as autocast's casts.
The fairseq-train runs go one after the other (``train_many``): 40 updates each, ~15 s in all.
"""
import types

import numpy as np
import pytest
import torch
from fairseq import checkpoint_utils, options
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.optim import FP16Optimizer, MemoryEfficientFP16Optimizer
from torch.utils._python_dispatch import TorchDispatchMode

from fairseq_pmlm.tasks.autocast import AutocastConfig, BF16AutocastMixin

from cli import checkpoints, memorisable_documents, preprocess, records, train_args, train_many
from helpers import make_dataset, make_dictionary, random_documents, tiny_transformer, without_dropout

UPDATES = 40
# per logged update (fairseq rounds the loss to 3 decimals), in bits: the runs start from the
# same weights and data order, so the curves differ by rounding only (measured max: 0.002)
CURVE_TOLERANCE = 0.05
RUNS = {  # name: extra fairseq-train arguments
    "fp32": [],
    "bf16 autocast": ["--bf16-autocast"],
    "fp16": ["--fp16", "--fp16-no-flatten-grads", "--fp16-scale-window", "8", "--fp16-init-scale", "16"],
    "memory-efficient fp16": ["--memory-efficient-fp16", "--fp16-scale-window", "8", "--fp16-init-scale", "16"],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mixed")
    data = preprocess(tmp, memorisable_documents(), in_process=True)
    common = ["--log-interval", "1", "--no-epoch-checkpoints", "--disable-validation"]
    plan = [(data, tmp / name, "--max-update", str(UPDATES), *common, *extra) for name, extra in RUNS.items()]
    # the fp16 run again, in two halves: stopped after half the updates, then resumed
    resumed = tmp / "fp16 resumed"
    plan += [(data, resumed, "--max-update", str(UPDATES // 2), *common, *RUNS["fp16"]),
             (data, resumed, "--max-update", str(UPDATES), *common, *RUNS["fp16"])]
    plan.append((data, tmp / "both", "--max-update", "2", "--bf16-autocast", *RUNS["fp16"]))
    procs = train_many(plan)
    out = {name: (proc, tmp / name) for name, proc in zip(list(RUNS) + ["first half", "second half", "both"], procs)}
    out["data"] = data
    return out


def curve(proc):
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [float(r["loss"]) for r in records(proc)]


@pytest.mark.parametrize("name", ["bf16 autocast", "fp16", "memory-efficient fp16"])
def test_loss_curve_follows_fp32_update_by_update(name, runs):
    want, got = curve(runs["fp32"][0]), curve(runs[name][0])
    assert len(got) == len(want) == UPDATES
    worst = max(abs(a - b) for a, b in zip(got, want))
    assert worst <= CURVE_TOLERANCE, f"{name}: largest loss difference {worst:.3f} bits"
    assert sum(got[-5:]) / 5 < sum(got[:5]) / 5 - 2  # and it learns


@pytest.mark.parametrize("name", ["bf16 autocast", "fp16"])
def test_checkpoint_holds_fp32_weights_and_loads_into_an_fp32_model(name, runs):
    save_dir = runs[name][1]
    assert "checkpoint_last.pt" in checkpoints(save_dir)
    state = checkpoint_utils.load_checkpoint_to_cpu(str(save_dir / "checkpoint_last.pt"))  # weights_only
    floats = {k: v.dtype for k, v in state["model"].items() if v.is_floating_point()}
    assert set(floats.values()) == {torch.float32}, floats
    (model,), _ = checkpoint_utils.load_model_ensemble([str(save_dir / "checkpoint_last.pt")],
                                                      arg_overrides={"data": str(runs["data"])})
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert all(torch.equal(p, state["model"][n]) for n, p in model.state_dict().items())


def test_fp16_resumed_run_restores_the_loss_scale_and_follows_the_uninterrupted_run(runs):
    first, second = records(runs["first half"][0]), records(runs["second half"][0])
    whole = records(runs["fp16"][0])
    assert len(first) + len(second) == UPDATES
    # --fp16-scale-window 8 doubles the scale every 8 clean updates: a reset would restart it
    assert second[0]["loss_scale"] == whole[UPDATES // 2]["loss_scale"] > whole[0]["loss_scale"]
    resumed = [float(r["loss"]) for r in first + second]
    assert max(abs(a - b) for a, b in zip(resumed, curve(runs["fp16"][0]))) <= CURVE_TOLERANCE


def test_bf16_autocast_with_fairseq_half_precision_flags_is_a_clear_error(runs):
    proc = runs["both"][0]
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == (
        "fairseq-train: error: --bf16-autocast keeps fp32 weights: drop --fp16/--bf16/--amp/--memory-efficient-fp16/"
        "--memory-efficient-bf16")
    # before any update: no checkpoint (fairseq's own crash.pt dump aside)
    assert not [f for f in checkpoints(runs["both"][1]) if f.startswith("checkpoint")]


class _Base:
    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        # fairseq's own train_step, reduced to what matters here: forward, then backward
        loss, _, _ = criterion(model, sample)
        optimizer.backward(loss)
        return loss

    def valid_step(self, sample, model, criterion):
        return criterion(model, sample)[0]


class _Task(BF16AutocastMixin, _Base):
    def __init__(self, on):
        self.cfg = AutocastConfig(bf16_autocast=on)


def _spy_step(on, valid=False):
    seen = {}
    model = torch.nn.Linear(4, 4)

    def criterion(m, sample):
        seen["autocast"] = torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu")
        out = m(sample)
        seen["activation"] = out.dtype
        return out.float().pow(2).sum(), 1, {}

    def backward(loss):
        seen["autocast in backward"] = torch.is_autocast_enabled("cpu")
        loss.backward()

    task, x = _Task(on), torch.randn(3, 4)
    if valid:
        task.valid_step(x, model, criterion)
    else:
        task.train_step(x, model, criterion, types.SimpleNamespace(backward=backward), 0)
        seen["grad"] = model.weight.grad.dtype
    seen["weight"] = model.weight.dtype
    return seen


def test_bf16_autocast_runs_the_forward_in_bf16_and_the_backward_outside_with_fp32_weights():
    seen = _spy_step(True)
    assert seen == {"autocast": torch.bfloat16, "activation": torch.bfloat16, "autocast in backward": False,
                    "grad": torch.float32, "weight": torch.float32}
    assert _spy_step(True, valid=True)["activation"] == torch.bfloat16
    assert _spy_step(False)["activation"] == _spy_step(False, valid=True)["activation"] == torch.float32


class _Casts(TorchDispatchMode):
    """Counts the casts (``_to_copy``), those of them that read a parameter, and the batched copies."""

    def __init__(self, model):
        super().__init__()
        self.storages = {p.untyped_storage().data_ptr() for p in model.parameters()}
        self.casts = self.of_parameters = self.batched = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket is torch.ops.aten._to_copy:
            self.casts += 1
            self.of_parameters += args[0].untyped_storage().data_ptr() in self.storages
        self.batched += func.overloadpacket is torch.ops.aten._foreach_copy_
        return func(*args, **(kwargs or {}))


def _bf16_autocast_step(batched, uses, frozen=()):
    """Forwards (hidden states, then the LM head) and a backward of a tiny UniLMv2 model on a
    pre-training batch under bf16 autocast, through the task's train_step, the model run ``uses``
    times (a sequence-to-sequence forward runs the layers over the source and then the target): the
    loss, the gradients, the casts, the dtype of a layer's weight inside the forward, and the model."""
    d = make_dictionary()
    ds = make_dataset(random_documents(np.random.default_rng(0), d, 20), d, tokens_per_sample=48)
    batches = [ds.collater([ds[i] for i in range(4 * u, 4 * u + 4)])["net_input"] for u in range(uses)]
    model = without_dropout(tiny_transformer(len(d)))
    for name in frozen:
        model.get_parameter(name).requires_grad_(False)
    if not batched:
        model.autocast_weights = lambda: None  # autocast's own casts at each use
    seen = {}

    def criterion(m, sample):
        loss = 0
        for ni in batches:  # other inputs each time: a weight's gradients from its uses differ
            x = m(ni["src_tokens"], ni["positions"], ni["segments"], ni["kinds"], ni["steps"],
                  prefix_len=ni["prefix_len"])
            loss = loss + m.lm_head(x).float().logsumexp(-1).sum()
        seen["fc1 weight"] = m.layers[0].fc1.weight.dtype
        return loss, 1, {}

    with _Casts(model) as casts:
        loss = _Task(True).train_step(None, model, criterion, types.SimpleNamespace(backward=torch.Tensor.backward), 0)
    grads = {n: p.grad for n, p in model.named_parameters()}
    return loss.detach(), grads, casts, seen, model


@pytest.mark.parametrize("uses", [1, 2])
def test_bf16_autocast_casts_the_weights_in_one_batch_with_autocasts_loss_and_gradients_bit_for_bit(uses):
    want_loss, want_grads, autocast, seen, _ = _bf16_autocast_step(batched=False, uses=uses)
    loss, grads, batch, seen_batched, model = _bf16_autocast_step(batched=True, uses=uses)
    assert torch.equal(loss, want_loss)
    assert grads.keys() == want_grads.keys() and all(g is not None for g in grads.values())
    assert [n for n in grads if not torch.equal(grads[n], want_grads[n])] == []
    # the projections: 2 layers x 6, and the head's dense, x (weight, bias). Autocast casts each once
    # a forward, however often used, and its gradient back; batched: two copies for all of them. The
    # parameter casts left: the LM head's output weight (once) and the LayerNorms' weights and biases
    # at each use (2 layers x 2, the embeddings' and the head's: 12)
    weights = len(model.autocast_weights())
    assert weights == 2 * (2 * 6 + 1)
    assert autocast.of_parameters == weights + 1 + 12 * uses and autocast.batched == 0
    assert batch.of_parameters == 1 + 12 * uses and batch.batched == 2
    assert autocast.casts - batch.casts == 2 * weights
    assert seen == {"fc1 weight": torch.float32} and seen_batched == {"fc1 weight": torch.bfloat16}
    # after the step the modules hold their fp32 parameters again
    assert all(type(p) is torch.nn.Parameter and p.dtype == torch.float32 for p in model.parameters())
    assert model.layers[0].fc1.weight is dict(model.named_parameters())["layers.0.fc1.weight"]


def test_bf16_autocast_leaves_a_frozen_weight_to_autocast_without_a_gradient():
    """A weight that needs no gradient is not in the batch: the forward makes no weight gradient for
    it (nor would autocast's cast), and the others' gradients are autocast's, bit for bit."""
    frozen = ("layers.0.fc1.weight", "layers.1.attn.query.bias")
    _, want_grads, autocast, _, _ = _bf16_autocast_step(batched=False, uses=1, frozen=frozen)
    _, grads, batch, _, model = _bf16_autocast_step(batched=True, uses=1, frozen=frozen)
    assert [n for n in frozen if grads[n] is not None or want_grads[n] is not None] == []
    assert [n for n in grads if n not in frozen and not torch.equal(grads[n], want_grads[n])] == []
    assert batch.of_parameters == 1 + 12 + len(frozen)  # the head's output weight, LayerNorms, the frozen two


def _fp16_cfg(*extra):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, train_args("unused", "unused") + list(extra))
    return convert_namespace_to_omegaconf(args)


@pytest.mark.parametrize("kind", ["FP16Optimizer", "MemoryEfficientFP16Optimizer"])
def test_fairseq_fp16_optimizer_on_cpu_skips_an_overflow_halves_the_scale_then_steps(kind):
    cfg = _fp16_cfg("--fp16", "--fp16-no-flatten-grads", "--fp16-init-scale", "64", "--fp16-scale-window", "2")
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 8).half()
    params = list(model.parameters())
    cls = FP16Optimizer if kind == "FP16Optimizer" else MemoryEfficientFP16Optimizer
    opt = cls.build_optimizer(cfg, params)
    x = torch.randn(4, 8).half()

    def backward(poison=False):
        opt.zero_grad()
        opt.backward(model(x).float().pow(2).mean())  # scaled by the loss scale
        if poison:
            params[0].grad[0, 0] = float("inf")
        opt.multiply_grads(1.0)
        return opt.clip_grad_norm(0.0)  # checks for an overflow, as the trainer calls it

    before = [p.detach().clone() for p in params]
    with pytest.raises(OverflowError):  # the trainer catches it and skips the update
        backward(poison=True)
    assert opt.scaler.loss_scale == 32  # halved
    assert all(torch.equal(a, b) for a, b in zip(before, params))  # nothing stepped
    for _ in range(2):
        backward()
        opt.step()
    assert all(p.dtype == torch.float16 for p in params)
    assert not all(torch.equal(a, b) for a, b in zip(before, params))  # stepped, synced back to fp16
    assert opt.scaler.loss_scale == 64  # two clean updates (window 2): doubled again
    state = opt.state_dict()
    assert state["loss_scale"] == 64
    fresh = cls.build_optimizer(cfg, params)
    fresh.load_state_dict(state)
    assert fresh.scaler.loss_scale == 64
