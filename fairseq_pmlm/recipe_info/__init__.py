"""Facts the shell recipes need, printed one per line; errors are one line and exit status 2.

    python scripts/recipe_info.py bpe-flags DIR          # fairseq --bpe flags of DIR's tokenizer
    python scripts/recipe_info.py model-flags CKPT       # --arch and model flags of a checkpoint
    python scripts/recipe_info.py copy-tokenizer SRC DEST
    python scripts/recipe_info.py schedule --examples N|--items PREFIX.idx --batch B --epochs E --warmup-ratio R
                                           [--updates U] # "UPDATES WARMUP_UPDATES"
    python scripts/recipe_info.py glue-meta DIR          # "TASK TRAIN_EXAMPLES METRIC NUM_CLASSES"
    python scripts/recipe_info.py glue-report LOG TASK METRIC [--best M --minimize]  # the best dev epoch of a GLUE run
    python scripts/recipe_info.py gpus                   # the GPUs torch can use
    python scripts/recipe_info.py count-items PREFIX.idx # items of a binarized split (its mmap index header)
    python scripts/recipe_info.py separator DIR [--source-lang L]  # the dict symbol carrying [X_SEP] ("" if none)
    python scripts/recipe_info.py run-of CHECKPOINT      # "TASK UPDATES INIT" of a training checkpoint
    python scripts/recipe_info.py squad-windows --data DIR --train-json F [--max-positions 384]
                                                [--doc-stride 128] [--squad-v2]   # its training windows

Each is a function, in the module of what it answers (``schedule``, ``glue``, ``checkpoints``,
``data``; the tokenizer's, the item counts' and the model flags' live with those files), and a
subcommand of the command line here (``main``, run as ``scripts/recipe_info.py``). A recipe asks
for all it needs in one run, as bash arrays to ``eval`` (``recipe_facts`` in scripts/lib/common.sh):

    python scripts/recipe_info.py --shell BPE bpe-flags data-bin/sum + PAIRS count-items data-bin/sum/test.source.idx
    BPE=(--bpe sentencepiece --sentencepiece-model /abs/data-bin/sum/spm.model)
    PAIRS=(2000)
"""
import argparse
import os
import shlex
import sys

from .. import disk_full
from ..data.databin.writer import index_items
from ..errors import report_error
from ..text import tokenizer_files
from .data import separator_of
from .glue import glue_meta, glue_report
from .schedule import schedule


def parser():
    p = argparse.ArgumentParser(prog="recipe_info.py", description=__doc__.split("\n")[0],
                                epilog="--shell NAME SUBCOMMAND ARGS [+ NAME SUBCOMMAND ARGS ...]: the answers as bash "
                                       "array assignments, NAME=(LINE ...), from one run")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("bpe-flags").add_argument("dir")
    sub.add_parser("model-flags").add_argument("checkpoint")
    cp = sub.add_parser("copy-tokenizer")
    cp.add_argument("src")
    cp.add_argument("dest")
    s = sub.add_parser("schedule")
    n = s.add_mutually_exclusive_group(required=True)
    n.add_argument("--examples", type=int)
    n.add_argument("--items", metavar="PREFIX.idx", help="the items of a binarized split (count-items) as --examples")
    s.add_argument("--batch", type=int, required=True)
    s.add_argument("--epochs", type=int, required=True)
    s.add_argument("--warmup-ratio", type=float, required=True)
    s.add_argument("--updates", type=int, help="this many updates instead of the epochs'")
    sub.add_parser("glue-meta").add_argument("dir")
    g = sub.add_parser("glue-report")
    for name in ("log", "task", "metric"):
        g.add_argument(name)
    g.add_argument("--best", help="the --best-checkpoint-metric, if not the task's metric")
    g.add_argument("--minimize", action="store_true", help="its lowest value is the best (a loss)")
    sub.add_parser("gpus")
    sub.add_parser("count-items").add_argument("idx")
    sep = sub.add_parser("separator")
    sep.add_argument("dir")
    sep.add_argument("--source-lang", default="source", help="the pairs' source suffix (dict.SOURCE_LANG.txt)")
    sub.add_parser("run-of").add_argument("checkpoint")
    w = sub.add_parser("squad-windows")
    w.add_argument("--data", required=True)
    w.add_argument("--train-json", required=True)
    w.add_argument("--max-positions", type=int, default=384)
    w.add_argument("--doc-stride", type=int, default=128)
    w.add_argument("--squad-v2", action="store_true")
    return p


def run(a):
    """The lines to print for the parsed command ``a``. The answers that need torch or fairseq
    import them here: the others answer in 0.1 s, not the 1-3 s of those imports
    (scripts/recipe_info.py imports this module without the plugin's registration)."""
    if a.command == "bpe-flags":
        return tokenizer_files.find(a.dir).fairseq_flags()
    if a.command == "copy-tokenizer":
        return [tokenizer_files.copy(a.src, a.dest).kind]
    if a.command == "model-flags":
        if not os.path.isfile(a.checkpoint):
            raise ValueError(f"checkpoint not found: {a.checkpoint}")
        from ..weights.checkpoint import flags_of_checkpoint

        return flags_of_checkpoint(a.checkpoint)
    if a.command == "schedule":
        examples = index_items(a.items) if a.items else a.examples
        return [" ".join(map(str, schedule(examples, a.batch, a.epochs, a.warmup_ratio, a.updates)))]
    if a.command == "glue-meta":
        return [" ".join(map(str, glue_meta(a.dir)))]
    if a.command == "glue-report":
        return glue_report(a.log, a.task, a.metric, a.best, not a.minimize)
    if a.command == "gpus":
        import torch

        return [str(torch.cuda.device_count())]
    if a.command == "count-items":
        return [str(index_items(a.idx))]
    if a.command == "separator":
        return [separator_of(a.dir, a.source_lang) or ""]
    if a.command == "run-of":
        from .checkpoints import run_of

        return [" ".join(map(str, run_of(a.checkpoint)))]
    from .data import squad_windows

    return [str(squad_windows(a.data, a.train_json, a.max_positions, a.doc_stride, a.squad_v2))]


def shell_assignments(argv):
    """``NAME SUBCOMMAND ARGS [+ NAME SUBCOMMAND ARGS ...]`` -> one bash array assignment a query,
    ``NAME=(LINE ...)`` with each printed line one quoted element."""
    queries = [[]]
    for arg in argv:
        if arg == "+":
            queries.append([])
        else:
            queries[-1].append(arg)
    out = []
    for query in queries:
        if len(query) < 2 or not query[0].isidentifier():
            raise ValueError(f"--shell: expected NAME SUBCOMMAND ARGS between +, got {' '.join(query)!r}")
        lines = run(parser().parse_args(query[1:]))
        out.append(f"{query[0]}=({' '.join(shlex.quote(line) for line in lines)})")
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["--shell"]:
            print("\n".join(shell_assignments(argv[1:])))
        else:
            print("\n".join(run(parser().parse_args(argv))))
    except (ValueError, OSError) as e:  # (a full disk: "PATH: cannot write it: ...", as everywhere)
        return report_error("recipe_info.py", disk_full.one_line(e, e.__traceback__) or e)
    return 0
