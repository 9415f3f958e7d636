"""fairseq's ``--bpe bert`` (the hub, fairseq-generate, fairseq-interactive) with the plugin's
WordPiece tokenizer (text/wordpiece.py): a special token's spelling in text ("[SEP]", "[MASK]") is
text there too. fairseq's tokenizer kept it whole, so "[SEP]" met the dictionary as <unk> and
"[MASK]" as the mask, where the data the model was trained on has "[", "sep", "]".
Without a vocab file (a hub download: never here) fairseq's own stands.
"""
from fairseq.data.encoders import hf_bert_bpe

from ..text.wordpiece import bert_tokenizer

FAIRSEQ_INIT = hf_bert_bpe.BertBPE.__init__


def __init__(self, cfg):
    if not cfg.bpe_vocab_file:
        return FAIRSEQ_INIT(self, cfg)
    self.bert_tokenizer = bert_tokenizer(cfg.bpe_vocab_file, cfg.bpe_cased)


hf_bert_bpe.BertBPE.__init__ = __init__
