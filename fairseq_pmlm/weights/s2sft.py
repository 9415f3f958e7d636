"""s2s-ft's conventions (Microsoft's UniLMv2 fine-tuning code), where they differ from a released model's.

Its ``run_seq2seq.py`` saves a fine-tuned model into ``OUTPUT_DIR/ckpt-N/`` (``pytorch_model.bin``,
``config.json``) and its options into ``OUTPUT_DIR/train_opt.json``. The weights are the released
ones after s2s-ft's own conversion (separate q/k/v, a zero key bias, the relative table at
``bert.rel_pos_bias.weight``) plus what its model class saves besides (``layouts.S2SFT_TIED``,
``layouts.S2SFT_LOSS_BUFFERS``). ``config.json`` adds ``source_type_id``/``target_type_id`` (the
segments it fed sources and targets) and a ``max_position_embeddings`` extended to the source +
target length when that exceeds the pre-trained table. What matters for decoding is read here,
or refused in one line.
"""
import os

from .layouts import ConversionError, read_json_object

# the segments the plugin feeds sources and targets (models/seq2seq_views.py)
TYPE_IDS = {"source_type_id": 0, "target_type_id": 1}
TRAIN_OPT = "train_opt.json"
DEFAULT_LENGTHS = (464, 48)  # s2s-ft's --max_source_seq_length, --max_target_seq_length defaults


def check_type_ids(config, where):
    """Sources and targets must have been fed as the segments the plugin feeds them as."""
    for key, ours in TYPE_IDS.items():
        theirs = config.get(key, ours)
        if theirs != ours:
            raise ConversionError(f"{where}: {key} {theirs}: the plugin feeds {key.split('_')[0]}s as segment {ours}, "
                                  f"so only {key} {ours} converts")


def find_train_opt(weights):
    """s2s-ft's train_opt.json: beside the weights, or one level up (OUTPUT_DIR of OUTPUT_DIR/ckpt-N)."""
    here = os.path.dirname(os.path.abspath(weights))
    for d in (here, os.path.dirname(here)):
        if os.path.isfile(os.path.join(d, TRAIN_OPT)):
            return os.path.join(d, TRAIN_OPT)
    return None


def read_train_opt(weights):
    """(path, options) of the fine-tuning run's train_opt.json, or (None, {})."""
    path = find_train_opt(weights)
    if path is None:
        return None, {}
    return path, read_json_object(path)


def seq2seq_lengths(weights, max_positions, notes):
    """(source, target) positions of the fine-tuned model's task: train_opt.json's lengths (s2s-ft
    counts [CLS]/[SEP] in them as --max-source-positions/--max-target-positions do), else s2s-ft's
    defaults, cut to the model's positions."""
    path, opts = read_train_opt(weights)
    if path is not None and "max_source_seq_length" in opts and "max_target_seq_length" in opts:
        try:
            src, tgt = int(opts["max_source_seq_length"]), int(opts["max_target_seq_length"])
        except (TypeError, ValueError):
            raise ConversionError(f"{path}: max_source_seq_length/max_target_seq_length are not integers") from None
        if src < 3 or tgt < 2 or src + tgt > max_positions:
            raise ConversionError(f"{path}: max_source_seq_length {src} + max_target_seq_length {tgt} do not fit the "
                                  f"model's {max_positions} positions")
        notes.append(f"source/target lengths {src}/{tgt} from {path}")
        return src, tgt
    tgt = min(DEFAULT_LENGTHS[1], max_positions // 4)
    src = min(DEFAULT_LENGTHS[0], max_positions - tgt)
    notes.append(f"no {TRAIN_OPT} beside the checkpoint or one level up: source/target lengths {src}/{tgt} "
                 "(generate.sh's presets and the hub's arguments override them)")
    return src, tgt


def lower_case(weights):
    """train_opt.json's --do_lower_case (None when there is none to read)."""
    _, opts = read_train_opt(weights)
    return None if "do_lower_case" not in opts else bool(opts["do_lower_case"])


def pad_first(names, order):
    """s2s-ft pads with id 0 and its loss ignores id 0: [PAD] must be vocab row 0. Moving a
    special row changes nothing on import (specials are placed by name)."""
    i = names.index("[PAD]")
    if i:
        names, order = list(names), list(order)
        names[0], names[i] = names[i], names[0]
        order[0], order[i] = order[i], order[0]
    return names, order
