"""Export a plugin checkpoint for use outside the plugin, with its behaviour (docs/DESIGN.md §7).

Two targets, both imported back by ``convert.import_checkpoint`` to the same checkpoint, bit for bit
(unless the s2s-ft export had to give a cut dictionary its whole vocab back, or --pseudo-as-mask):

- ``hf``: a Hugging Face directory that ``AutoModel`` / ``AutoModelForMaskedLM.from_pretrained(DIR,
  trust_remote_code=True)`` read: ``model.safetensors`` (``BertForMaskedLM`` keys plus the relative
  table at ``bert.encoder.rel_pos_bias.weight``), ``config.json`` whose ``auto_map`` names
  ``modeling_unilmv2.py`` (a copy of weights/hf_modeling.py), the tokenizer files. It computes
  what the plugin computes. A model with a relative table gets ``model_type`` ``unilmv2``, which
  ``transformers`` refuses without the modeling code instead of dropping the table; one without
  is a plain BERT (``model_type`` ``bert``, no ``auto_map``, no modeling code) that transformers'
  own ``BertModel`` / ``BertForMaskedLM`` read, through the Auto classes too.
- ``s2s-ft``: what s2s-ft's ``--model_type unilm`` reads (the released UniLMv2 layout:
  ``pytorch_model.bin`` with fused ``qkv_linear``, ``q_bias``/``v_bias`` and
  ``bert.encoder.rel_pos_bias.weight``; ``config.json`` with ``rel_pos_bins``/``max_rel_pos``;
  ``vocab.txt`` with ``[PAD]`` at id 0, which s2s-ft pads with and its loss ignores). s2s-ft feeds
  [MASK]'s id as every pseudo token and has only WordPiece: a sequence-to-sequence model fine-tuned
  with [P] (``--pseudo-token p``) or a sentencepiece model is refused, not exported to decode
  otherwise there.

The tokenizer, the dictionary and the data directory are found where the hub finds them; none of
them, nor the checkpoint, is ever inside the output directory that --force replaces.
"""
import json
import os
import shutil
from dataclasses import fields

import torch

from ..arch import TransformerShape
from ..data.dict_files import dict_names, dictionary_in
from ..data.pmlm_dictionary import load_pmlm_dictionary
from ..runtime import checkpoint_files
from ..symbols import MASK_SYMBOL, PSEUDO_SYMBOL
from ..text import tokenizer_files, vocab, wordpiece
from . import checkpoint, layouts, s2sft
from .layouts import ConversionError

FORMATS = ("hf", "s2s-ft")
# hf_modeling.py travels as modeling_unilmv2.py, the name config.json's auto_map gives it
MODELING_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_modeling.py")
MODELING_FILE = "modeling_unilmv2.py"
AUTO_MAP = {"AutoConfig": "modeling_unilmv2.UniLMv2Config", "AutoModel": "modeling_unilmv2.UniLMv2Model",
            "AutoModelForMaskedLM": "modeling_unilmv2.UniLMv2ForMaskedLM"}


def _dictionary_path(ckpt_path, state, dict_path):
    """--dict, else where the hub finds it: beside the checkpoint, else in the data directory its
    training recorded."""
    if dict_path:
        return dict_path
    source_lang = (state["cfg"].get("task") or {}).get("source_lang")
    for d in (os.path.dirname(os.path.abspath(ckpt_path)), *_data_dirs(state)[:1]):
        found = dictionary_in(d, source_lang)
        if found:
            return found
    raise ConversionError(f"no {' or '.join(dict_names(source_lang))} beside {ckpt_path} or in its task's data "
                          "directory: pass --dict")


def _data_dirs(state):
    """The data directories the checkpoint's training read (--data DIR0:DIR1:...)."""
    data = str((state["cfg"].get("task") or {}).get("data") or "")
    return [d for d in data.split(os.pathsep) if d]


def find_tokenizer(state, dict_path):
    """The checkpoint's tokenizer (text/tokenizer_files.py: its --bpe while that file exists, else
    the one beside its dictionary), or None."""
    try:
        return tokenizer_files.of_checkpoint(state["cfg"].get("bpe"), os.path.dirname(os.path.abspath(dict_path)))
    except ValueError as e:
        raise ConversionError(str(e)) from None


