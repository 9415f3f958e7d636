"""``prepare_data.sh``'s recipe: documents -> one data-bin, or shards cut at document starts; the
tokeniser a given or trained sentencepiece model (trained here, in a child process), or a BERT
WordPiece vocabulary (its converted dictionary, or a given cut of it)."""
import os

import numpy as np

from ...text import tokenizer_files
from ...text.token_ids import lookup_table
from . import PrepareError
from .dictionary import (
    check_dict_is_vocab_cut,
    check_reserved,
    dictionary_from_counts,
    load_dictionary,
    load_dictionary_text,
)
from .prepare import Preparer, open_output, print_stats, say_separators
from .reading import has_text, shard_plan
from .workers import Workers
from .writer import write_tokenizer_files


def train_sentencepiece(files, model, vocab_size, prog):
    import sentencepiece as spm

    try:
        # written through Python: its own writer leaves a cut model on a full disk and says nothing
        with open(model, "wb") as f:
            spm.SentencePieceTrainer.train(
                input=",".join(files), model_writer=f, vocab_size=vocab_size,
                model_type="bpe", character_coverage=1.0,
                input_sentence_size=2_000_000, shuffle_input_sentence=True,  # a sample caps memory on big corpora
                minloglevel=2,
            )
    except OSError as e:  # (a full disk: named, as the run's output)
        raise OSError(e.errno, e.strerror, e.filename or model) from None
    except RuntimeError as e:
        msg = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        if "Vocabulary size too high" in msg:  # "... Please set it to a value <= N."
            raise PrepareError(f"--vocab-size {vocab_size} is too large for {', '.join(files)} "
                               f"(sentencepiece: {msg[msg.index('Vocabulary size too high'):]})") from None
        raise PrepareError(f"sentencepiece training on {', '.join(files)} failed: {msg}") from None


