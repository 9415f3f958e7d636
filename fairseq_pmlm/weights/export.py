"""Export a plugin checkpoint for use outside the plugin, with its behaviour (docs/DESIGN.md §7).

Two targets, both imported back by ``convert.import_checkpoint`` to the same checkpoint, bit for bit:

- ``hf``: a Hugging Face directory that ``AutoModel`` / ``AutoModelForMaskedLM.from_pretrained(DIR,
  trust_remote_code=True)`` read: ``model.safetensors`` (``BertForMaskedLM`` keys plus the relative
  table at ``bert.encoder.rel_pos_bias.weight``), ``config.json`` whose ``auto_map`` names
  ``modeling_unilmv2.py`` (a copy of weights/hf_modeling.py), the tokenizer files. It computes
  what the plugin computes. A model with a relative table gets ``model_type`` ``unilmv2``, which
  ``transformers`` refuses without the modeling code instead of dropping the table; one without
  is a plain BERT (``model_type`` ``bert``) that ``BertModel`` reads as well.
- ``s2s-ft``: what s2s-ft's ``--model_type unilm`` reads (the released UniLMv2 layout:
  ``pytorch_model.bin`` with fused ``qkv_linear``, ``q_bias``/``v_bias`` and
  ``bert.encoder.rel_pos_bias.weight``; ``config.json`` with ``rel_pos_bins``/``max_rel_pos``;
  ``vocab.txt`` with ``[PAD]`` at id 0, which s2s-ft pads with and its loss ignores).
"""
import json
import os
import shutil
from dataclasses import fields, replace

import torch

from ..arch import DEFAULTS
from . import checkpoint, layouts, s2sft, tokenizer_files, vocab
from .layouts import ConversionError

FORMATS = ("hf", "s2s-ft")
# hf_modeling.py travels as modeling_unilmv2.py, the name config.json's auto_map gives it
MODELING_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_modeling.py")
MODELING_FILE = "modeling_unilmv2.py"
AUTO_MAP = {"AutoConfig": "modeling_unilmv2.UniLMv2Config", "AutoModel": "modeling_unilmv2.UniLMv2Model",
            "AutoModelForMaskedLM": "modeling_unilmv2.UniLMv2ForMaskedLM"}


def _dictionary_path(ckpt_path, state, dict_path):
    if dict_path:
        return dict_path
    beside = os.path.join(os.path.dirname(os.path.abspath(ckpt_path)), "dict.txt")
    if os.path.isfile(beside):
        return beside
    data = (state["cfg"].get("task") or {}).get("data") or ""
    for d in data.split(os.pathsep)[:1]:
        for name in ("dict.txt", f"dict.{state['cfg']['task'].get('source_lang', 'source')}.txt"):
            if os.path.isfile(os.path.join(d, name)):
                return os.path.join(d, name)
    raise ConversionError(f"no dict.txt beside {ckpt_path} or in its task's data directory: pass --dict")


def read_checkpoint(ckpt_path):
    """The fairseq checkpoint of a unilmv2 model, else a one-line error naming what it is."""
    if not os.path.isfile(ckpt_path):
        raise ConversionError(f"not found: {ckpt_path}")
    try:  # the cfg first (memory-mapped, no fairseq upgrade step), then fairseq's own load
        peek = torch.load(ckpt_path, map_location="cpu", weights_only=True, mmap=True)
        model_cfg = ((peek.get("cfg") or {}).get("model") or {}) if isinstance(peek, dict) else {}
        if not str(model_cfg.get("_name", "")).startswith("unilmv2") or not isinstance(peek.get("model"), dict):
            what = model_cfg.get("_name") or "no fairseq model"
            raise ConversionError(f"{ckpt_path} is not a checkpoint of this plugin's unilmv2 model (it holds {what!r})")
        return checkpoint.load(ckpt_path)
    except ConversionError:
        raise
    except Exception as e:  # noqa: BLE001  (any unreadable file: one line naming it)
        raise ConversionError(f"cannot read {ckpt_path}: {type(e).__name__}: {str(e).splitlines()[0]}") from None


def load_model(ckpt_path, state, dict_path, notes):
    """(model, dictionary) of the checkpoint; task heads (GLUE, SQuAD) have no place in either
    export: left out, with a note."""
    from fairseq_pmlm.models.unilmv2 import HEAD_KINDS, UniLMv2Config, UniLMv2Model, dictionary_digest
    from fairseq_pmlm.tasks.pseudo_masked_lm import load_pmlm_dictionary

    dict_path = _dictionary_path(ckpt_path, state, dict_path)
    try:
        dictionary = load_pmlm_dictionary(os.path.dirname(os.path.abspath(dict_path)), (os.path.basename(dict_path),))
    except (OSError, ValueError) as e:
        raise ConversionError(f"cannot read the dictionary {dict_path}: {str(e).splitlines()[0]}") from None
    theirs = state["model"].get("dictionary_digest")
    if theirs is not None and not torch.equal(theirs, dictionary_digest(dictionary)):
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


