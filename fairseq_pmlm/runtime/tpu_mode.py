"""fairseq's ``--bf16`` and ``--memory-efficient-bf16`` turn on its TPU mode (``options.py``:
``if args.bf16: args.tpu = True``). Without torch_xla fairseq-train stopped in its Trainer with
"'NoneType' object has no attribute 'xla_device'" (any task: the plugin's, or sentence_prediction
for GLUE), and fairseq-generate ignored the flag. Both now say it in one line: the Trainer asks
``utils.get_tpu_device`` (replaced here), and the plugin's tasks check their config when built,
before any data loads (``tasks/autocast.py``)."""
import importlib.util

from fairseq import utils

from ..errors import BadInput

PROBLEM = ("--bf16 (and --memory-efficient-bf16) is fairseq's TPU mode and this machine has no TPU (torch_xla): "
           "for bf16 on a GPU or CPU use --bf16-autocast")


def tpu_problem(tpu):
    """The line for fairseq's TPU mode where torch_xla is missing; None otherwise."""
    return PROBLEM if tpu is True and importlib.util.find_spec("torch_xla") is None else None


def get_tpu_device():
    problem = tpu_problem(True)
    if problem:
        raise BadInput(problem)
    return _fairseq_get_tpu_device()


# fairseq's own, kept on its module: a second import of the plugin wraps it, not ours
_fairseq_get_tpu_device = utils.__dict__.setdefault("_pmlm_get_tpu_device", utils.get_tpu_device)
utils.get_tpu_device = get_tpu_device
