"""Raw text -> fairseq data-bin, streamed and in parallel: the engine of ``prepare_data.sh``
(documents, optional shards) and ``s2s/prepare.sh`` (source/target pairs), as the command line
``scripts/text_to_databin.py`` runs (the stages: ``data/databin/__init__.py``). Errors are one
line (exit status 2); Ctrl-C and SIGTERM print "interrupted: nothing written" (130)."""
import argparse
import os
import time

from ...runtime.interrupts import one_line_exit
from .corpus import prepare_corpus
from .pairs import prepare_pairs
from .prepare import _START


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prog", default="text_to_databin", help="name used in messages")
    p.add_argument("--out", required=True, help="output directory (DEST/NAME)")
    p.add_argument("--force", action="store_true", help="replace an existing output")
    p.add_argument("--workers", type=int, default=1)
    sub = p.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("corpus")
    c.add_argument("--train", nargs="+", required=True)
    c.add_argument("--valid", required=True)
    c.add_argument("--spm-model")
    c.add_argument("--vocab-size", type=int, default=8000)
    c.add_argument("--srcdict")
    c.add_argument("--wordpiece-vocab")
    c.add_argument("--wordpiece-case", choices=["auto", "cased", "uncased"], default="auto")
    c.add_argument("--shards", type=int, default=1)
    s = sub.add_parser("pairs")
    s.add_argument("--raw", required=True)
    s.add_argument("--pretrain-data", required=True)
    a = p.parse_args(argv)
    if a.workers < 1:
        p.error("--workers must be at least 1")
    _START[0] = time.time()
    # one tokenising thread per process, --workers processes: what --workers says is what runs
    os.environ["TOKENIZERS_PARALLELISM"] = "false"

    # the temporary directory is removed on SIGTERM as on Ctrl-C
    return one_line_exit(a.prog, lambda: (prepare_corpus if a.mode == "corpus" else prepare_pairs)(a), out=a.out)