def tokenizer_files_for(state, tmp, fmt, notes):
    """The export's tokenizer: WordPiece's casing (``AutoTokenizer`` then reads vocab.txt), or, for a
    sentencepiece model, its spm.model beside a note saying how its ids are made."""
    bpe = state["cfg"].get("bpe") or {}
    if bpe.get("_name") == "bert":
        tokenizer_files.write_casing(tmp, bpe.get("bpe_cased", False))
    elif bpe.get("_name") == "sentencepiece":
        spm = bpe.get("sentencepiece_model")
        if spm and os.path.isfile(spm):
            shutil.copy(spm, os.path.join(tmp, tokenizer_files.SENTENCEPIECE))
        notes.append("sentencepiece model: AutoTokenizer cannot be set up; encode with spm.model into pieces and "
                     "look each up in vocab.txt (its line number is the id)"
                     + ("" if spm and os.path.isfile(spm) else f" (spm.model not found at {spm}: bring it)"))
    else:
        notes.append("the checkpoint records no tokenizer (--bpe): vocab.txt only")
    if fmt == "s2s-ft" and bpe.get("_name") != "bert":
        notes.append("s2s-ft tokenizes with WordPiece (vocab.txt): this model's pieces come from another tokenizer")


def export_checkpoint(ckpt_path, out_dir, dict_path=None, original_vocab=None, force=False, fmt="hf"):
    """Write the ``fmt`` export of a checkpoint; returns a dict describing it (and notes)."""
    from safetensors.torch import save_file

    if fmt not in FORMATS:
        raise ConversionError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")
    checkpoint.refuse_replacing_inputs(out_dir, [p for p in (ckpt_path, dict_path, original_vocab) if p])
    notes = []
    state = read_checkpoint(ckpt_path)
    model, dictionary = load_model(ckpt_path, state, dict_path, notes)
    model_cfg = model.cfg
    tensors = {k: v for k, v in model.transformer.state_dict().items() if k != "lm_head.weight"}
    shape = layouts.Shape(vocab_size=len(dictionary), **{f: getattr(model_cfg, f) for f in DEFAULTS})
    if model_cfg.no_rel_pos:
        shape = replace(shape, rel_pos_buckets=0)
    try:
        names, order = vocab.symbols_to_vocab(dictionary.symbols, vocab.read_vocab(original_vocab)
                                              if original_vocab else None)
    except (OSError, ValueError) as e:
        raise ConversionError(f"--vocab {original_vocab}: {str(e).splitlines()[0]}") from None
    if fmt == "s2s-ft":
        names, order = s2sft.pad_first(names, order)
    order_t = torch.tensor(order)
    tensors["embed_tokens.weight"] = tensors["embed_tokens.weight"][order_t]
    tensors["lm_head.bias"] = tensors["lm_head.bias"][order_t]
    shape = replace(shape, vocab_size=len(names))
    sd = layouts.from_plugin(tensors, shape)
    config = layouts.hf_config(shape, names.index("[PAD]"))
    with checkpoint.atomic_directory(out_dir, force) as tmp:
        if fmt == "hf":
            # with a relative table the model is no BERT: a type transformers refuses without the code
            config.update(model_type="unilmv2" if shape.rel_pos_buckets else "bert",
                          architectures=["UniLMv2ForMaskedLM" if shape.rel_pos_buckets else "BertForMaskedLM"],
                          auto_map=AUTO_MAP if shape.rel_pos_buckets else
                          {k: v for k, v in AUTO_MAP.items() if k != "AutoConfig"})
            shutil.copy(MODELING_SOURCE, os.path.join(tmp, MODELING_FILE))
            save_file(sd, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
        else:
            sd, dropped = layouts.fuse_qkv(sd, shape.encoder_layers)
            if dropped:
                notes.append(f"layer(s) {', '.join(map(str, dropped))}: a non-zero key bias has no place in the "
                             "UniLMv2 layout and is left out (the softmax cancels it: outputs agree up to rounding)")
            torch.save(sd, os.path.join(tmp, "pytorch_model.bin"))
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        vocab.write_vocab(os.path.join(tmp, "vocab.txt"), names)
        tokenizer_files_for(state, tmp, fmt, notes)
    return {"vocab_size": len(names), "rel_pos_buckets": shape.rel_pos_buckets, "format": fmt, "notes": notes}
