"""CNN/DailyMail end to end at toy size, as docs/SEQ2SEQ.md's section runs it: made-up articles as .story
files with their split lists and as Hugging Face parquet -> get_data.py (the same raw files) ->
s2s/prepare.sh (the separator one token, in the sentencepiece and the WordPiece path) ->
finetune.sh --preset cnndm (3 updates of unilmv2_tiny) -> generate.sh --preset cnndm -> the
paper's ROUGE table, whose ROUGE-L and ROUGE-Lsum differ."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from fairseq_pmlm.data.databin.cli import main as text_to_databin
from fairseq_pmlm.runtime import checkpoint_files
from fairseq_pmlm.symbols import SENTENCE_SEP

import cli
import summary_fixtures as F
from cli import REPO, recipe


def run_script(script, *args):
    proc = cli.run_script(script, *args)
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc


def target_ids(data):
    """Token ids of every test target of a binarized pair directory (fairseq's mmap format)."""
    from fairseq.data import data_utils

    items = data_utils.load_indexed_dataset(str(data / "test.source-target.target"), None, "mmap")
    return [items[i].numpy() for i in range(len(items))]


def dictionary_row(data, symbol):
    with open(data / "dict.target.txt", encoding="utf-8") as f:
        symbols = [line.split(" ")[0] for line in f]
    return 4 + symbols.index(symbol)  # after fairseq's <s> <pad> </s> <unk>


def wordpiece_dir(tmp, data):
    """A WordPiece vocabulary of the articles' words, as convert_checkpoint.py import leaves one:
    vocab.txt (BERT's specials and [unusedN] rows first, no [X_SEP]), dict.txt, the casing."""
    from fairseq_pmlm.text.vocab import map_vocab

    words = sorted({w for rows in data.values() for _, body, _ in rows for s in body
                    for w in re.findall(r"\w+|[^\w\s]", s.lower())})  # BERT's words and punctuation
    tokens = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
    wp = tmp / "wp"
    wp.mkdir()
    (wp / "vocab.txt").write_text("".join(t + "\n" for t in tokens))
    (wp / "dict.txt").write_text(map_vocab(tokens).dict_txt())
    (wp / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    return wp


@pytest.fixture(scope="module")
def raw_cnndm(tmp_path_factory):
    """get_data.py on the .story files and on the same articles as Hugging Face parquet."""
    tmp = tmp_path_factory.mktemp("cnndm")
    data = F.articles()
    stories, hf = F.write_stories(tmp / "stories", data), F.write_hf(tmp / "hf", data, "cnndm", "parquet")
    get_data = os.path.join(REPO, "scripts", "s2s", "get_data.py")
    run_script(get_data, "cnndm", "--from", stories, "--out", tmp / "raw")
    run_script(get_data, "cnndm", "--from", hf, "--out", tmp / "raw-hf")
    return tmp, data


@pytest.fixture(scope="module")
def chain(raw_cnndm):
    tmp, data = raw_cnndm
    # the recipes on the WordPiece path (a model imported from released weights): a whole-word
    # vocabulary, so that even a model of 3 updates emits words of the highlights
    done = {"prepare": recipe("s2s/prepare.sh", "--raw", tmp / "raw", "--name", "cnndm", "--pretrain-data",
                              wordpiece_dir(tmp, data), "--destdir", tmp, "--workers", "1")}
    done["finetune"] = recipe("s2s/finetune.sh", "--preset", "cnndm", "--data", tmp / "cnndm", "--checkpoint", "none",
                              "--save-dir", tmp / "save", "--", "--arch", "unilmv2_tiny", "--max-update", "3",
                              "--batch-size", "8", "--disable-validation", "--num-workers", "0", "--cpu")
    done["generate"] = recipe("s2s/generate.sh", "--preset", "cnndm", "--data", tmp / "cnndm", "--checkpoint",
                              tmp / "save" / "checkpoint_last.pt", "--refs", tmp / "raw" / "test.target",
                              "--out-dir", tmp / "gen", "--", "--beam", "2", "--max-len-b", "40", "--cpu")
    return tmp, data, done


def test_story_files_and_hugging_face_parquet_give_the_same_raw_files(raw_cnndm):
    tmp, _ = raw_cnndm
    assert F.raw_files(tmp / "raw") == F.raw_files(tmp / "raw-hf")


def test_the_separator_is_one_token_of_an_unused_row_in_the_wordpiece_path(chain):
    """A BERT vocabulary has no [X_SEP]: its first [unusedN] row carries it, and the decoded text
    gets [X_SEP] back (generate.sh's hyp.txt, the rouge scorer)."""
    tmp, _, done = chain
    raw = (tmp / "raw" / "test.target").read_text().splitlines()
    row = dictionary_row(tmp / "cnndm", "[unused0]")
    ids = target_ids(tmp / "cnndm")
    assert [int(np.sum(i == row)) for i in ids] == [t.count(SENTENCE_SEP) for t in raw]
    assert not any(np.any(i == 3) for i in ids)  # no <unk>: "[X_SEP]" was never cut into "[", "x", ...
    assert "sentence separator [X_SEP]: " in done["prepare"].stdout and "([unused0])" in done["prepare"].stdout
    sep = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "recipe_info.py"), "separator",
                          tmp / "cnndm"], capture_output=True, text=True, check=True).stdout.strip()
    assert sep == "[unused0]" and "[unused0]" not in (tmp / "gen" / "hyp.txt").read_text()


