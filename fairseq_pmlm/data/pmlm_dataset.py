"""Documents -> ``[SOS] S1 [EOS] S2 [EOS]`` PMLM examples, collated with the compact
per-token description (kinds, steps) from which the model builds the attention mask.
"""
import logging

import numpy as np
import torch
from fairseq.data import FairseqDataset, data_utils

from ..modules.attention_rule import CONTEXT, PAD
from ..objectives import Objective
from ..symbols import random_token_candidates
from .blockwise_masking import MaskingConfig, build_example
from .document_index import build_document_index
from .freed_memory import release_freed_memory

logger = logging.getLogger(__name__)


class PseudoMaskedLMDataset(FairseqDataset):
    def __init__(self, lines, dictionary, tokens_per_sample, masking: MaskingConfig, objective: Objective, mask_idx,
                 pseudo_idx, seed, split="train"):
        self.lines = lines
        self.dictionary = dictionary
        self.masking = masking
        self.objective = objective
        self.mask_idx, self.pseudo_idx = mask_idx, pseudo_idx
        self.seed = seed
        self.epoch = 1
        self.max_tokens = tokens_per_sample - 3
        self.index = build_document_index(lines.sizes, self.max_tokens)
        release_freed_memory()  # the building's temporaries
        logger.info(
            f"{split}: {len(self)} examples from {self.index.documents} documents; skipped "
            f"{self.index.short_documents} documents of fewer than 2 tokens; split "
            f"{self.index.long_sentences} sentences longer than {self.max_tokens} tokens"
        )
        if len(self) == 0:
            raise ValueError(f"{split}: no usable document (each needs at least 2 tokens)")
        self._sizes = self.index.lengths + 3  # context length: [SOS] S1 [EOS] S2 [EOS] (int32)
        # num_tokens by chunk length, a table (lengths are at most max_tokens), not an array per chunk:
        # the context plus the batching estimate of the appended part (two tokens per masked token), rounded up
        body = np.arange(self.max_tokens + 1)
        appended = (2 * np.ceil(masking.mask_prob * body) + 6).astype(np.int64) * objective.par
        self._num_tokens_by_length = body + 3 + appended
        self.random_candidates = random_token_candidates(dictionary)

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return False  # masks change every epoch

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __len__(self):
        return len(self.index)

    def chunk_pieces(self, index):
        """(line, start, end) of the chunk's sentences (a long sentence's pieces apart)."""
        return self.index.pieces(index, lambda line: int(self.lines.sizes[line]) - 1, self.max_tokens)

    def sentences(self, index):
        """The chunk's sentences (pieces) as int64 arrays, without EOS."""
        rows = self.chunk_pieces(index)
        return [np.asarray(self.lines[line][s:e], dtype=np.int64) for line, s, e in rows]

    def __getitem__(self, index):
        rng = np.random.default_rng([self.seed, self.epoch, index])
        sents = self.sentences(index)
        if len(sents) >= 2:  # split at a sentence boundary
            k = int(rng.integers(1, len(sents)))
            s1, s2 = np.concatenate(sents[:k]), np.concatenate(sents[k:])
        else:
            k = int(rng.integers(1, len(sents[0])))
            s1, s2 = sents[0][:k], sents[0][k:]
        bos, eos = self.dictionary.bos(), self.dictionary.eos()
        context = np.concatenate([[bos], s1, [eos], s2, [eos]]).astype(np.int64)
        segments = np.concatenate([np.zeros(len(s1) + 2), np.ones(len(s2) + 1)]).astype(np.int64)
        maskable = np.ones(len(context), dtype=bool)
        maskable[[0, len(s1) + 1, len(context) - 1]] = False
        ex = build_example(
            rng, context, segments, maskable, self.masking, self.objective,
            self.mask_idx, self.pseudo_idx, self.dictionary.pad(), self.random_candidates,
        )
        ex = {k: torch.from_numpy(v) for k, v in ex.items()}
        ex["id"] = index
        return ex

    def collater(self, samples):
        """Pads the contexts to a common ``prefix_len``, then the appended parts after it, so
        the model can skip the context-to-appended attention block (see ``attention_plan``)."""
        if len(samples) == 0:
            return {}
        pad = self.dictionary.pad()
        n_ctx = [int(s["kinds"].eq(CONTEXT).sum()) for s in samples]  # context comes first
        prefix_len = max(n_ctx)

        def stack(key, value):
            ctx = data_utils.collate_tokens([s[key][:n] for s, n in zip(samples, n_ctx)], value)
            app = [s[key][n:] for s, n in zip(samples, n_ctx)]
            if max(len(a) for a in app) == 0:
                return ctx
            return torch.cat([ctx, data_utils.collate_tokens(app, value)], dim=1)

        tokens = stack("tokens", pad)
        return {
            "id": torch.LongTensor([s["id"] for s in samples]),
            "nsentences": len(samples),
            "ntokens": int(tokens.ne(pad).sum()),
            "net_input": {
                "src_tokens": tokens,
                "positions": stack("positions", 0),
                "segments": stack("segments", 0),
                "kinds": stack("kinds", PAD),
                "steps": stack("steps", 0),
                "prefix_len": prefix_len,
            },
            "target": stack("target", pad),
        }

    def num_tokens(self, index):
        return int(self._num_tokens_by_length[self.index.lengths[index]])

    def num_tokens_vec(self, indices):
        return self._num_tokens_by_length[self.index.lengths[indices]]

    def most_tokens(self):
        """The largest example's ``num_tokens``: the least --max-tokens that batches every example."""
        return int(self._num_tokens_by_length[self.index.lengths.max()])

    def size(self, index):
        return int(self._sizes[index])

    @property
    def sizes(self):
        return self._sizes

    def ordered_indices(self):
        # shuffled, then stably sorted by length (as fairseq's masked_lm) for tight batches
        with data_utils.numpy_seed(self.seed):
            shuffle = np.random.permutation(len(self))
        # the sort key in the smallest integer type that holds it: less memory, and numpy's stable
        # sort of 16-bit keys is a radix sort; a stable sort's order is the same whatever the type
        table = self._num_tokens_by_length
        key = table.astype(np.min_scalar_type(int(table.max())))[self.index.lengths[shuffle]]
        return shuffle[np.argsort(key, kind="stable")]

    def batch_by_size(self, indices, *args, **kwargs):
        batches = super().batch_by_size(indices, *args, **kwargs)
        release_freed_memory()  # the temporaries of ordering, filtering and batching
        return batches

    @property
    def supports_prefetch(self):
        return False
