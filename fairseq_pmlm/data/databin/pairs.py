"""``s2s/prepare.sh``'s recipe: RAW/{train,valid,test}.{source,target} -> fairseq-preprocess's
pair layout, tokenised and numbered as the pre-training data (its dictionary on both sides, its
tokenizer files copied)."""
import os

from ...text import tokenizer_files
from ...text.token_ids import lookup_table
from . import PrepareError
from .dictionary import check_dict_is_vocab_cut, load_dictionary
from .prepare import Preparer, open_output, print_stats, say_separators
from .reading import count_lines, has_text


def prepare_pairs(a):
    """s2s/prepare.sh: RAW/{train,valid,test}.{source,target} -> DEST/NAME in fairseq-preprocess's
    pair layout ({split}.source-target.{source,target}.{bin,idx}, dict.{source,target}.txt),
    the pre-training dictionary on both sides."""
    raw, pre = a.raw, a.pretrain_data
    if not os.path.isdir(raw):
        raise PrepareError(f"raw directory not found: {raw}")
    if not os.path.isfile(os.path.join(pre, "dict.txt")):
        raise PrepareError(f"file not found: {os.path.join(pre, 'dict.txt')} (run scripts/prepare_data.sh "
                           "or convert_checkpoint.py import)")
    try:
        tok_files = tokenizer_files.find(pre)
    except ValueError as e:
        raise PrepareError(str(e)) from None
    splits = {}
    for split in ("train", "valid", "test"):
        src, tgt = (os.path.join(raw, f"{split}.{side}") for side in ("source", "target"))
        if not (os.path.isfile(src) or os.path.isfile(tgt)):
            raise PrepareError(f"no {split} split: {src} and {tgt} are missing (train, valid and test are needed)")
        for path in (src, tgt):
            if not os.path.isfile(path):
                raise PrepareError(f"file not found: {path}")
        ns, nt = count_lines(src), count_lines(tgt)
        if ns != nt:
            raise PrepareError(f"{src} has {ns} lines but {tgt} has {nt}")
        if ns == 0 or not (has_text(src) or has_text(tgt)):
            raise PrepareError(f"{src} and {tgt} hold no example")
        splits[split] = (src, tgt)
    inputs = [p for pair in splits.values() for p in pair] + [os.path.join(pre, "dict.txt"), tok_files.path]
    if tok_files.kind == "sentencepiece":
        spec = ("spm", tok_files.path, None)
    else:
        spec = ("wp", tok_files.path, tok_files.cased)
    dictionary = load_dictionary(os.path.join(pre, "dict.txt"))  # read before any text is tokenised
    output, prep = open_output(a.out, a.force, inputs), None
    try:
        prep = Preparer(a.prog, output, spec, a.workers)
        tok = prep.tokenizer
        if spec[0] == "wp":
            check_dict_is_vocab_cut(dictionary, tok, os.path.join(pre, "dict.txt"), tok_files.path)
        prep.say(f"{tok_files.kind} of {tok_files.path}, {a.workers} worker(s)")
        encoded, separators = {}, {}
        for split, pair in splits.items():
            for side, path in zip(("source", "target"), pair):
                parts, _, counts = prep.encode(f"{split}.{side}", path, [(0, os.path.getsize(path))])
                encoded[split, side] = parts
                separators[path] = int(counts[tok.sep_id])
        where = next((p for p, n in separators.items() if n), None)
        # a literal "[X_SEP]" in ordinary text (a docstring that names it) is no reason to stop; in
        # summaries it would be, so say it where the user sees it
        say_separators(prep, where, sum(separators.values()), dictionary, os.path.join(pre, "dict.txt"),
                       "for sentence-separated summaries use a dictionary that has one")
        table = lookup_table(tok.pieces(), dictionary)
        built = prep.built
        for (split, side), parts in encoded.items():
            stats = prep.write(parts, table, os.path.join(built, f"{split}.source-target.{side}"), len(dictionary))
            print_stats(prep, f"{split}.{side}", *stats)
        for side in ("source", "target"):
            dictionary.save(os.path.join(built, f"dict.{side}.txt"))
        tokenizer_files.copy(pre, built)
        prep.finish()
        prep.close()
        prep.summary()
        prep.say(f"wrote {prep.out}")
    finally:
        output.close()
        if prep is not None:
            prep.close()
