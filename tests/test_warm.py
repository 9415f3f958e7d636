"""warm.py, through which cli.run and cli.run_script run fairseq's console scripts and python scripts
and cli.recipe hands a recipe's commands over (site_env): a command run there is what the same
command in a fresh process is (exit status, output, the plugin's one-line errors, files, signals
through its stand-in), and a command of another environment runs from a warm process started with
that environment."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading

import pytest
import warm

from cli import BIN, ENV, REPO, USER_DIR, recipe, shared_corpus, train_args
from tiny_s2s import tiny_s2s


def both(argv, real_argv=None):
    """The command from the warm process, and (or ``real_argv``) as a real process."""
    env = {**os.environ, **ENV}
    real = subprocess.run(real_argv or argv, capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    return warm.run(argv, env=env, cwd=REPO), real


def without_times(text):
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d|\d+\.\d+ seconds|\"train_wall\": \"\d+\"|wps\": \"[\d.]+\"|"
                  r"ups\": \"[\d.]+\"", "T", text)


def test_a_training_run_from_the_warm_process_logs_exits_and_saves_as_a_fresh_process(tmp_path_factory, tmp_path):
    data = shared_corpus(tmp_path_factory)
    fairseq_train = os.path.join(BIN, "fairseq-train")
    warm_run, real_run = both(*[[fairseq_train, *map(str, train_args(data, tmp_path / name, "--max-update", "2",
                                                                      "--no-epoch-checkpoints"))]
                                for name in ("warm", "real")])
    assert warm_run.returncode == real_run.returncode == 0, warm_run.stderr[-2000:]
    differ = [(a, b) for a, b in zip(without_times(warm_run.stdout).replace("/warm", "/X").splitlines(),
                                     without_times(real_run.stdout).replace("/real", "/X").splitlines()) if a != b]
    assert not differ and len(warm_run.stdout.splitlines()) == len(real_run.stdout.splitlines()), differ[:3]
    assert warm_run.stderr == real_run.stderr
    assert sorted(os.listdir(tmp_path / "warm")) == sorted(os.listdir(tmp_path / "real")) == [
        "checkpoint_best.pt", "checkpoint_last.pt"]


def test_an_error_from_the_warm_process_is_the_same_one_line_and_status_as_from_a_fresh_process(tmp_path):
    argv = [os.path.join(BIN, "fairseq-train"), str(tmp_path / "missing"), "--user-dir", USER_DIR,
            "--task", "pseudo_masked_lm", "--arch", "unilmv2_tiny", "--batch-size", "2", "--cpu",
            "--save-dir", str(tmp_path / "save")]
    from_warm, real = both(argv)
    assert from_warm.returncode == real.returncode == 2
    assert from_warm.stderr == real.stderr and len(real.stderr.splitlines()) == 1, real.stderr
    assert not (tmp_path / "save").exists()
    # argparse's own refusal (a SystemExit inside the entry point, not through the hook)
    refused = warm.run([os.path.join(BIN, "fairseq-generate"), "--no-such-flag"], env={**os.environ, **ENV}, cwd=REPO)
    assert refused.returncode == 2
    assert refused.stderr.splitlines()[-1] == "fairseq-generate: error: the following arguments are required: data"


def test_a_command_runs_from_a_warm_process_started_with_its_environment_but_for_the_current_test():
    env = {**os.environ, **ENV}
    server = warm.server_for(env, REPO)
    assert warm.server_for({**env, "PYTEST_CURRENT_TEST": "another test"}, REPO) is server
    threads = warm.server_for({**env, "OMP_NUM_THREADS": "3"}, REPO)
    assert threads is not server
    with open(f"/proc/{threads.proc.pid}/environ", "rb") as f:  # what its interpreter and torch started with
        assert b"OMP_NUM_THREADS=3" in f.read().split(b"\0")
    assert warm.takes([os.path.join(BIN, "fairseq-train")]) and not warm.takes(["bash", "scripts/pretrain.sh"])


def test_a_python_script_from_the_warm_process_sees_what_it_would_see_as_its_own_process(tmp_path):
    script = tmp_path / "show.py"
    script.write_text("import os, sys\n"
                      "print(sys.argv, sys.path[0], __name__, os.getcwd(), os.environ['PYTEST_CURRENT_TEST'])\n"
                      "sys.exit('stopped')\n")
    argv, env = [sys.executable, str(script), "a b", "c"], {**os.environ, **ENV}
    from_warm = warm.run(argv, env=env, cwd=REPO)
    real = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, timeout=60)
    assert from_warm.returncode == real.returncode == 1
    test = os.environ["PYTEST_CURRENT_TEST"]
    assert from_warm.stdout == real.stdout == f"['{script}', 'a b', 'c'] {tmp_path} __main__ {REPO} {test}\n"
    assert from_warm.stderr == real.stderr == "stopped\n"


def handed_over():
    """How many processes have asked this test process's broker for their warm process so far."""
    return warm._broker[0].asked if warm._broker else 0