def test_the_separator_is_one_token_of_its_own_row_in_the_sentencepiece_path(raw_cnndm):
    tmp, data = raw_cnndm
    # a sentencepiece tokenizer and dictionary trained here (prepare_data.sh's engine, in-process)
    text = tmp / "pretrain.txt"
    text.write_text("\n".join(s for rows in data.values() for _, body, _ in rows for s in body + [""]) + "\n")
    assert text_to_databin(["--out", str(tmp / "pre"), "corpus", "--train", str(text), "--valid", str(text),
                     "--vocab-size", "90"]) == 0
    assert f"{SENTENCE_SEP} 0" in (tmp / "pre" / "dict.txt").read_text().splitlines()  # reserved by the corpus
    assert text_to_databin(["--out", str(tmp / "cnndm-spm"), "pairs", "--raw", str(tmp / "raw"), "--pretrain-data",
                     str(tmp / "pre")]) == 0
    raw = (tmp / "raw" / "test.target").read_text().splitlines()
    row = dictionary_row(tmp / "cnndm-spm", SENTENCE_SEP)
    assert [int(np.sum(ids == row)) for ids in target_ids(tmp / "cnndm-spm")] == [t.count(SENTENCE_SEP) for t in raw]


def test_finetune_and_generate_with_the_cnndm_preset_print_the_papers_rouge_table(chain):
    tmp, data, done = chain
    assert "s2s/finetune: cnndm on" in done["finetune"].stdout and " 3 updates of 8," in done["finetune"].stdout
    assert checkpoint_files.read(tmp / "save" / "checkpoint_last.pt")["cfg"]["task"]["pseudo_draw"] is True  # preset
    # and the preset's decoding, s2s-ft's: "." exempt from the trigram ban, no EOS scored at the limit, its search
    assert "'no_repeat_ngram_ignore': '.', 'eos_at_limit': 'free', 'beam_search': 's2s-ft'" in done["generate"].stderr
    hyps = (tmp / "gen" / "hyp.txt").read_text().splitlines()
    assert len(hyps) == len(data["test"])
    table = (tmp / "gen" / "scores.txt").read_text()
    print("\n" + table)
    lines = table.splitlines()
    assert lines[1] == "| system | ROUGE-1 | ROUGE-2 | ROUGE-L | ROUGE-Lsum |"
    plain, s2sft = ([cell.strip() for cell in line.strip("|").split("|")] for line in lines[3:5])
    assert s2sft[0].endswith("(s2s-ft post-processing)")
    assert plain[3] != plain[4]  # ROUGE-L over the whole summary, ROUGE-Lsum sentence by sentence
    assert "ROUGE-Lsum is the summary-level ROUGE-L" in table
    assert "ROUGE-Lsum" in done["generate"].stdout  # fairseq's own scorer line, separator-aware
