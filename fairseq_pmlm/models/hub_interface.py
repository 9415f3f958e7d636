"""Python use of a unilmv2 checkpoint, RoBERTa/BART style::

    from fairseq_pmlm.models.unilmv2 import UniLMv2Model
    hub = UniLMv2Model.from_pretrained("checkpoints/xsum")        # checkpoint_best.pt, its dict, its tokenizer
    hub.sample(["long text ..."], beam=4)                          # seq2seq checkpoints: summaries
    tokens = hub.encode("Hello world!", "Second segment")          # [SOS] A [EOS] B [EOS]
    hub.extract_features(tokens)                                   # [1, T, C] final hidden states
    hub.fill_mask("The capital of France is [MASK].", topk=3)      # pre-trained checkpoints: the AE head
    hub.register_classification_head("sst", num_classes=2); hub.predict("sst", tokens)

What ``from_pretrained`` finds by itself (every guess can be overridden by an argument):

- the checkpoint: ``MODEL`` if it is a file, else the first of ``model.pt`` (converted released
  weights), ``checkpoint_best.pt``, ``checkpoint_last.pt`` in that directory;
- the dictionary: ``data_name_or_path`` (``"."`` or ``"./DIR"``: the model's directory, or DIR in
  it, as in RoBERTa's and BART's hub), else the checkpoint's own directory when it holds a
  ``dict.txt`` / ``dict.source.txt`` (converted weights, a fine-tuning save dir: ``s2s/finetune.sh``
  copies the data's dictionary and tokenizer there), else the data directory the checkpoint
  was trained on;
- the tokenizer: the one recorded in the checkpoint (``--bpe``) if its file still exists, else
  the one beside the dictionary (``spm.model`` or ``vocab.txt``, text/tokenizer_files.py); a
  ``bpe=`` argument is taken as given (``bpe=None``: none, text split on spaces).

Precision: fp32, also for a checkpoint trained with ``--bf16-autocast``, unless asked for
(``from_pretrained(..., bf16_autocast=True)``, or ``.half()``), as fairseq-generate and
``s2s/generate.sh`` decode.
"""
import logging
import numbers
import os

import torch
import torch.nn.functional as F
from fairseq import checkpoint_utils, hub_utils, utils
from fairseq.dataclass.utils import overwrite_args_by_name
from fairseq.registry import REGISTRIES
from omegaconf import OmegaConf, open_dict

from ..data.dict_files import dict_names, dictionary_in
from ..runtime.checkpoint_files import read as read_checkpoint
from ..symbols import FAIRSEQ_MASK_SYMBOL, MASK_SYMBOL
from ..text import tokenizer_files
from ..text.input_text import valid_unicode

logger = logging.getLogger(__name__)

CHECKPOINT_NAMES = ("model.pt", "checkpoint_best.pt", "checkpoint_last.pt")
# RoBERTa's hub writes the mask as <mask>; BERT users write [MASK]: both are accepted
MASK_SPELLINGS = (FAIRSEQ_MASK_SYMBOL, MASK_SYMBOL)


def find_checkpoint(model_name_or_path, checkpoint_file=None):
    if checkpoint_file is not None and os.pathsep in checkpoint_file and not os.path.isfile(
            os.path.join(model_name_or_path, checkpoint_file)):
        raise ValueError(f"from_pretrained: checkpoint_file={checkpoint_file!r} names several checkpoints: the hub "
                         "holds one model (RoBERTa's and BART's would use the first alone); average them with "
                         "fairseq's scripts/average_checkpoints.py, or pass one")
    if checkpoint_file is not None:
        path = os.path.join(model_name_or_path, checkpoint_file)
    elif os.path.isfile(model_name_or_path):
        path = model_name_or_path
    else:
        path = next((os.path.join(model_name_or_path, n) for n in CHECKPOINT_NAMES
                     if os.path.isfile(os.path.join(model_name_or_path, n))), None)
        if path is None:
            raise FileNotFoundError(f"from_pretrained: no checkpoint in {model_name_or_path} "
                                    f"(looked for {', '.join(CHECKPOINT_NAMES)})")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"from_pretrained: checkpoint not found: {path}")
    return path


