"""SquadFeature lists as a fairseq dataset: padded ``[SOS] question [EOS] window [EOS]``
batches with start/end targets and the positions an answer may start or end at."""
import numpy as np
import torch
from fairseq.data import FairseqDataset, data_utils


class SquadDataset(FairseqDataset):
    def __init__(self, features, dictionary, shuffle):
        self.features, self.dictionary, self.shuffle = features, dictionary, shuffle
        self.sizes = np.array([len(f.tokens) for f in features], dtype=np.int64)

    def __getitem__(self, i):
        # features stay plain Python objects; the collater builds the batch tensors from them
        return i

    def __len__(self):
        return len(self.features)

    def num_tokens(self, i):
        return int(self.sizes[i])

    def size(self, i):
        return int(self.sizes[i])

    def ordered_indices(self):
        if self.shuffle:
            return np.random.permutation(len(self))
        return np.arange(len(self))

    def collater(self, indices):
        if not indices:
            return {}
        feats = [self.features[i] for i in indices]
        tokens = data_utils.collate_tokens([torch.tensor(f.tokens) for f in feats], self.dictionary.pad())
        # an answer starts and ends at a passage token, or at [SOS] (no answer)
        candidates = torch.zeros_like(tokens, dtype=torch.bool)
        candidates[:, 0] = True
        for b, f in enumerate(feats):
            candidates[b, f.passage_offset:f.passage_offset + f.window_len] = True
        return {
            "id": torch.tensor(indices),
            "nsentences": len(feats),
            "ntokens": int(sum(len(f.tokens) for f in feats)),
            "net_input": {"src_tokens": tokens, "src_lengths": torch.tensor([len(f.tokens) for f in feats])},
            "candidates": candidates,
            "start_positions": torch.tensor([f.start for f in feats]),
            "end_positions": torch.tensor([f.end for f in feats]),
        }
