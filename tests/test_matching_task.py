"""scripts/make_matching_task.py: summarisation pairs -> a QNLI-format matching task (does this
summary belong to this document?) that prepare_glue.py reads unchanged."""
import os
import sys

from fairseq_pmlm.public_data.glue_tsv import TASKS, read_glue_tsv

from cli import REPO, run_script

sys.path.insert(0, os.path.join(REPO, "scripts"))
import make_matching_task as matching  # noqa: E402  (a script, not of the package)

SUMMARIES = ["Return the sum.", "Return the SUM!", "Return the product.", "Open a file.", "Close a file."]


def write_pairs(folder, split, summaries):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{split}.source").write_text("".join(f"heading {i}: body of {s} with many words here\n"
                                                    for i, s in enumerate(summaries)))
    (folder / f"{split}.target").write_text("".join(s + "\n" for s in summaries))


def build(tmp_path, *flags):
    pairs = tmp_path / "pairs"
    write_pairs(pairs, "train", SUMMARIES)
    write_pairs(pairs, "valid", SUMMARIES[:3])
    write_pairs(pairs, "test", SUMMARIES[2:])
    out = tmp_path / "task"
    proc = run_script("scripts/make_matching_task.py", "--pairs", pairs, "--out", out, *flags)
    return proc, out


def test_every_pair_gives_its_own_summary_and_a_different_one(tmp_path):
    proc, out = build(tmp_path, "--dev-splits", "valid,test")
    assert proc.returncode == 0, proc.stderr
    for name, summaries in (("train", SUMMARIES), ("dev", SUMMARIES[:3] + SUMMARIES[2:])):
        rows, _ = read_glue_tsv(str(out / f"{name}.tsv"), TASKS["QNLI"])  # what prepare_glue.py reads
        assert len(rows) == 2 * len(summaries)
        for i, summary in enumerate(summaries):
            (other, doc, no), (own, doc2, yes) = rows[2 * i:2 * i + 2]
            assert (own, no, yes) == (summary, "not_entailment", "entailment") and doc == doc2
            assert doc.startswith(f"heading {i if name == 'train' or i < 3 else i - 3}:")
            assert matching.key(other) != matching.key(summary)  # "Return the SUM!" is no negative of "... sum."


def test_a_neighbour_is_the_nearest_pair_with_another_summary_later_first():
    assert [matching.neighbour(i, SUMMARIES) for i in range(5)] == [2, 2, 3, 4, 3]
    assert matching.neighbour(0, ["Same.", "same"]) is None


def test_random_negatives_are_the_same_for_the_same_seed_and_the_source_is_cut(tmp_path):
    first = build(tmp_path / "a", "--max-source-words", "3")[1]
    again = build(tmp_path / "b", "--max-source-words", "3")[1]
    other = build(tmp_path / "c", "--max-source-words", "3", "--seed", "2")[1]
    assert (first / "train.tsv").read_text() == (again / "train.tsv").read_text()
    assert (first / "dev.tsv").read_text() == (again / "dev.tsv").read_text()
    assert (first / "train.tsv").read_text() != (other / "train.tsv").read_text()
    rows, _ = read_glue_tsv(str(first / "train.tsv"), TASKS["QNLI"])
    assert {len(doc.split()) for _, doc, _ in rows} == {3}


def test_unequal_files_are_one_line_naming_them_and_nothing_is_written(tmp_path):
    pairs = tmp_path / "pairs"
    write_pairs(pairs, "train", SUMMARIES)
    write_pairs(pairs, "test", SUMMARIES)
    (pairs / "test.target").write_text("one line\n")
    proc = run_script("scripts/make_matching_task.py", "--pairs", pairs, "--out", tmp_path / "task")
    assert proc.returncode == 2 and not (tmp_path / "task").exists()
    assert proc.stderr.strip() == (f"make_matching_task.py: error: {pairs}/test.source: 5 lines, "
                                   f"{pairs}/test.target: 1: a pair a line in each")
