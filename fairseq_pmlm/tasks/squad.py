"""fairseq task ``pmlm_squad``: extractive question answering, SQuAD v1.1 / v2.0 (docs/DESIGN.md §6).

Reads the official SQuAD JSON files, tokenises with the pre-training tokenizer (``DATA/spm.model``,
or the WordPiece ``DATA/vocab.txt`` of converted weights) and numbers with the pre-training
dictionary (``DATA/dict.txt``), so
any unilmv2 checkpoint of that data fine-tunes with ``--finetune-from-model``. Inputs are
``[SOS] question [EOS] passage-window [EOS]`` (data/squad_features.py); the model's span head
gives start/end logits, [SOS] being the "no answer" span. Prediction and the official
evaluation: scripts/squad/predict_squad.py.
"""
import logging
import os
from dataclasses import dataclass, field

from fairseq.tasks import FairseqTask, register_task
from omegaconf import MISSING

from ..data.pmlm_dictionary import load_pmlm_dictionary
from ..data.squad_dataset import SquadDataset
from ..data.squad_features import encode_example, make_features
from ..errors import InputNotFound
from ..public_data.squad_json import read_squad_json
from ..symbols import SPAN_HEAD
from ..text.tokenizer_files import piece_encoder
from .autocast import AutocastConfig, BF16AutocastMixin
from .pseudo_masked_lm import PMLMDictionaryMixin

logger = logging.getLogger(__name__)


@dataclass
class PMLMSquadConfig(AutocastConfig):
    data: str = field(default=MISSING, metadata={"help": "the pre-training data directory (dict.txt, spm.model), or "
                                                           "a convert_checkpoint.py output (dict.txt, vocab.txt)"})
    train_json: str = field(default="", metadata={"help": "official SQuAD JSON for the train split"})
    valid_json: str = field(default="", metadata={"help": "official SQuAD JSON for the valid split"})
    squad_v2: bool = field(default=False, metadata={"help": "SQuAD 2.0: unanswerable questions (answer: [SOS])"})
    max_positions: int = field(default=384, metadata={"help": "input length: [SOS] question [EOS] window [EOS]"})
    max_query_len: int = field(default=64, metadata={"help": "question tokens kept"})
    doc_stride: int = field(default=128, metadata={"help": "passage tokens between the starts of two windows"})


@register_task("pmlm_squad", dataclass=PMLMSquadConfig)
class PMLMSquadTask(BF16AutocastMixin, PMLMDictionaryMixin, FairseqTask):
    cfg: PMLMSquadConfig

    def __init__(self, cfg, dictionary, sp):
        super().__init__(cfg)
        self.dictionary, self.sp = dictionary, sp

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        dictionary = load_pmlm_dictionary(cfg.data)
        try:
            pieces = piece_encoder(cfg.data)
        except ValueError as e:
            raise InputNotFound(str(e)) from None
        return cls(cfg, dictionary, pieces)

    def squad_features(self, path, training):
        """-> (examples, encoded examples, features) of one SQuAD JSON file. ``training``: with
        answer-span targets (examples whose answer is not the passage text are skipped)."""
        examples, _ = read_squad_json(path, training=training, version_2=self.cfg.squad_v2)
        encoded, features = [], []
        for i, ex in enumerate(examples):
            enc = encode_example(ex, self.sp, self.dictionary, self.cfg.max_query_len, training)
            encoded.append(enc)
            features.extend(make_features(i, enc, self.dictionary, self.cfg.max_positions, self.cfg.doc_stride))
        logger.info(f"{path}: {len(examples)} questions, {len(features)} windows")
        return examples, encoded, features

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        path = {"train": self.cfg.train_json, "valid": self.cfg.valid_json}.get(split, "")
        if not path:
            raise InputNotFound(f"no SQuAD file for split {split!r}: pass --{split}-json")
        if not os.path.isfile(path):
            raise InputNotFound(f"SQuAD file not found: {path}")
        _, _, features = self.squad_features(path, training=True)
        self.datasets[split] = SquadDataset(features, self.dictionary, shuffle=(split == "train"))

    def build_model(self, cfg, from_checkpoint=False):
        cfg.max_positions = max(self.cfg.max_positions, cfg.max_positions)
        model = super().build_model(cfg, from_checkpoint)
        model.register_span_head(SPAN_HEAD)
        return model

    def max_positions(self):
        return self.cfg.max_positions
