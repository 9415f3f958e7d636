"""fairseq's console scripts (fairseq-train, fairseq-generate, ...) and python scripts run from a warm
process, for cli.run and cli.run_script.

A fresh fairseq-train process spends ~6 s of a 2-core machine importing torch, torch._dynamo and
fairseq before its tiny model trains in a fraction of a second; the suite runs dozens of them.
warm_server.py imports those once per test process and forks a child per command: the child is
that command's process (its argv, environment, working directory, output and exit status, the
plugin imported by its own ``--user-dir``), without the imports. A warm process serves the commands
of the environment it was started with (but for pytest's PYTEST_CURRENT_TEST), so that what the
interpreter and torch read at their start (PYTHONWARNINGS, OMP_NUM_THREADS, ...) is the command's:
another environment (a test's monkeypatch, a variable a command run in-process set) gets a warm
process of its own. Anything a test signals or watches as a process runs as a real process.

The commands a recipe starts (bash scripts/s2s/finetune.sh runs fairseq-train, ...) are not the
test's to run: ``site_env(env)`` is ``env`` with tests/warm_site on PYTHONPATH, whose
sitecustomize.py hands each fairseq console script and ``python scripts/X.py`` started under it
over to the warm process of its environment (found through a broker socket served by this
process), the started process staying as its stand-in (signals, exit status). For recipes that
no test signals or watches as processes.
"""
import atexit
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import Future
from importlib.metadata import entry_points

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "warm_server.py")
SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "warm_site")  # its sitecustomize.py hands over
CONSOLE_SCRIPTS = {e.name for e in entry_points(group="console_scripts") if e.name.startswith("fairseq-")}
# set anew for each test (pytest) or each command (bash): read by nothing at a start
VARYING = {"PYTEST_CURRENT_TEST", "_", "PWD", "OLDPWD", "SHLVL"}

_lock = threading.Lock()
_servers = {}  # environment (less VARYING) -> its _Server
_broker = []  # the _Broker of this process, once started


@atexit.register
def _close():
    """At the tests' end: every warm process stops (its stdin closed) and its files go, its log
    unless it says something so far. Files first, then the waits: pytest-xdist may end a worker
    while these run (one still importing takes seconds), and a warm process ends by itself."""
    with _lock:
        servers = list(_servers.values())
    for server in servers:
        server.proc.stdin.close()
        shutil.rmtree(server.dir, ignore_errors=True)
        if os.path.getsize(server.log.name) == 0:
            os.remove(server.log.name)
    if _broker:
        shutil.rmtree(_broker[0].dir, ignore_errors=True)
    for server in servers:
        try:
            server.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.proc.kill()


def _listening(path):
    """An AF_UNIX SOCK_SEQPACKET socket listening at ``path`` (messages keep their bounds)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.bind(path)
    sock.listen(64)
    return sock


class _Server:
    def __init__(self, env, cwd):
        self.env, self.ids, self.started, self.ended = env, itertools.count(), {}, {}
        self.log = tempfile.NamedTemporaryFile(prefix="warm-server-", suffix=".log", delete=False)
        self.dir = tempfile.mkdtemp(prefix="warm-")
        self.socket = os.path.join(self.dir, "server")  # for the processes sitecustomize.py hands over
        with _listening(self.socket) as listener:
            self.proc = subprocess.Popen([sys.executable, SERVER, "--listen-fd", str(listener.fileno())],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env,
                                         cwd=cwd, pass_fds=[listener.fileno()])
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            message = json.loads(line)
            with _lock:
                side = self.started if "pid" in message else self.ended
                side.setdefault(message["id"], Future()).set_result(message.get("pid", message.get("rc")))
        with _lock:  # the server is gone: nothing more will end
            for waiting in [*self.started.values(), *self.ended.values()]:
                if not waiting.done():
                    waiting.set_exception(RuntimeError(f"the warm server died: see {self.log.name}"))

    def run(self, argv, env, cwd, timeout, stdin=None):
        out = tempfile.mkdtemp(prefix="warm-")
        paths = {name: os.path.join(out, name) for name in ("stdout", "stderr")}
        if stdin is not None:  # the command's input, as subprocess.run(input=...) gives it
            with open(os.path.join(out, "stdin"), "w") as f:
                f.write(stdin)
        with _lock:
            rid = next(self.ids)
            started, ended = self.started.setdefault(rid, Future()), self.ended.setdefault(rid, Future())
            given = {"stdin": os.path.join(out, "stdin")} if stdin is not None else {}
            self.proc.stdin.write((json.dumps({"id": rid, "argv": argv, "cwd": str(cwd), "env": env,
                                               **paths, **given}) + "\n").encode())
            self.proc.stdin.flush()
        pid = started.result(timeout=60)
        try:
            rc = ended.result(timeout=timeout)
        except TimeoutError:
            os.kill(pid, 9)
            raise subprocess.TimeoutExpired(argv, timeout) from None
        texts = {}
        for name, path in paths.items():
            with open(path, errors="replace") as f:
                texts[name] = f.read()
            os.remove(path)
        shutil.rmtree(out)
        return subprocess.CompletedProcess(argv, rc, texts["stdout"], texts["stderr"])


class _Broker:
    """Tells a process that sitecustomize.py hands over which warm process's socket is its environment's
    (one JSON message each way: its env, cwd and python; the socket, or None for another python)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="warm-broker-")
        self.path = os.path.join(self.dir, "broker")
        self.sock, self.asked = _listening(self.path), 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            conn, _ = self.sock.accept()
            with conn:
                asked = json.loads(conn.recv(1 << 20))
                self.asked += 1
                ours = asked["python"] == sys.executable
                conn.send(json.dumps({"socket": server_for(asked["env"], asked["cwd"]).socket if ours else None})
                          .encode())


def site_env(env):
    """``env`` under which the fairseq console scripts and ``python scripts/X.py`` that anything
    starts (a recipe's bash) run from the warm process of their environment (sitecustomize.py)."""
    with _lock:
        if not _broker:
            _broker.append(_Broker())
    path = os.pathsep.join(p for p in (SITE, env.get("PYTHONPATH")) if p)
    return {**env, "PYTHONPATH": path, "PMLM_TEST_WARM_BROKER": _broker[0].path}


def takes(argv):
    """Whether ``run`` can run this command: a fairseq console script, or ``python SCRIPT.py ...``."""
    return os.path.basename(argv[0]) in CONSOLE_SCRIPTS or (argv[0] == sys.executable and argv[1].endswith(".py"))


def server_for(env, cwd):
    """The warm process of this environment (started now if there is none)."""
    steady = {k: v for k, v in env.items() if k not in VARYING}
    # a recipe run by a recipe activates .venv again: PATH repeats its bin/, which finds nothing new
    key = tuple(sorted({**steady, "PATH": os.pathsep.join(dict.fromkeys(steady.get("PATH", "").split(os.pathsep)))}
                       .items()))
    with _lock:
        if key not in _servers:
            _servers[key] = _Server(steady, cwd)
        return _servers[key]


def run(argv, env, cwd, timeout=300, stdin=None):
    """The command as from ``subprocess.run(argv, capture_output=True, text=True, input=stdin, ...)``,
    from the warm process of its environment."""
    return server_for(env, cwd).run([str(a) for a in argv], dict(env), cwd, timeout, stdin)