def prepare_corpus(a):
    """prepare_data.sh: documents -> DEST/NAME (one data-bin) or DEST/NAME/shard0..K-1."""
    train_files = a.train
    inputs = train_files + [a.valid] + [p for p in (a.spm_model, a.srcdict, a.wordpiece_vocab) if p]
    for path in inputs:
        if not os.path.isfile(path):
            raise PrepareError(f"file not found: {path}")
    if not any(has_text(p) for p in train_files):
        raise PrepareError(f"training file has no text (only blank lines or empty): {', '.join(train_files)}")
    if not has_text(a.valid):
        raise PrepareError(f"validation file has no text (only blank lines or empty): {a.valid}")
    if a.shards < 1:
        raise PrepareError("--shards must be at least 1")
    if a.wordpiece_vocab:
        cased = {"cased": True, "uncased": False}.get(a.wordpiece_case)
        if cased is None:  # auto: as the hub and s2s/prepare.sh read it (tokenizer_config.json, else the vocab)
            try:
                cased = tokenizer_files.read_casing(os.path.dirname(os.path.abspath(a.wordpiece_vocab)))
            except ValueError as e:
                raise PrepareError(f"--wordpiece-case auto: {e}") from None
        spec = ("wp", os.path.abspath(a.wordpiece_vocab), cased)
    else:
        spec = ("spm", None, None)
    given = None
    if a.srcdict:  # read and checked before any text is tokenised, as fairseq-preprocess reads it first
        given = load_dictionary(a.srcdict)
        check_reserved(given, a.srcdict)
    output, prep = open_output(a.out, a.force, inputs), None
    try:
        if spec[0] == "spm":
            if a.spm_model:
                spec = ("spm", os.path.abspath(a.spm_model), None)
            else:
                model = os.path.join(output.staging, "spm.model")  # a scratch file of the run
                print(f"{a.prog.replace('.sh', '')}: training sentencepiece (bpe, vocab {a.vocab_size}) on "
                      f"{', '.join(train_files)}", flush=True)
                # in a child process: the trainer's sample (up to 2M sentences, ~1 GB) is freed
                # before the workers fork, instead of staying in every process
                trainer = Workers(1)
                try:
                    trainer.call(train_sentencepiece, train_files, model, a.vocab_size, a.prog)
                finally:  # on Ctrl-C or SIGTERM too: the trainer stops at once
                    trainer.close()
                spec = ("spm", model, None)
        prep = Preparer(a.prog, output, spec, a.workers)
        tok = prep.tokenizer
        if spec[0] == "wp":
            prep.say(f"{'cased' if tok.cased else 'uncased'} WordPiece of {a.wordpiece_vocab}, "
                     f"{a.workers} worker(s)")
        else:
            prep.say(f"sentencepiece {a.spm_model or '(trained here)'}, {a.workers} worker(s)")
        # shards: the training text cut at document boundaries into K pieces of about equal size
        shard_ranges = shard_plan(train_files, a.shards)
        shard_parts = []
        counts = np.zeros(prep.eos_code + 1, dtype=np.int64)
        if given is not None and spec[0] == "wp":
            check_dict_is_vocab_cut(given, tok, a.srcdict, a.wordpiece_vocab)
        for k, ranges in enumerate(shard_ranges):
            parts = []
            for path, start, end in ranges:
                if parts and not prep.ends_document(parts[-1]):
                    # the end of a file ends its last document (as at a shard cut there): the next
                    # file's first document is not merged into it
                    parts.append(prep.document_boundary())
                    counts[prep.eos_code] += 1
                p, _, c = prep.encode(f"train{' shard %d' % k if a.shards > 1 else ''}", path, [(start, end)])
                parts += p
                counts += c
            shard_parts.append(parts)
        if not counts[:prep.eos_code].any():
            raise PrepareError(f"training text has no token (only blank lines, whitespace or characters the "
                               f"tokeniser drops): {', '.join(train_files)}")
        valid_parts, _, valid_counts = prep.encode("valid", a.valid, [(0, os.path.getsize(a.valid))])
        if not valid_counts[:prep.eos_code].any():
            raise PrepareError(f"validation file has no token (only blank lines, whitespace or characters the "
                               f"tokeniser drops): {a.valid}")
        pieces = tok.pieces()
        if given is not None:
            dictionary = given
        else:
            if spec[0] == "wp":
                dictionary = load_dictionary_text(tok.mapping.dict_txt())
            else:
                dictionary = dictionary_from_counts(pieces, counts, prep.eos_code)
            check_reserved(dictionary, "the dictionary made here")
        # pre-training reads [X_SEP] as fine-tuning's summaries do: one token (said, as the pairs route says it)
        n_sep = int(counts[tok.sep_id] + valid_counts[tok.sep_id])
        say_separators(prep, "the --train/--valid text", n_sep, dictionary, a.srcdict or "the dictionary made here",
                       "a dictionary with that row keeps it one token, as fine-tuning's summaries read it")
        table = lookup_table(pieces, dictionary)
        built = prep.built
        dirs = [built] if a.shards == 1 else [os.path.join(built, f"shard{k}") for k in range(a.shards)]
        for k, d in enumerate(dirs):
            os.makedirs(d, exist_ok=True)
            dictionary.save(os.path.join(d, "dict.txt"))
            write_tokenizer_files(spec, d)
            stats = prep.write(shard_parts[k], table, os.path.join(d, "train"), len(dictionary))
            if stats[0] == 0 or stats[1] == stats[0]:
                raise PrepareError(f"shard {k} would hold no text: use fewer --shards than {a.shards} "
                                   f"for {', '.join(train_files)}")
            print_stats(prep, f"train{' shard %d' % k if a.shards > 1 else ''}", *stats)
        print_stats(prep, "valid", *prep.write(valid_parts, table, os.path.join(dirs[0], "valid"),
                                                   len(dictionary)))
        prep.finish()
        prep.close()
        prep.summary()
        final = [prep.out] if a.shards == 1 else [os.path.join(prep.out, f"shard{k}") for k in range(a.shards)]
        prep.say(f"wrote {prep.out} ({len(dictionary) - dictionary.nspecial} dictionary entries"
                 f"{', %d shards' % a.shards if a.shards > 1 else ''})")
        if a.shards > 1:
            prep.say(f"train with: fairseq-train {':'.join(final)} ...")
    finally:
        if prep is not None:
            prep.close()
        output.close()