def find_data_dir(checkpoint, saved_cfg, data_name_or_path=None):
    source_lang = OmegaConf.select(saved_cfg, "task.source_lang", default=None)
    here = os.path.dirname(os.path.abspath(checkpoint))
    if data_name_or_path is not None and data_name_or_path.startswith("."):
        # fairseq's hub (RoBERTa, BART): "." (their default) and "./DIR" are the model's directory
        # and DIR in it; a path relative to the working directory is kept where only it holds one
        beside = os.path.normpath(os.path.join(here, data_name_or_path))
        if dictionary_in(beside, source_lang) is not None or dictionary_in(data_name_or_path, source_lang) is None:
            data_name_or_path = beside
    if data_name_or_path is not None:
        if dictionary_in(data_name_or_path, source_lang) is None:
            raise FileNotFoundError(f"from_pretrained: {data_name_or_path} holds no "
                                    f"{' or '.join(dict_names(source_lang))}")
        return data_name_or_path
    trained_on = str(OmegaConf.select(saved_cfg, "task.data", default="") or "").split(os.pathsep)[0]
    for candidate in (here, trained_on):
        if dictionary_in(candidate, source_lang) is not None:
            return candidate
    raise FileNotFoundError(f"from_pretrained: no dictionary beside {checkpoint} nor in its training data "
                            f"directory {trained_on!r}: pass data_name_or_path=DIR (the fairseq-preprocess output)")


def tokenizer_cfg(saved_bpe, data_dir):
    """The recorded ``--bpe`` group when its file is still there, else the tokenizer found
    beside the dictionary (a checkpoint moved to another machine keeps working)."""
    saved = tokenizer_files.recorded(saved_bpe)
    if saved_bpe is not None and saved_bpe.get("_name") and saved is None:
        return saved_bpe  # a tokenizer of another kind: as recorded
    try:  # the rule convert_checkpoint.py export follows too
        tok = tokenizer_files.of_checkpoint(saved_bpe, data_dir)
    except ValueError as e:
        raise FileNotFoundError(f"from_pretrained: {e}") from None
    if tok is None:
        logger.warning(f"{data_dir} has no tokenizer ({tokenizer_files.SENTENCEPIECE} or {tokenizer_files.WORDPIECE}): "
                       "encode() will split on spaces and a word not in the dictionary is <unk>; copy the "
                       "pre-training data's tokenizer there")
        return None
    return saved_bpe if tok == saved else OmegaConf.create(tok.fairseq_cfg())


def asked_bpe(overrides):
    """The ``cfg.bpe`` group of an explicit ``bpe=NAME`` (its fields from the other arguments), or
    None for ``bpe=None``: fairseq's overrides would keep a group the checkpoint records instead."""
    choices = REGISTRIES["bpe"]["dataclass_registry"]
    if overrides["bpe"] is not None and overrides["bpe"] not in choices:
        raise ValueError(f"from_pretrained: bpe={overrides['bpe']!r}: not one of None, {', '.join(sorted(choices))}")
    group = OmegaConf.create({"bpe": None})
    overwrite_args_by_name(group, overrides)
    return group.bpe


def from_pretrained(model_name_or_path, checkpoint_file=None, data_name_or_path=None, **overrides):
    checkpoint = find_checkpoint(model_name_or_path, checkpoint_file)
    saved = OmegaConf.create(read_checkpoint(checkpoint)["cfg"])  # an unreadable file: one line naming it
    data = find_data_dir(checkpoint, saved, data_name_or_path)
    # fp32 unless asked (bf16_autocast=True), whatever precision it was trained in: the rule of
    # fairseq-generate and s2s/generate.sh, so the hub and the recipes decode alike
    overrides.setdefault("bf16_autocast", False)
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        [checkpoint], arg_overrides={"data": os.path.abspath(data), **overrides})
    with open_dict(cfg):
        cfg.bpe = asked_bpe(overrides) if "bpe" in overrides else tokenizer_cfg(cfg.bpe, data)
    return UniLMv2HubInterface(cfg, task, models[0])


