"""Bad input: a clear error naming the file or flag, and no checkpoint written."""
import pytest

from cli import memorisable_documents, preprocess, records, run, train, write_corpus


def failed_with(proc, message, save_dir):
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr[-2000:]
    assert not list(save_dir.glob("*.pt")) if save_dir.exists() else True


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return preprocess(tmp_path_factory.mktemp("corpus"), memorisable_documents())


def test_missing_data_directory_is_named(tmp_path):
    proc = train(tmp_path / "nowhere", tmp_path / "ckpt", "--max-update", "1", check=False)
    failed_with(proc, f"data directory not found: '{tmp_path / 'nowhere'}'", tmp_path / "ckpt")


def test_empty_corpus_is_refused(tmp_path):
    (tmp_path / "blank.txt").write_text("\n\n\n")
    (tmp_path / "ok.txt").write_text("some valid text here .\n")
    run("fairseq-preprocess", "--only-source", "--trainpref", tmp_path / "blank.txt",
        "--validpref", tmp_path / "ok.txt", "--destdir", tmp_path / "bin", "--workers", "1")
    proc = train(tmp_path / "bin", tmp_path / "ckpt", "--max-update", "1", check=False)
    failed_with(proc, "no usable document", tmp_path / "ckpt")


def test_tokens_per_sample_beyond_positions_names_both_flags(data, tmp_path):
    proc = train(data, tmp_path / "ckpt", "--tokens-per-sample", "1024", check=False)
    failed_with(proc, "--tokens-per-sample 1024 exceeds the model's --max-positions 512", tmp_path / "ckpt")


@pytest.mark.parametrize("same_size", [True, False])
def test_checkpoint_with_another_dictionary_is_refused(same_size, data, tmp_path):
    train(data, tmp_path / "a", "--max-update", "2", "--no-epoch-checkpoints")
    docs = [[s.upper() for s in d] for d in memorisable_documents()]
    if not same_size:  # dictionaries are padded to a multiple of 8: add more than 8 words
        docs.append([" ".join(f"extra{i}" for i in range(20))])
    other = preprocess(tmp_path, docs, name="other")
    n_a = len((data / "dict.txt").read_text().splitlines())
    n_b = len((other / "dict.txt").read_text().splitlines())
    assert (n_a == n_b) == same_size
    proc = train(other, tmp_path / "b", "--max-update", "4", "--restore-file",
                 tmp_path / "a" / "checkpoint_last.pt", check=False)
    failed_with(proc, "checkpoint was trained with a different dictionary", tmp_path / "b")


def test_short_documents_are_skipped_and_long_sentences_split_with_a_log_line(tmp_path):
    docs = memorisable_documents()[:12] + [["lonely"], [" ".join(["word"] * 150)]]
    data = preprocess(tmp_path, docs)
    proc = train(data, tmp_path / "ckpt", "--max-update", "1", "--no-save", "--log-interval", "1")
    out = proc.stdout + proc.stderr
    assert "skipped 1 documents of fewer than 2 tokens" in out
    assert "split 1 sentences longer than 61 tokens" in out
    assert len(records(out)) == 1
