"""Shared builders: a tiny dictionary, an in-memory stand-in for fairseq's indexed dataset,
random PMLM examples and batches."""
import types

import numpy as np
import pytest
import torch
from fairseq.data import Dictionary

from fairseq_pmlm.data.blockwise_masking import MaskingConfig, build_example
from fairseq_pmlm.data.pmlm_dataset import PseudoMaskedLMDataset
from fairseq_pmlm.modules.transformer import TransformerShape, UniLMv2Transformer
from fairseq_pmlm.tasks.pseudo_masked_lm import MASK_SYMBOL, PSEUDO_SYMBOL


def make_dictionary(n_words=100):
    d = Dictionary()
    for i in range(n_words):
        d.add_symbol(f"w{i}")
    d.add_symbol(MASK_SYMBOL)
    d.add_symbol(PSEUDO_SYMBOL)
    return d


class FakeLines:
    """Lines as fairseq-preprocess stores them: token ids + EOS; a blank line is [EOS]."""

    def __init__(self, lines, eos):
        self.items = [torch.tensor(list(line) + [eos], dtype=torch.long) for line in lines]
        self.sizes = np.array([len(x) for x in self.items])

    def __getitem__(self, i):
        return self.items[i]

    def __len__(self):
        return len(self.items)


def random_documents(rng, d, n_docs, sents=(1, 8), words=(3, 30)):
    """Lines of random word ids with blank lines between documents."""
    lines = []
    for _ in range(n_docs):
        for _ in range(rng.integers(*sents)):
            lines.append(rng.integers(d.nspecial, d.nspecial + 100, size=rng.integers(*words)).tolist())
        lines.append([])
    return lines


def make_dataset(lines, d, tokens_per_sample=64, objective="ae+par", seed=1, **masking):
    return PseudoMaskedLMDataset(
        FakeLines(lines, d.eos()), d, tokens_per_sample, MaskingConfig(**masking), objective,
        d.index(MASK_SYMBOL), d.index(PSEUDO_SYMBOL), seed,
    )


def tiny_transformer(vocab, rel_pos_buckets=32, impl="sdpa", seed=0):
    torch.manual_seed(seed)
    shape = TransformerShape(vocab_size=vocab, layers=2, dim=32, ffn_dim=64, heads=4,
                             rel_pos_buckets=rel_pos_buckets, attention_impl=impl)
    return UniLMv2Transformer(shape).eval()


def logits(model, batch, prefix_len="batch"):
    ni = batch["net_input"]
    p = ni.get("prefix_len") if prefix_len == "batch" else prefix_len
    with torch.no_grad():
        h = model(ni["src_tokens"], ni["positions"], ni["segments"], ni["kinds"], ni["steps"], prefix_len=p)
        return model.lm_head(h)


@pytest.fixture
def dictionary():
    return make_dictionary()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
