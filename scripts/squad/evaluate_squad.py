#!/usr/bin/env python
"""The official SQuAD v1.1 / v2.0 evaluation of a predictions.json:

    python scripts/squad/evaluate_squad.py DATA.json predictions.json [--na-prob-file null_odds.json]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/, for lib/
from lib.import_guard import without_registration  # noqa: E402

without_registration()  # it needs no fairseq
from fairseq_pmlm.errors import exit_with_error  # noqa: E402
from fairseq_pmlm.public_data.squad_json import SquadFormatError, read_squad_json  # noqa: E402
from fairseq_pmlm.scoring.squad_eval import evaluate  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data_file")
    p.add_argument("pred_file")
    p.add_argument("--na-prob-file", help="SQuAD 2.0: no-answer scores, for the best threshold")
    a = p.parse_args()
    try:
        examples, _ = read_squad_json(a.data_file, training=False, version_2=True)
    except SquadFormatError as e:
        exit_with_error("evaluate_squad.py", e)
    with open(a.pred_file) as f:
        preds = json.load(f)
    odds = None
    if a.na_prob_file:
        with open(a.na_prob_file) as f:
            odds = json.load(f)
    print(json.dumps(evaluate(examples, preds, odds), indent=2))


if __name__ == "__main__":
    main()
