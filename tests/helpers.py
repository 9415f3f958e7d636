"""Shared builders for the unit tests (a plain module: tests/ has no __init__.py, and pytest puts
tests/ on sys.path, so test files ``import helpers``).

- a tiny fairseq ``Dictionary`` (100 words + [MASK] + [P]);
- ``FakeLines``: an in-memory stand-in for fairseq's indexed dataset (``.sizes`` and
  ``__getitem__`` returning int64 tensors that end with EOS; a blank line is just [EOS]);
- random PMLM examples straight from ``build_example`` and padded batches made by the real
  ``PseudoMaskedLMDataset.collater``;
- a tiny randomly initialised ``UniLMv2Transformer`` and its logits;
- ``no_room_for``: files of a name that Python opens for writing behave as on a full disk.
"""
import errno
import os
import types

import numpy as np
import torch
from fairseq.data import Dictionary

from fairseq_pmlm import objectives
from fairseq_pmlm.arch import TransformerShape
from fairseq_pmlm.data.blockwise_masking import MaskingConfig, build_example
from fairseq_pmlm.data.pmlm_dataset import PseudoMaskedLMDataset
from fairseq_pmlm.modules.attention_rule import PAD
from fairseq_pmlm.modules.transformer import UniLMv2Transformer
from fairseq_pmlm.symbols import MASK_SYMBOL, PSEUDO_SYMBOL

N_WORDS = 100
OBJECTIVES = list(objectives.NAMES)


def make_dictionary(n_words=N_WORDS):
    d = Dictionary()
    for i in range(n_words):
        d.add_symbol(f"w{i}")
    d.add_symbol(MASK_SYMBOL)
    d.add_symbol(PSEUDO_SYMBOL)
    return d


def words(d):
    """The ids of the normal (non-special) words of ``make_dictionary``."""
    return np.arange(d.nspecial, d.nspecial + N_WORDS)


def special_ids(d):
    return {d.bos(), d.eos(), d.pad(), d.unk(), d.index(MASK_SYMBOL), d.index(PSEUDO_SYMBOL)}


class FakeLines:
    """Lines as fairseq-preprocess stores them: token ids + EOS; a blank line is [EOS]."""

    def __init__(self, lines, eos):
        self.items = [torch.tensor(list(line) + [eos], dtype=torch.long) for line in lines]
        self.sizes = np.array([len(x) for x in self.items], dtype=np.int64)

    def __getitem__(self, i):
        return self.items[i]

    def __len__(self):
        return len(self.items)


def random_documents(rng, d, n_docs, sents=(1, 8), words_per_sent=(3, 30)):
    """Lines of random word ids, a blank line after each document."""
    lines = []
    for _ in range(n_docs):
        for _ in range(int(rng.integers(*sents))):
            n = int(rng.integers(*words_per_sent))
            lines.append(rng.integers(d.nspecial, d.nspecial + N_WORDS, size=n).tolist())
        lines.append([])
    return lines


def make_dataset(lines, d, tokens_per_sample=64, objective="ae+par", seed=1, **masking):
    return PseudoMaskedLMDataset(
        FakeLines(lines, d.eos()), d, tokens_per_sample, MaskingConfig(**masking), objectives.objective(objective),
        d.index(MASK_SYMBOL), d.index(PSEUDO_SYMBOL), seed,
    )


def random_context(rng, d, n1, n2):
    """``[SOS] S1 [EOS] S2 [EOS]`` of random words: (tokens, segments, maskable)."""
    s1 = rng.integers(d.nspecial, d.nspecial + N_WORDS, size=n1)
    s2 = rng.integers(d.nspecial, d.nspecial + N_WORDS, size=n2)
    context = np.concatenate([[d.bos()], s1, [d.eos()], s2, [d.eos()]]).astype(np.int64)
    segments = np.concatenate([np.zeros(n1 + 2), np.ones(n2 + 1)]).astype(np.int64)
    maskable = np.ones(len(context), dtype=bool)
    maskable[[0, n1 + 1, len(context) - 1]] = False
    return context, segments, maskable


