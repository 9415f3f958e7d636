#!/usr/bin/env python
"""Facts the shell recipes need, printed one per line, without importing fairseq (the
plugin package is entered through a bare stand-in, as scripts/wordpiece_encode.py does).

    python scripts/recipe_info.py bpe-flags DIR        # fairseq --bpe flags of DIR's tokenizer
    python scripts/recipe_info.py model-flags CKPT     # --arch and model flags of a checkpoint
    python scripts/recipe_info.py copy-tokenizer SRC DEST
"""
import argparse
import os
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
package = types.ModuleType("fairseq_pmlm")
package.__path__ = [os.path.join(ROOT, "fairseq_pmlm")]
sys.modules.setdefault("fairseq_pmlm", package)

from fairseq_pmlm.weights import tokenizer_files  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(prog="recipe_info.py", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("bpe-flags").add_argument("dir")
    sub.add_parser("model-flags").add_argument("checkpoint")
    cp = sub.add_parser("copy-tokenizer")
    cp.add_argument("src")
    cp.add_argument("dest")
    a = p.parse_args(argv)
    try:
        if a.command == "bpe-flags":
            print("\n".join(tokenizer_files.find(a.dir).fairseq_flags()))
        elif a.command == "copy-tokenizer":
            print(tokenizer_files.copy(a.src, a.dest).kind)
        else:
            if not os.path.isfile(a.checkpoint):
                raise ValueError(f"checkpoint not found: {a.checkpoint}")
            from fairseq_pmlm.weights.checkpoint import flags_of_checkpoint

            print("\n".join(flags_of_checkpoint(a.checkpoint)))
    except (ValueError, OSError) as e:
        print(f"recipe_info.py: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