def read_checkpoint(ckpt_path):
    """The fairseq checkpoint of a unilmv2 model, else a one-line error naming what it is."""
    if not os.path.isfile(ckpt_path):
        raise ConversionError(f"not found: {ckpt_path}")
    try:  # the cfg first (memory-mapped, no fairseq upgrade step), then fairseq's own load
        peek = checkpoint_files.read(ckpt_path)  # (an empty, damaged or foreign file: its one line)
        model_cfg = ((peek.get("cfg") or {}).get("model") or {}) if isinstance(peek, dict) else {}
        if not str(model_cfg.get("_name", "")).startswith("unilmv2") or not isinstance(peek.get("model"), dict):
            what = model_cfg.get("_name") or "no fairseq model"
            raise ConversionError(f"{ckpt_path} is not a checkpoint of this plugin's unilmv2 model (it holds {what!r})")
        return checkpoint.load(ckpt_path)
    except ConversionError:
        raise
    except checkpoint_files.CheckpointError as e:
        raise ConversionError(str(e)) from None
    except Exception as e:  # noqa: BLE001  (any unreadable file: one line naming it)
        raise ConversionError(f"cannot read {ckpt_path}: {type(e).__name__}: {str(e).splitlines()[0]}") from None


def load_model(ckpt_path, state, dict_path, notes):
    """(model, dictionary) of the checkpoint; task heads (GLUE, SQuAD) have no place in either
    export: left out, with a note."""
    from fairseq_pmlm.models.unilmv2 import HEAD_KINDS, UniLMv2Config, UniLMv2Model, dictionary_digest, same_digest

    dict_path = _dictionary_path(ckpt_path, state, dict_path)
    try:
        dictionary = load_pmlm_dictionary(os.path.dirname(os.path.abspath(dict_path)), (os.path.basename(dict_path),))
    except (OSError, ValueError) as e:
        raise ConversionError(f"cannot read the dictionary {dict_path}: {str(e).splitlines()[0]}") from None
    theirs = state["model"].get("dictionary_digest")
    if theirs is not None and not same_digest(theirs, dictionary_digest(dictionary)):
        raise ConversionError(f"{dict_path} is not the dictionary {ckpt_path} was trained with")
    model_cfg_in = state["cfg"]["model"]
    cfg = UniLMv2Config(**{f.name: model_cfg_in[f.name] for f in fields(UniLMv2Config) if f.name in model_cfg_in})
    model = UniLMv2Model(cfg, dictionary)
    weights = {k: v for k, v in state["model"].items() if not k.startswith(tuple(f"{h}." for h in HEAD_KINDS))}
    heads = sorted({k.split(".")[1] for k in state["model"].keys() - weights.keys()})
    if heads:
        notes.append(f"left out the task head(s) {', '.join(heads)}: only the encoder and the MLM head export")
    try:
        model.load_state_dict(weights, strict=True)
    except RuntimeError as e:
        raise ConversionError(f"{ckpt_path}: the weights do not fit its own cfg: {str(e).splitlines()[1].strip()}") \
            from None
    return model, dictionary


def write_tokenizer(tok, tmp, fmt, names, notes, max_positions):
    """The export's tokenizer: WordPiece's casing, and for ``hf`` a tokenizer.json that gives the
    plugin's ids (text/wordpiece.py: a cut dictionary needs it) and the model's length, so that
    ``truncation=True`` cuts text to the position table; for a sentencepiece model (``hf`` only)
    its spm.model beside a note saying how its ids are made."""
    if tok is not None and tok.kind == "bert":
        tokenizer_files.write_casing(tmp, tok.cased)
        if fmt == "hf":
            path = os.path.join(tmp, tokenizer_files.CASING)
            with open(path, encoding="utf-8") as f:
                spec = json.load(f)
            with open(path, "w", encoding="utf-8") as f:
                json.dump({**spec, "model_max_length": max_positions}, f)
                f.write("\n")
            with open(os.path.join(tmp, "tokenizer.json"), "w", encoding="utf-8") as f:
                f.write(wordpiece.tokenizer_json(tok.path, tok.cased, names))
    elif tok is not None:
        shutil.copy(tok.path, os.path.join(tmp, tokenizer_files.SENTENCEPIECE))
        notes.append("sentencepiece model: AutoTokenizer cannot be set up; encode with spm.model into pieces and "
                     "look each up in vocab.txt (its line number is the id)")
    else:
        notes.append("no tokenizer found (no --bpe in the checkpoint, neither spm.model nor vocab.txt beside its "
                     "dictionary): vocab.txt only")


