"""A full disk is one line naming the file whatever wrote it (runtime/disk_full.py), with the
kernel's own ENOSPC: /dev/full fails every write as a full disk does, and a name that is a link
to it is such a file. (The commands' cases: test_one_line_errors.py, test_export_hf.py.)"""
import os
import shutil
import subprocess
import sys

import pytest
import torch

from fairseq_pmlm import disk_full
from fairseq_pmlm.runtime.checkpoint_files import write_atomically

from cli import REPO


def test_a_checkpoint_save_torch_cannot_finish_is_one_line_naming_the_checkpoint(tmp_path):
    """torch reports the file's ENOSPC as its own RuntimeError ("unexpected pos"), which the
    save let through as a traceback."""
    os.symlink("/dev/full", tmp_path / "checkpoint_last.pt.tmp")
    with pytest.raises(disk_full.DiskFull) as e:
        write_atomically(str(tmp_path / "checkpoint_last.pt"), lambda f: torch.save({"w": torch.zeros(1000)}, f))
    assert str(e.value) == f"{tmp_path / 'checkpoint_last.pt'}: cannot write it: No space left on device"
    assert os.listdir(tmp_path) == []  # (the partial file removed)


def test_a_copy_onto_a_full_disk_names_the_copy_not_its_source(tmp_path):
    (tmp_path / "spm.model").write_bytes(b"x" * 100000)
    os.symlink("/dev/full", tmp_path / "copy")
    with pytest.raises(OSError) as e:
        shutil.copy(tmp_path / "spm.model", tmp_path / "copy")
    line = f"{tmp_path / 'copy'}: cannot write it: No space left on device"
    assert disk_full.one_line(e.value, e.tb) == line
    # onto a regular file shutil names both, the source first ("[Errno 28] ...: 'SRC' -> 'DEST'")
    both = OSError(28, os.strerror(28), str(tmp_path / "spm.model"), None, str(tmp_path / "copy"))
    assert disk_full.one_line(both) == line


def test_a_print_onto_a_full_disk_names_the_file_printed_to(tmp_path):
    """fairseq-generate prints its results: the OSError names no file."""
    os.symlink("/dev/full", tmp_path / "generate-test.txt")
    with pytest.raises(OSError) as e:
        with open(tmp_path / "generate-test.txt", "w", buffering=1) as results:
            print("H-0\tthe cat", file=results)
    assert e.value.filename is None
    line = f"{tmp_path / 'generate-test.txt'}: cannot write it: No space left on device"
    assert disk_full.one_line(e.value, e.tb) == line


def test_a_command_whose_output_is_redirected_onto_a_full_disk_says_so_in_one_line(tmp_path):
    """score.py > FILE in generate.sh: a traceback from print, naming no file."""
    (tmp_path / "hyp.txt").write_text("the cat sat\n")
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "score.py"), "--hyp",
                               tmp_path / "hyp.txt", "--ref", tmp_path / "hyp.txt"], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 2  # bad input and a full disk alike: one line, exit 2
    assert proc.stderr == "score.py: error: /dev/full: cannot write it: No space left on device\n"
