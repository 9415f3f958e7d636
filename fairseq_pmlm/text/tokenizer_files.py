"""Which text tokenizer a data or model directory uses, and how fairseq is told about it.

The contract every recipe relies on: a directory made by this plugin (``prepare_data.sh``,
``s2s/prepare.sh``, ``convert_checkpoint.py import``, ``glue/prepare_glue.py``, whose dictionary is
``input0/dict.txt``) holds its ``dict.txt`` and exactly one tokenizer beside it:

- ``spm.model``: sentencepiece (trained by ``prepare_data.sh``) -> ``--bpe sentencepiece``;
- ``vocab.txt`` (+ ``tokenizer_config.json`` saying ``do_lower_case``): BERT WordPiece, from
  released weights -> ``--bpe bert --bpe-vocab-file vocab.txt [--bpe-cased]``.

Written without fairseq or torch: it reads the tokenizer's own files (the recipes ask it through
``recipe_info``).
"""
import json
import os
import shutil
from dataclasses import dataclass
from typing import Optional

SENTENCEPIECE, WORDPIECE = "spm.model", "vocab.txt"
CASING = "tokenizer_config.json"


@dataclass
class TokenizerFiles:
    kind: str  # "sentencepiece" or "bert" (fairseq's --bpe names)
    path: str  # spm.model or vocab.txt
    cased: Optional[bool] = None  # WordPiece only

    def fairseq_flags(self):
        if self.kind == "sentencepiece":
            return ["--bpe", "sentencepiece", "--sentencepiece-model", self.path]
        return ["--bpe", "bert", "--bpe-vocab-file", self.path] + (["--bpe-cased"] if self.cased else [])

    def fairseq_cfg(self):
        """The ``cfg.bpe`` group fairseq builds from those flags (for the hub)."""
        if self.kind == "sentencepiece":
            return {"_name": "sentencepiece", "sentencepiece_model": self.path}
        return {"_name": "bert", "bpe_vocab_file": self.path, "bpe_cased": bool(self.cased)}

    def files(self):
        return [self.path] + ([os.path.join(os.path.dirname(self.path), CASING)] if self.kind == "bert" else [])


def read_casing(directory):
    """True/False from ``tokenizer_config.json``'s ``do_lower_case``; None if it does not say."""
    path = os.path.join(directory, CASING)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            lower = json.load(f).get("do_lower_case")
    except (ValueError, AttributeError) as e:  # (not JSON, not UTF-8, not an object)
        raise ValueError(f"{path}: cannot read do_lower_case: {type(e).__name__}: {e}") from None
    return None if lower is None else not lower


def wordpiece_casing(vocab_path):
    """Whether the WordPiece vocab ``vocab_path`` is cased: the ``tokenizer_config.json`` beside it
    says, else the vocab itself (text/vocab.py: an uncased vocab has no upper-case piece)."""
    cased = read_casing(os.path.dirname(os.path.abspath(vocab_path)))
    if cased is None:
        from .vocab import read_vocab, vocab_is_cased

        cased = vocab_is_cased(read_vocab(vocab_path))
    return cased


def write_casing(directory, cased):
    with open(os.path.join(directory, CASING), "w", encoding="utf-8") as f:
        # split_special_tokens: "[SEP]" in text is text, for transformers' readers too (wordpiece.py)
        json.dump({"tokenizer_class": "BertTokenizer", "do_lower_case": not cased, "split_special_tokens": True}, f)
        f.write("\n")


def find(directory):
    """The tokenizer of ``directory`` (see the module docstring); ValueError naming the
    directory when it has none or both."""
    spm, wp = (os.path.join(directory, n) for n in (SENTENCEPIECE, WORDPIECE))
    has_spm, has_wp = os.path.isfile(spm), os.path.isfile(wp)
    if has_spm and has_wp:
        raise ValueError(f"{directory} holds both {SENTENCEPIECE} and {WORDPIECE}: which tokenizer is meant?")
    if has_spm:
        return TokenizerFiles("sentencepiece", os.path.abspath(spm))
    if has_wp:
        return TokenizerFiles("bert", os.path.abspath(wp), wordpiece_casing(wp))
    raise ValueError(f"{directory} has no tokenizer: neither {SENTENCEPIECE} (scripts/prepare_data.sh) nor "
                     f"{WORDPIECE} (scripts/convert_checkpoint.py import)")


def recorded(bpe):
    """The TokenizerFiles a checkpoint's ``cfg.bpe`` group names (``--bpe sentencepiece`` or
    ``--bpe bert`` with its file), else None (no --bpe, or a tokenizer of another kind)."""
    bpe = bpe or {}
    if bpe.get("_name") == "sentencepiece" and bpe.get("sentencepiece_model"):
        return TokenizerFiles("sentencepiece", bpe.get("sentencepiece_model"))
    if bpe.get("_name") == "bert" and bpe.get("bpe_vocab_file"):
        return TokenizerFiles("bert", bpe.get("bpe_vocab_file"), bool(bpe.get("bpe_cased")))
    return None


def of_checkpoint(bpe, directory):
    """The tokenizer of a checkpoint whose dictionary is in ``directory``, found as the hub finds it:
    the one its ``--bpe`` group records while that file exists, else the one beside the dictionary
    (a checkpoint moved to another machine, or pre-trained by plain fairseq-train without --bpe);
    None when neither names one. ValueError when the recorded file is gone and ``directory`` has none."""
    saved = recorded(bpe)
    if saved is not None and os.path.isfile(saved.path):
        return saved
    try:
        return find(directory)
    except ValueError:
        if saved is not None:
            raise ValueError(f"the checkpoint's tokenizer file {saved.path} is gone and {directory} has none") \
                from None
        return None


class _WordPieceSymbols:
    """``encode(text, out_type=str)`` like sentencepiece's, giving the dictionary symbols of the
    WordPiece pieces (wordpiece.py), so code written for one tokenizer takes both."""

    def __init__(self, tok):
        from .wordpiece import WordPieceEncoder

        self.encoder = WordPieceEncoder(tok.path, tok.cased)

    def encode(self, text, out_type=str):
        assert out_type is str, "only pieces (out_type=str) are produced"
        return self.encoder.encode_lines([text])[0].split()

    def encode_with_offsets(self, text):
        return self.encoder.encode_with_offsets(text)


def piece_encoder(directory):
    """Text -> the dictionary symbols of its pieces, with ``directory``'s tokenizer: an object
    with sentencepiece's ``encode(text, out_type=str)`` (sentencepiece itself, or WordPiece)."""
    tok = find(directory)
    if tok.kind == "sentencepiece":
        import sentencepiece as spm

        return spm.SentencePieceProcessor(model_file=tok.path)
    return _WordPieceSymbols(tok)


def copy(src_dir, dest_dir):
    """Copy ``src_dir``'s tokenizer files into ``dest_dir``; returns the copy's TokenizerFiles."""
    tok = find(src_dir)
    for path in tok.files():
        if os.path.isfile(path):
            shutil.copy(path, os.path.join(dest_dir, os.path.basename(path)))
    if tok.kind == "bert" and not os.path.isfile(os.path.join(dest_dir, CASING)):
        write_casing(dest_dir, tok.cased)
    return find(dest_dir)