def check_s2sft(ckpt_path, state, tok, pseudo_as_mask):
    """What s2s-ft can decode as the plugin does, else a one-line refusal: WordPiece pieces (s2s-ft has
    no other tokenizer), and a sequence-to-sequence model's pseudo token, which s2s-ft always feeds
    as [MASK]'s id. True when [P] and [MASK] are to trade rows (--pseudo-as-mask)."""
    if tok is None or tok.kind != "bert":
        what = "no tokenizer was found for it" if tok is None else f"its pieces come from sentencepiece ({tok.path})"
        raise ConversionError(f"--format s2s-ft: s2s-ft tokenizes with WordPiece only and {what}: export it with "
                              "--format hf")
    pseudo = str((state["cfg"].get("model") or {}).get("pseudo_token") or "p")
    if pseudo_as_mask and pseudo != "p":
        raise ConversionError(f"--pseudo-as-mask: {ckpt_path} feeds [MASK] as its pseudo token already")
    if pseudo == "p" and state["cfg"]["task"].get("_name") == "pmlm_seq2seq" and not pseudo_as_mask:
        raise ConversionError(f"{ckpt_path} was fine-tuned feeding [P] as its pseudo token but s2s-ft feeds [MASK]'s "
                              "id, so the export would decode otherwise there: fine-tune with --pseudo-token mask "
                              "for an exact export, or pass --pseudo-as-mask to let [P] and [MASK] trade rows")
    return pseudo_as_mask


