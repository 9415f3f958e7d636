#!/usr/bin/env python
"""Answer the questions of an official SQuAD JSON file with a fine-tuned pmlm_squad checkpoint
and write the official ``predictions.json`` ({id: answer text}); for SQuAD 2.0 also the
no-answer odds file the official script takes as ``--na-prob-file``. When the JSON has the
gold answers, prints the official EM/F1 (and for 2.0 the best no-answer threshold).

    python scripts/squad/predict_squad.py --checkpoint checkpoints/squad/checkpoint_best.pt \
        --json dev-v2.0.json --out predictions.json [--null-odds null_odds.json] [--data data-bin/NAME]
"""
import argparse
import json
import logging
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/, for lib/
from lib.import_guard import interruptible  # noqa: E402 - Ctrl-C during the imports below, one line

with interruptible():
    import torch
    from fairseq import checkpoint_utils

    import fairseq_pmlm  # noqa: F401  (registers the task and the model)
    from fairseq_pmlm.criterions.squad import span_logits
    from fairseq_pmlm.data.squad_dataset import SquadDataset
    from fairseq_pmlm.data.squad_decode import best_answer
    from fairseq_pmlm.errors import BadInput, exit_with_error
    from fairseq_pmlm.public_data.squad_json import SquadFormatError
    from fairseq_pmlm.runtime.checkpoint_files import write_atomically
    from fairseq_pmlm.scoring.squad_eval import evaluate


def predict(checkpoint, json_path, data=None, batch_size=32, n_best=20, max_answer_len=30, null_threshold=0.0,
            cpu=False, null_odds=None):
    """-> (examples, predictions {id: text}, null_odds {id: float} or None, version_2). ``null_odds``:
    the file they are asked for, refused before any question is answered where there are none."""
    overrides = {"data": data} if data else {}
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)], arg_overrides=overrides)
    if null_odds and not task.cfg.squad_v2:
        raise BadInput(f"--null-odds {null_odds}: {checkpoint} was fine-tuned for SQuAD 1.1 (no --squad-v2), "
                       "which has no unanswerable questions and so no odds to write")
    model = models[0].eval()
    use_cuda = torch.cuda.is_available() and not cpu
    if use_cuda:
        model.cuda()
    examples, encoded, features = task.squad_features(json_path, training=False)
    dataset = SquadDataset(features, task.dictionary, shuffle=False)
    logits = [None] * len(features)
    with torch.no_grad():
        for i in range(0, len(features), batch_size):
            batch = dataset.collater(list(range(i, min(i + batch_size, len(features)))))
            if use_cuda:
                batch = {k: (v.cuda() if torch.is_tensor(v) else v) for k, v in batch.items()}
                batch["net_input"] = {k: v.cuda() for k, v in batch["net_input"].items()}
            start, end = span_logits(model, batch)
            for j, idx in enumerate(batch["id"].tolist()):
                logits[idx] = (start[j].cpu(), end[j].cpu())
    by_example = {}
    for f, lg in zip(features, logits):
        by_example.setdefault(f.example_index, []).append((f, lg))
    v2 = task.cfg.squad_v2
    predictions, odds = {}, {}
    for i, ex in enumerate(examples):
        fs = by_example.get(i, [])
        text, o = best_answer(ex, encoded[i], [f for f, _ in fs], [lg for _, lg in fs], n_best, max_answer_len,
                              v2, null_threshold)
        predictions[ex.qid], odds[ex.qid] = text, o
    return examples, predictions, (odds if v2 else None), v2


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--json", required=True, help="official SQuAD JSON (dev-v1.1.json, dev-v2.0.json, ...)")
    p.add_argument("--out", required=True, help="predictions.json to write")
    p.add_argument("--null-odds", help="SQuAD 2.0: also write the no-answer odds (the official --na-prob-file)")
    p.add_argument("--data", help="directory with dict.txt and spm.model (default: the checkpoint's)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--n-best", type=int, default=20)
    p.add_argument("--max-answer-len", type=int, default=30, help="in tokens")
    p.add_argument("--null-threshold", type=float, default=0.0, help="SQuAD 2.0: answer \"\" above these odds")
    p.add_argument("--cpu", action="store_true")
    a = p.parse_args()
    logging.basicConfig(level=logging.WARNING, force=True)  # force: importing fairseq configured it, at DEBUG
    try:
        examples, preds, odds, v2 = predict(a.checkpoint, a.json, a.data, a.batch_size, a.n_best, a.max_answer_len,
                                            a.null_threshold, a.cpu, a.null_odds)
    except (SquadFormatError, FileNotFoundError, BadInput) as e:
        exit_with_error("predict_squad.py", e)
    # whole or not at all (an interrupted or full-disk write leaves the old file, or none)
    write_atomically(a.out, lambda f: f.write(json.dumps(preds, ensure_ascii=False).encode("utf-8")))
    if a.null_odds:
        write_atomically(a.null_odds, lambda f: f.write(json.dumps(odds).encode("utf-8")))
    print(f"predict_squad: wrote {len(preds)} answers to {a.out}")
    if all(ex.answers or ex.is_impossible for ex in examples):
        print("predict_squad: " + json.dumps(evaluate(examples, preds, odds)))


if __name__ == "__main__":
    main()