def example(seed, context, segments, maskable, d, objective="ae+par", **masking):
    """``build_example`` with its own Generator(seed): the same seed gives the same masks."""
    cand = np.array([t for t in range(d.nspecial, len(d)) if t not in special_ids(d)], dtype=np.int64)
    ex = build_example(
        np.random.default_rng(seed), context, segments, maskable, MaskingConfig(**masking),
        objectives.objective(objective),
        d.index(MASK_SYMBOL), d.index(PSEUDO_SYMBOL), d.pad(), cand,
    )
    return {k: torch.from_numpy(v) for k, v in ex.items()}


def collate(samples, d):
    """The real ``PseudoMaskedLMDataset.collater`` (it only needs ``self.dictionary``)."""
    samples = [dict(s, id=i) for i, s in enumerate(samples)]
    return PseudoMaskedLMDataset.collater(types.SimpleNamespace(dictionary=d), samples)


def tiny_transformer(vocab, rel_pos_buckets=32, impl="sdpa", seed=0):
    """``rel_pos_buckets`` None: no relative position bias."""
    torch.manual_seed(seed)
    shape = TransformerShape(encoder_layers=2, encoder_embed_dim=32, encoder_ffn_embed_dim=64,
                             encoder_attention_heads=4, rel_pos_buckets=rel_pos_buckets or 32,
                             no_rel_pos=rel_pos_buckets is None)
    return UniLMv2Transformer(shape, vocab, impl).eval()


def without_dropout(model):
    """``model`` in training mode with every dropout off, attention's included: two models on
    different paths then see the same numbers."""
    model.train()
    for mod in model.modules():
        if isinstance(mod, torch.nn.Dropout):
            mod.p = 0.0
    for layer in model.layers:
        layer.attn.dropout = 0.0
    return model


def forward_backward(model, ni):
    """The hidden states of a pre-training batch ``ni`` (its prefix_len), and a backward of them
    against fixed random weights on the real tokens (the gradients land in the parameters)."""
    args = (ni["src_tokens"], ni["positions"], ni["segments"], ni["kinds"], ni["steps"])
    out = model(*args, prefix_len=ni["prefix_len"])
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(0))
    (out * (ni["kinds"] != PAD).unsqueeze(-1) * w).sum().backward()
    return out.detach()


def hidden(model, net_input, prefix_len="batch"):
    ni = net_input
    p = ni.get("prefix_len") if prefix_len == "batch" else prefix_len
    with torch.no_grad():
        return model(ni["src_tokens"], ni["positions"], ni["segments"], ni["kinds"], ni["steps"], prefix_len=p)


def logits(model, net_input, prefix_len="batch"):
    h = hidden(model, net_input, prefix_len)
    with torch.no_grad():
        return model.lm_head(h)


def stdlib_docstrings(modules):
    """(pairs, sentences) of a few standard-library modules (e.g. ``json/__init__``), made by the
    main job's corpus script: real text for the released-weights tests."""
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts",
                        "make_docstring_corpus.py")
    spec = importlib.util.spec_from_file_location("make_docstring_corpus", path)
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    root = os.path.dirname(os.__file__)
    pairs, sentences = [], []
    for m in modules:
        p, s = corpus.module_text(corpus.parse(os.path.join(root, m + ".py")), m.replace("/__init__", ""))
        pairs += p
        sentences += s + [""]
    return pairs, sentences


class NoRoom:
    """A file open for writing on a full disk: every write fails as the OS's does (``fileno``
    too: shutil.copy writes through it with sendfile)."""

    def __init__(self, f):
        self.f = f

    def write(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    fileno = write

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def no_room_for(name, monkeypatch):
    """From now on a file whose name ends with ``name``, opened for writing, is on a full disk."""
    import builtins

    real = builtins.open

    def opened(file, mode="r", *args, **kwargs):
        f = real(file, mode, *args, **kwargs)
        writing = isinstance(file, (str, os.PathLike)) and any(c in mode for c in "wax+")
        return NoRoom(f) if writing and os.path.basename(file).endswith(name) else f

    monkeypatch.setattr(builtins, "open", opened)