def export_checkpoint(ckpt_path, out_dir, dict_path=None, original_vocab=None, force=False, fmt="hf",
                      pseudo_as_mask=False):
    """Write the ``fmt`` export of a checkpoint; returns a dict describing it (and notes)."""
    from safetensors.torch import save_file

    if fmt not in FORMATS:
        raise ConversionError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")
    if pseudo_as_mask and fmt != "s2s-ft":
        raise ConversionError("--pseudo-as-mask is for --format s2s-ft (s2s-ft feeds [MASK] as the pseudo token)")
    checkpoint.refuse_replacing_inputs(out_dir, [p for p in (ckpt_path, dict_path, original_vocab) if p])
    notes = []
    state = read_checkpoint(ckpt_path)
    dict_path = _dictionary_path(ckpt_path, state, dict_path)
    tok = find_tokenizer(state, dict_path)
    # what the checkpoint leads to is an input too: replacing it (--force) would delete a data-bin
    checkpoint.refuse_replacing_inputs(out_dir, [dict_path, *_data_dirs(state), *(tok.files() if tok else [])])
    swap_pseudo = fmt == "s2s-ft" and check_s2sft(ckpt_path, state, tok, pseudo_as_mask)
    model, dictionary = load_model(ckpt_path, state, dict_path, notes)
    model_cfg = model.cfg
    tensors = {k: v for k, v in model.transformer.state_dict().items() if k != "lm_head.weight"}
    shape = TransformerShape.of(model_cfg)
    if swap_pseudo:
        mask, pseudo = dictionary.index(MASK_SYMBOL), dictionary.index(PSEUDO_SYMBOL)
        for k in ("embed_tokens.weight", "lm_head.bias"):
            # a swap, not a copy: the output layer keeps every logit, so probabilities stay the plugin's
            tensors[k] = tensors[k].clone()
            tensors[k][[mask, pseudo]] = tensors[k][[pseudo, mask]]
        notes.append("[MASK] and [P] trade rows (--pseudo-as-mask): s2s-ft, feeding [MASK] as the pseudo token, "
                     "decodes as the plugin; s2s-ft's word drop would feed [P]'s row too")
    full = None
    try:
        # the whole vocab the dictionary was made from: the one given (--vocab: its ids restored), or
        # for s2s-ft the tokenizer's (s2s-ft tokenizes with vocab.txt alone)
        source = original_vocab or (tok.path if fmt == "s2s-ft" else None)
        full = vocab.read_vocab(source) if source else None
        if full is not None and vocab.map_vocab(full).symbols != dictionary.symbols:
            # a cut dictionary: the whole vocab back, so that its tokenizer gives the plugin's pieces
            names, order = vocab.uncut_vocab(dictionary.symbols, full)
            kept = sum(o >= 0 for o in order[:len(full)])
            notes.append(f"the dictionary keeps {kept} of the {len(full)} rows of {source}: vocab.txt "
                         "is that whole vocab (its tokenizer then gives the plugin's pieces), a dropped row "
                         "holds [UNK]'s embedding and an output bias of -10000 (never produced)")
        else:
            names, order = vocab.symbols_to_vocab(dictionary.symbols, full if original_vocab else None)
    except (OSError, ValueError) as e:
        where = f"--vocab {original_vocab}" if original_vocab else source or dict_path
        raise ConversionError(f"{where}: {str(e).splitlines()[0]}") from None
    if fmt == "s2s-ft":
        names, order = s2sft.pad_first(names, order)
    order_t = torch.tensor(order)
    dropped = order_t < 0
    order_t[dropped] = dictionary.unk()  # the plugin reads a dropped piece as <unk>, and never writes it
    tensors["embed_tokens.weight"] = tensors["embed_tokens.weight"][order_t]
    tensors["lm_head.bias"] = tensors["lm_head.bias"][order_t]
    tensors["lm_head.bias"][dropped] = -10000.0
    sd = layouts.from_plugin(tensors, shape)
    config = layouts.hf_config(shape, len(names), names.index("[PAD]"))
    config[layouts.HEAD_TRAINED_KEY] = bool(model.lm_head_trained >= 0.5)
    task_cfg = state["cfg"]["task"]
    if task_cfg.get("_name") == "pmlm_seq2seq":
        config[layouts.SEQ2SEQ_KEY] = {
            "max_source_positions": int(task_cfg["max_source_positions"]),
            "max_target_positions": int(task_cfg["max_target_positions"]),
            "pseudo_token": "mask" if swap_pseudo else str(model_cfg.pseudo_token),  # what the decoder feeds
            **({"lenpen_formula": str(task_cfg["lenpen_formula"])} if task_cfg.get("lenpen_formula") else {})}
    if not config[layouts.HEAD_TRAINED_KEY]:
        notes.append("the MLM head is untrained (the converted source had none): its logits mean nothing until "
                     f"pre-training trains it (config.json: {layouts.HEAD_TRAINED_KEY} false)")
    with checkpoint.output_directory(out_dir, force) as output:
        tmp = output.path
        if fmt == "hf":
            if shape.no_rel_pos:
                # a BERT: transformers' own classes read it, with or without trust_remote_code. No auto_map:
                # naming our classes for a BertConfig breaks AutoModel in transformers 5.17 (it registers
                # them for BertConfig, refusing their UniLMv2Config's name)
                config.update(model_type="bert", architectures=["BertForMaskedLM"])
            else:
                # with a relative table the model is no BERT: a type transformers refuses without the code
                config.update(model_type="unilmv2", architectures=["UniLMv2ForMaskedLM"], auto_map=AUTO_MAP)
                shutil.copy(MODELING_SOURCE, os.path.join(tmp, MODELING_FILE))
            with output.writing("model.safetensors") as path:
                save_file(sd, path, metadata={"format": "pt"})
        else:
            sd, dropped_bias = layouts.fuse_qkv(sd, shape.encoder_layers)
            if dropped_bias:
                notes.append(f"layer(s) {', '.join(map(str, dropped_bias))}: a non-zero key bias has no place in the "
                             "UniLMv2 layout and is left out (the softmax cancels it: outputs agree up to rounding)")
            with output.writing("pytorch_model.bin") as path:
                checkpoint.save(sd, path)
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        vocab.write_vocab(os.path.join(tmp, "vocab.txt"), names)
        write_tokenizer(tok, tmp, fmt, names, notes, shape.max_positions)
    return {"vocab_size": len(names), "rel_pos_buckets": None if shape.no_rel_pos else shape.rel_pos_buckets,
            "format": fmt, "notes": notes}