def test_a_recipes_commands_handed_over_to_the_warm_process_log_exit_and_save_as_fresh_processes(tmp_path_factory,
                                                                                              tmp_path):
    _, data, save = tiny_s2s(tmp_path_factory)
    args = ["--preset", "demo", "--data", data, "--checkpoint", save / "checkpoint_last.pt", "--", "--arch",
            "unilmv2_tiny", "--max-update", "4", "--batch-size", "8", "--disable-validation", "--num-workers", "0"]
    before = handed_over()
    warm_run = recipe("s2s/finetune.sh", "--save-dir", tmp_path / "warm", *args)
    asked = handed_over() - before
    real_run = subprocess.run(["bash", "scripts/s2s/finetune.sh", "--save-dir", tmp_path / "real", *args],
                              capture_output=True, text=True, env={**os.environ, **ENV}, cwd=REPO, timeout=300)
    assert real_run.returncode == 0, real_run.stderr[-2000:]
    assert asked >= 2  # fairseq-train and the recipe's python scripts/recipe_info.py
    masked = [without_times(run.stdout).replace(f"/{name}", "/X") for run, name in ((warm_run, "warm"),
                                                                                    (real_run, "real"))]
    assert masked[0] == masked[1]
    assert warm_run.stderr == real_run.stderr
    assert sorted(os.listdir(tmp_path / "warm")) == sorted(os.listdir(tmp_path / "real"))


def test_a_signal_to_the_stand_in_reaches_the_command_which_saves_exits_143_and_a_killed_stand_in_takes_it_along(
        tmp_path_factory, tmp_path):
    data = shared_corpus(tmp_path_factory)
    env = warm.site_env({**os.environ, **ENV})

    def start(save):
        argv = [os.path.join(BIN, "fairseq-train"), *map(str, train_args(
            data, save, "--max-update", "100000", "--no-epoch-checkpoints", "--log-interval", "1"))]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
        for line in proc.stdout:  # the handed-over command writes to the stand-in's stdout
            if "| train_inner |" in line:
                return proc
        raise AssertionError(proc.stderr.read())

    before = handed_over()
    termed = start(tmp_path / "term")
    termed.send_signal(signal.SIGTERM)
    _, err = termed.communicate(timeout=120)
    assert termed.returncode == 143 and handed_over() == before + 1
    assert "pmlm: SIGTERM received: saved " in err and (tmp_path / "term" / "checkpoint_last.pt").is_file()
    killed = start(tmp_path / "kill")
    killed.kill()
    killed.communicate(timeout=30)  # the end of its output: every writer closed, the command's too
    assert killed.returncode == -signal.SIGKILL


@pytest.mark.parametrize("took", [False, True], ids=["ended before the hand-over", "ended after taking it"])
def test_a_warm_process_that_ends_in_the_hand_over_leaves_the_command_run_once_or_not_at_all(took):
    """sitecustomize.py when the warm process the broker names is gone: before it took the command
    (no one listens), the command runs in its own process with its own output only (no "Error in
    sitecustomize" from Python's site handler); after it took the command and its output (and
    ended without naming a child), the command may have started there, so it does not run here too:
    one line and status 1."""
    folder = tempfile.mkdtemp(prefix="warm-")  # short: an AF_UNIX path has at most 107 bytes
    listeners = [warm._listening(os.path.join(folder, name)) for name in (("broker", "warm") if took else ("broker",))]
    asked = []

    def serve():
        conn, _ = listeners[0].accept()
        with conn:
            asked.append(json.loads(conn.recv(1 << 20))["python"])
            conn.send(json.dumps({"socket": os.path.join(folder, "warm")}).encode())
        if took:
            conn, _ = listeners[1].accept()
            with conn:
                _, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
                for fd in fds:
                    os.close(fd)

    threading.Thread(target=serve, daemon=True).start()
    env = {**os.environ, **ENV, "PYTHONPATH": warm.SITE, "PMLM_TEST_WARM_BROKER": os.path.join(folder, "broker")}
    try:
        proc = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "fetch_wheels.py"), "--help"],
                              capture_output=True, text=True, env=env, cwd=REPO, timeout=60)
    finally:
        for listener in listeners:
            listener.close()
        shutil.rmtree(folder)
    assert asked == [sys.executable]  # it asked, and was told of the warm process that is gone
    if took:
        assert (proc.returncode, proc.stdout) == (1, "") and proc.stderr == (
            "warm_site: the warm process took fetch_wheels.py and ended without naming its child\n"), proc.stderr
    else:
        assert proc.returncode == 0 and proc.stdout.startswith("usage: fetch_wheels.py") and proc.stderr == "", \
            (proc.returncode, proc.stderr)