class UniLMv2HubInterface(hub_utils.GeneratorHubInterface):
    """fairseq's generator hub (``sample``, ``generate``, ``translate``, ``.cuda()``, ``.eval()``)
    plus RoBERTa's methods, with the plugin's token layout."""

    def __init__(self, cfg, task, model):
        super().__init__(cfg, task, [model])
        # fairseq's generator hub makes the model "generation fast", whose train() raises: RoBERTa's
        # hub trains (fine-tuning a head in Python); generation puts the model in eval mode itself
        model.__dict__.pop("train", None)
        self.model = model
        self._told_untrained = False  # fill_mask's warning on an untrained LM head: once a hub
        self.eval()

    @property
    def is_seq2seq(self):
        return self.cfg.task._name == "pmlm_seq2seq"

    # ------------------------------------------------------------------ text <-> tokens
    def _pieces(self, text):
        text = valid_unicode(text.strip())  # bytes that are not UTF-8 become U+FFFD, with a warning
        return self.bpe.encode(text) if self.bpe is not None else text

    def encode(self, sentence, *addl_sentences, no_separator=False):
        """``[SOS] A [EOS] (B [EOS] ...)``, BERT's layout (``[CLS] A [SEP] B [SEP]``): a single
        [EOS] between segments, the segment id read off it (everything after the first [EOS] is B).
        A classifier fine-tuned with RoBERTa's ``--separator-token`` saw that token after each
        [EOS] between segments (``</s> </s>``): the hub encodes as it was trained. ``no_separator``
        drops what stands between segments, as in RoBERTa's hub."""
        d = self.src_dict
        separator = self._separator()
        between = [d.eos()] + ([separator] if separator is not None else [])
        ids = [d.bos()]
        for i, text in enumerate((sentence,) + addl_sentences):
            ids += d.encode_line(self._pieces(text), append_eos=False, add_if_not_exist=False).long().tolist()
            if i == len(addl_sentences):
                ids.append(d.eos())
            elif not no_separator:
                ids += between
        return torch.tensor(ids, dtype=torch.long)

    def _separator(self):
        """RoBERTa's ``--separator-token`` of a classifier fine-tuned with one, else None."""
        separator = self.cfg.task.get("separator_token") if self.cfg.task._name == "sentence_prediction" else None
        return None if separator is None else int(separator)

    def decode(self, tokens):
        """Text of ``tokens``; a list of texts if they hold several [EOS]-separated segments (a
        separator token after an [EOS], as ``encode`` puts it there, separates, as in RoBERTa's)."""
        d = self.src_dict
        if torch.is_tensor(tokens) and tokens.dim() != 1:
            raise ValueError(f"decode: one sequence of tokens (1-D), got shape {tuple(tokens.shape)}: "
                             "decode each row of a batch")
        tokens = tokens.tolist() if torch.is_tensor(tokens) else list(tokens)
        if tokens and tokens[0] == d.bos():
            tokens = tokens[1:]
        separator = self._separator()
        segments, current = [], []
        for i, t in enumerate(tokens):
            if t == separator and i > 0 and tokens[i - 1] == d.eos() and (i < 2 or tokens[i - 2] != d.eos()):
                continue  # (with separator [EOS]: the second of a pair, not a third)
            if t == d.eos():
                segments.append(current)
                current = []
            elif t != d.pad():
                current.append(t)
        if current or not segments:
            segments.append(current)
        texts = [self._detok(d.string(torch.tensor(s, dtype=torch.long))) for s in segments]
        return texts[0] if len(texts) == 1 else texts

    def _detok(self, pieces):
        return self.bpe.decode(pieces) if self.bpe is not None else pieces

    def _batch(self, tokens):
        if tokens.dim() == 1:
            tokens = tokens.unsqueeze(0)
        if tokens.size(-1) > self.model.max_positions():
            raise ValueError(f"tokens exceeds maximum length: {tokens.size(-1)} > {self.model.max_positions()}")
        real = tokens.ne(self.src_dict.pad())
        if bool((real[:, 1:] & ~real[:, :-1]).any()):
            # the model's positions and segments are read off right-padded rows (nlu_layout)
            raise ValueError("a batch must be right-padded (padding after the tokens: "
                             "collate_tokens(..., left_pad=False)), not left-padded or padded inside")
        return tokens.to(device=self.device)

    # ------------------------------------------------------------------ understanding
    def extract_features(self, tokens, return_all_hiddens=False):
        """Final hidden states ``[B, T, C]`` of ``encode()``d tokens (bidirectional, as BERT's). With
        ``return_all_hiddens`` (RoBERTa's and BART's flag) a list of the embedding's output and each
        layer's, ``[B, T, C]`` each, the last the final states: transformers' ``hidden_states``."""
        if not return_all_hiddens:
            features, _ = self.model(self._batch(tokens), features_only=True)
            return features
        t = self.model.transformer
        states = []  # read off the modules as the forward passes them: the model's code has no such output
        hooks = [t.drop.register_forward_hook(lambda module, args, out: states.append(out))]  # embed()'s end
        hooks += [layer.register_forward_hook(lambda module, args, out: states.append(out[0])) for layer in t.layers]
        try:
            self.model(self._batch(tokens), features_only=True)
        finally:
            for hook in hooks:
                hook.remove()
        return states

    def register_classification_head(self, name, num_classes=None, embedding_size=None, **kwargs):
        """RoBERTa's: a new head ``name`` (untrained). It takes the hub's mode: a module is made in
        training mode, and the head's dropout would make ``predict`` differ call by call."""
        inner_dim = kwargs.pop("inner_dim", None) or embedding_size  # the model's own name for it
        self.model.register_classification_head(name, num_classes=num_classes, inner_dim=inner_dim, **kwargs)
        self.model.classification_heads[name].train(self.model.training)

    def predict(self, head, tokens, return_logits=False):
        """Log-probabilities (or logits) of classification head ``head`` on the [SOS] vector, [B, classes].
        A head of one output (a regression: STS-B) gives its score: the log-softmax of one number is
        0 whatever the input (RoBERTa's hub returns that 0 unless asked for logits)."""
        if head not in self.model.classification_heads:
            known = ", ".join(self.model.classification_heads) or "none"
            raise KeyError(f"predict: no classification head {head!r} (registered: {known})")
        logits, _ = self.model(self._batch(tokens), classification_head_name=head)
        return logits if return_logits or logits.size(-1) == 1 else F.log_softmax(logits, dim=-1)

    def fill_mask(self, masked_input, topk=5, match_source_len=True, **generate_kwargs):
        """Top ``topk`` fillers of the single ``[MASK]`` (or ``<mask>``) in ``masked_input`` by
        the AE head: a list of (filled text, probability, filler) like RoBERTa's ``fill_mask``; a list
        of inputs (BART's form) gives one such list each. The filler is one token read in one
        forward pass, so the output always has the source's length (BART's default
        ``match_source_len=True``); ``False`` and BART's beam-search arguments are refused.
        Released weights without an MLM head (all-MiniLM-L6-v2: the converter says so) have a
        fresh AE head, whose fillers mean nothing until PMLM pre-training trains it: said once, as a
        warning, where the checkpoint records its head untrained."""
        if self.is_seq2seq:
            raise ValueError("fill_mask: this is a sequence-to-sequence fine-tuned checkpoint (task "
                             f"{self.cfg.task._name}); its LM head predicts targets, not masked tokens: "
                             "use a pre-trained or converted checkpoint")
        if not match_source_len or generate_kwargs:
            given = ["match_source_len=False"] * (not match_source_len) + sorted(generate_kwargs)
            raise TypeError(f"fill_mask: {', '.join(given)}: this hub fills the one mask with one token read "
                            "off the AE head in a forward pass (no beam search, as RoBERTa's fill_mask)")
        if isinstance(masked_input, (list, tuple)):
            return [self.fill_mask(text, topk) for text in masked_input]
        spelling = next((m for m in MASK_SPELLINGS if m in masked_input), None)
        if spelling is None or sum(masked_input.count(m) for m in MASK_SPELLINGS) != 1:
            raise ValueError(f"fill_mask: the input must contain exactly one {' or '.join(MASK_SPELLINGS)}")
        if not bool(self.model.lm_head_trained) and not self._told_untrained:
            self._told_untrained = True
            logger.warning("fill_mask: this checkpoint's LM head is untrained (weights released without an MLM "
                           "head): its fillers are arbitrary until pre-training trains it")
        left, right = (self._pieces(t) for t in masked_input.split(spelling))
        d = self.src_dict
        mask_idx = d.index(MASK_SYMBOL)
        ids = ([d.bos()] + d.encode_line(left, append_eos=False, add_if_not_exist=False).tolist() + [mask_idx]
               + d.encode_line(right, append_eos=False, add_if_not_exist=False).tolist() + [d.eos()])
        tokens = self._batch(torch.tensor(ids, dtype=torch.long))
        at = tokens.eq(mask_idx)
        with utils.model_eval(self.model):  # as RoBERTa's: no dropout, whatever the hub's mode
            logits, _ = self.model(tokens, masked_tokens=at)
        probs, best = logits.float().softmax(-1)[0].topk(topk)
        results = []
        for p, idx in zip(probs.tolist(), best.tolist()):
            filler = self._detok(d[idx])
            text = self.decode(torch.where(at[0], torch.tensor(idx, device=tokens.device), tokens[0]))
            results.append((text, p, filler))
        return results

    # ------------------------------------------------------------------ generation
    def score(self, sentences, **kwargs):
        """fairseq's generator hub scores a language model's sentences; a sequence-to-sequence
        checkpoint needs a source for each target, which that call has no place for."""
        raise NotImplementedError("score: not available for unilmv2 checkpoints (fairseq's hub scores a language "
                                  "model's sentences; this model's targets need their sources): use "
                                  "fairseq-generate --score-reference on binarized pairs")

    def generate(self, tokenized_sentences, beam=5, verbose=False, **kwargs):
        """fairseq's hub ``generate`` for sequence-to-sequence checkpoints. Without ``max_len_b``
        the longest output is the fine-tuning target length (``--max-target-positions``). A source
        longer than ``--max-source-positions`` is cut to it, as fine-tuning and fairseq-generate cut
        it, so ``skip_invalid_size_inputs`` has nothing to skip: every source gets its hypotheses.
        A source without a token (``sample([""])``) is refused with a ValueError naming it rather
        than answered with text the model invents from nothing; so is a ``beam`` below 1."""
        if not self.is_seq2seq:
            raise ValueError(f"generate: this checkpoint's task is {self.cfg.task._name}, not pmlm_seq2seq: "
                             "fine-tune it for sequence-to-sequence first (scripts/s2s/finetune.sh)")
        if isinstance(beam, bool) or not isinstance(beam, numbers.Integral) or beam < 1:
            raise ValueError(f"generate: beam must be a positive int (the hypotheses kept per step), got {beam!r}")
        if torch.is_tensor(tokenized_sentences) and tokenized_sentences.dim() == 1:
            # fairseq's generate would call itself without inference_step_args/skip_invalid_size_inputs
            return self.generate(tokenized_sentences.unsqueeze(0), beam, verbose, **kwargs)[0]
        d = self.src_dict

        def strip(t):  # the task adds [SOS] itself (as for fairseq-generate's binarized lines); the
            t = t[t.ne(d.pad())]  # padding of a batch's rows (collate_tokens) is not part of a source
            return t[1:] if t.numel() and t[0] == d.bos() else t

        tokenized_sentences = [strip(t) for t in tokenized_sentences]
        for i, t in enumerate(tokenized_sentences):
            if not bool((t.ne(d.eos()) & t.ne(d.pad())).any()):
                raise ValueError(f"generate: source {i} is empty (no token besides [SOS]/[EOS]): "
                                 "there is nothing to generate from")
        if "max_len_b" not in kwargs:
            kwargs["max_len_b"] = min(self.cfg.generation.max_len_b, self.task.cfg.max_target_positions - 1)
        with torch.no_grad():
            return super().generate(tokenized_sentences, beam, verbose, **kwargs)
