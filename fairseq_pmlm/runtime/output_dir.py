"""The one rule for a command that writes an output directory OUT and replaces it with --force
(``text_to_databin``: prepare_data.sh and s2s/prepare.sh; ``convert_checkpoint.py`` import and
export; ``s2s/get_data.py``: ``public_data/cnndm_xsum.py``; ``glue/prepare_glue.py``:
``public_data/glue.py``):

- refused before anything is written: an OUT that holds an input, or lies inside an input read
  whole (``within``); the current, home or root directory, or one that holds them; a symbolic
  link (``link/`` too); a ``~`` the shell left unexpanded (``--out=~/raw``); an existing OUT
  without --force, and with ``marker`` one that is not this command's own earlier output (a
  marker file inside it says so);
- built beside OUT in a hidden staging directory (``.NAME.XXXXXXXX``, same filesystem, so renames;
  a long NAME cut and hashed, so a legal OUT never makes a name too long) that also holds the
  command's scratch files; the new OUT inside it is made with ``mkdir`` and so gets the user's
  umask (``mkdtemp`` makes 0700); errors writing it name OUT, not the staging directory;
- one run at a time: each run holds a lock (``flock``) on its staging directory for the whole run,
  and a run that finds another staging directory of OUT locked is refused, instead of replacing
  the other run's output (one left unlocked by a killed run is no obstacle);
- swapped in while SIGINT and SIGTERM are held back (``signals_held``): with one
  ``renameat2(RENAME_EXCHANGE)`` where the filesystem has it, else two renames (old OUT into the
  staging directory, new OUT into place): an interrupt at any instant leaves the old or the new
  OUT whole; then the staging directory, with the old OUT, is removed;
- a SIGKILL or a power cut leaves a staging directory unlocked (``recover``, on every start): where
  OUT is missing (killed between the two renames) the old OUT in it, else a finished new one, is
  put back; any other is removed; one line says which;
- the staging directory is registered the moment it exists (signals held back around
  ``mkdtemp``), and ``interrupts.one_line_exit`` closes whatever is still open on any way out: no
  hidden directory survives an error, Ctrl-C or SIGTERM at any instant, nor do the directories
  above OUT that the run made (``--out new/deeper/OUT``) while they are empty.
"""
import contextlib
import ctypes
import errno
import fcntl
import glob
import hashlib
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time

from .. import disk_full
from ..errors import BadInput

_OPEN = []  # the Outputs of this process not yet closed (one_line_exit closes them)
_ALL = []  # every Output of this process (their paths named as the user finds them)
_WRITTEN = []  # the OUTs swapped in by this process (an interrupt after that wrote something)
SIGNATURE = "staging-of"  # in every staging directory: it is one (recover removes only those)
FINISHED = "finished"  # in a staging directory whose new OUT is whole, just before the swap


@contextlib.contextmanager
def signals_held():
    """SIGINT and SIGTERM that arrive in the block act at its end, through the handler they would
    have met. (Python-level: masking the signal in this thread would not do, another thread of the
    process, pyarrow's or a tokeniser's, may take it; Python runs every handler in the main thread.)"""
    if threading.current_thread() is not threading.main_thread():
        yield  # (only the main thread may set handlers; the commands do this work there)
        return
    arrived = []
    before = {s: signal.signal(s, lambda signum, frame: arrived.append(signum))
              for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        if arrived:
            signal.raise_signal(arrived[0])


def _inside(path, root):
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def check_inputs(out, inputs, error=BadInput, hint="output"):
    """Replacing ``out`` deletes what it holds: never when that is one of ``inputs`` (the output is
    an input, or an input lies inside it), with or without --force."""
    real = os.path.realpath(out)
    for path in inputs:
        if _inside(os.path.realpath(path), real):
            raise error(f"the output {out} holds the input {path}: choose another {hint} (it would be deleted)")


def check(out, force, inputs=(), within=(), marker=None, error=BadInput, hint="output"):
    """Every refusal of the rule above that needs no lock, before anything is written (after
    ``recover``: a missing OUT put back is checked as it is)."""
    if os.path.expanduser(out) != out:  # `--out=~/raw`: bash expands no ~ after "="
        raise error(f"the output {out} starts with a ~ the shell did not expand (it does not after '='): write "
                    f"{os.path.expanduser(out)}, or leave a space instead of the '='")
    recover(out)
    link = str(out).rstrip(os.sep) or str(out)  # (link/ is what the link points to, and --force replaced the link)
    if os.path.islink(link):  # (first: what it points to is not what --force would replace)
        raise error(f"the output {out} is a symbolic link (to {os.readlink(link)}): give a directory, not a link")
    check_inputs(out, inputs, error, hint)
    real = os.path.realpath(out)
    for path in within:
        if _inside(real, os.path.realpath(path)):
            raise error(f"the output {out} lies inside the input {path}: choose another {hint} (a later run "
                        "would read it as input)")
    for name, path in (("the current directory", os.getcwd()), ("your home directory", os.path.expanduser("~")),
                       ("the root directory", os.sep)):
        if _inside(os.path.realpath(path), real):
            raise error(f"the output {out} is or holds {name}: choose another {hint}")
    _check_existing(out, force, marker, error, hint)


def _check_existing(out, force, marker, error, hint):
    if not os.path.lexists(out):
        return
    if not force:
        raise error(f"{out} exists: pass --force to replace it")
    if marker and not os.path.isfile(os.path.join(out, marker[0])):
        raise error(f"{out} exists and is not an output of {marker[1]} (no {marker[0]} in it): --force replaces "
                    f"only that; choose another {hint}")


class Output:
    """One run's OUT: checked, locked, staged; ``path`` is the new OUT to fill, ``staging`` the
    room for scratch files; ``commit()`` swaps it in, ``close()`` removes what is left."""

    def __init__(self, out, force, inputs=(), within=(), marker=None, error=BadInput, hint="output"):
        """``marker``: (file name, command name), for a command whose --force replaces only its own output."""
        self.given, self.out, self.made = out, os.path.abspath(out), []  # made: see close()
        self.force, self.marker, self.error, self.hint = force, marker, error, hint
        check(out, force, inputs, within, marker, error, hint)
        parent, name = os.path.split(self.out)
        missing = parent  # the directories above OUT this run makes, deepest first
        while missing and not os.path.lexists(missing):
            self.made.append(missing)
            missing = os.path.dirname(missing)
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as e:
            raise error(f"{out}: cannot make its directory: {_file_in_the_way(parent) or e.strerror or e}") from None
        self.lock_fd, self.staging, self.path, self.room = None, None, None, None
        try:
            with signals_held():  # registered the moment it exists
                _OPEN.append(self)
                _ALL.append(self)
                self.staging = self.room = tempfile.mkdtemp(prefix=_prefix(name), dir=parent)
                self.lock_fd = os.open(self.staging, os.O_RDONLY)
                fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new directory: free
            self._refuse_a_second_run()
            with open(os.path.join(self.staging, SIGNATURE), "w") as f:
                f.write(self.out + "\n")
            self.path = os.path.join(self.staging, "out")
            os.mkdir(self.path)  # the user's umask, where mkdtemp's 0700 would stay
        except OSError as e:
            self.close()
            raise self.error(f"{self.given}: cannot write it: {e.strerror or e}") from None
        except BaseException:
            self.close()
            raise

    def _refuse_a_second_run(self):
        for other in _staging_dirs(self.out):
            if other != self.staging and _locked(other):
                raise self.error(f"{self.given}: another run is writing it now (its staging directory {other} "
                                 "is in use): wait for it to end")

    def shown(self, path):
        """``path`` as the user will find it: under OUT, not under the staging directory (whose
        scratch files are OUT's too, to the user)."""
        if path and self.path and _inside(str(path), self.path):
            return self.given + str(path)[len(self.path):]
        if path and self.room and _inside(str(path), self.room):
            return self.given
        return path

    @contextlib.contextmanager
    def writing(self, name):
        """Yields the staging path of OUT/``name`` for a library's writer: one that fails (a full
        disk, say, which torch and safetensors report in their own exception types) is one line
        naming OUT/``name``. (A plain ``OSError`` names its file already: one_line_exit prints it.)"""
        path = os.path.join(self.path, name)
        try:
            with disk_full.named(self.shown(path)):
                yield path
        except OSError:
            raise
        except Exception as e:  # noqa: BLE001  (torch's RuntimeError, safetensors' SafetensorError)
            text = str(e)
            # the OS's reason, as safetensors words it: "...: I/O error: No space left on device (os error 28)"
            m = re.search(r"([^:]+) \(os error \d+\)", text)
            reason = m.group(1).strip() if m else (text.strip().splitlines() or [type(e).__name__])[-1]
            raise self.error(f"{self.shown(path)}: cannot write it: {reason}") from None

    def commit(self):
        """The new OUT into place, the old one (if any) into the staging directory, as one step."""
        if self.marker:
            with open(os.path.join(self.path, self.marker[0]), "w") as f:
                f.write(f"written by {self.marker[1]}; its --force replaces this directory\n")
        with signals_held():
            # again: made meanwhile by something that does not take the lock?
            _check_existing(self.given, self.force, self.marker, self.error, self.hint)
            old = os.path.join(self.staging, "old")
            open(os.path.join(self.staging, FINISHED), "w").close()
            if not os.path.lexists(self.out):
                os.rename(self.path, self.out)
            elif _exchange(self.path, self.out):
                os.rename(self.path, old)  # (what it holds now is the old OUT)
            else:
                os.rename(self.out, old)
                try:
                    os.rename(self.path, self.out)
                except BaseException:
                    os.rename(old, self.out)
                    raise
            _WRITTEN.append(self.given)

    def close(self):
        """Remove the staging directory (the old OUT with it), then release its lock; idempotent.
        Directories made above OUT go too while empty (a run stopped before its swap leaves none of
        ``a/b/`` for ``--out a/b/OUT``), as long as nothing else, another run's output, is in them."""
        if self.staging:
            shutil.rmtree(self.staging, ignore_errors=True)
            self.staging = None
        for d in self.made:
            try:
                os.rmdir(d)
            except OSError:  # (OUT is in it, or something else is)
                break
        self.made = []
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None
        if self in _OPEN:
            _OPEN.remove(self)


def _file_in_the_way(directory):
    """The nearest existing A on the way to ``directory`` if it is no directory ("A is a file, ..."), else None."""
    while directory and not os.path.lexists(directory):
        directory = os.path.dirname(directory)
    return f"{directory} is a file, not a directory" if directory and not os.path.isdir(directory) else None


def _prefix(name):
    """The staging directories' prefix for an OUT named ``name``: a long name cut and hashed (a
    file name has 255 bytes at most; OUT's may be 250)."""
    if len(name.encode()) > 100:
        name = name.encode()[:80].decode(errors="ignore") + "~" + hashlib.sha1(name.encode()).hexdigest()[:12]
    return f".{name}."


def _staging_dirs(out):
    """The staging directories of ``out`` (an absolute path) there are now, ours or another run's."""
    parent, name = os.path.split(out)
    prefix = _prefix(name)
    staged = re.compile(re.escape(prefix) + r"[a-z0-9_]{8}")  # mkdtemp's names
    return [d for d in glob.glob(os.path.join(glob.escape(parent), glob.escape(prefix) + "*"))
            if staged.fullmatch(os.path.basename(d)) and os.path.isdir(d) and not os.path.islink(d)]


_RENAMEAT2 = []  # libc's renameat2, once looked up ([None] where there is none)


def _exchange(a, b):
    """Swap the paths ``a`` and ``b`` in one step (``renameat2(RENAME_EXCHANGE)``); False where the
    C library or the filesystem has no such call, and nothing was done."""
    if not _RENAMEAT2:
        try:
            call = ctypes.CDLL(None, use_errno=True).renameat2
            call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        except (AttributeError, OSError):
            call = None
        _RENAMEAT2.append(call)
    call = _RENAMEAT2[0]
    if call is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    if call(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), b)


def recover(out):
    """What killed runs left of OUT: in each staging directory no run holds, the OUT it hides is
    put back where OUT is missing; the directory is removed. One line each, on stderr."""
    given, out = out, os.path.abspath(out)
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] not in ("", "-c") else "python"
    for staging in _staging_dirs(out):
        fd = _lock(staging)
        if fd is None:  # a run under way (or gone meanwhile)
            continue
        try:
            entries, st = os.listdir(staging), os.stat(staging)
            legacy = st.st_mode & 0o777 == 0o700 and {"out", "old"} & set(entries)  # (no signature yet)
            if entries and SIGNATURE not in entries and not legacy:
                continue  # not one of ours: never removed
            if not entries and time.time() - st.st_mtime < 60:
                continue  # a run starting now, between mkdtemp and its lock
            old, new = os.path.join(staging, "old"), os.path.join(staging, "out")
            hidden = old if os.path.isdir(old) else new if FINISHED in entries and os.path.isdir(new) else None
            name = os.path.basename(staging)
            if hidden and not os.path.lexists(out):
                os.rename(hidden, out)
                what = "its previous output" if hidden == old else "the finished new output"
                print(f"{prog}: {given} was missing (a run was killed while swapping it in): put back {what} "
                      f"from {name}", file=sys.stderr)
            size = _size(staging)
            shutil.rmtree(staging, ignore_errors=True)
            if not os.path.lexists(staging):  # (a read-only parent keeps it)
                    print(f"{prog}: removed {name} beside {given} ({_human(size)}), left by a run that was killed",
                      file=sys.stderr)
        finally:
            os.close(fd)


def _size(directory):
    total = 0
    for root, _, files in os.walk(directory):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, f)).st_size
    return total


def _human(size):
    for unit in ("bytes", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1000


def _lock(directory):
    """A file descriptor holding the lock of ``directory``; None where another process holds it."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except BlockingIOError:
        os.close(fd)
        return None


def _locked(directory):
    """Whether another process holds the lock of a staging directory."""
    fd = _lock(directory)
    if fd is None:
        return os.path.isdir(directory)  # (False: gone meanwhile)
    os.close(fd)  # (releases the lock taken just to look)
    return False


@contextlib.contextmanager
def building(out, force, **rules):
    """``with building(OUT, force, ...) as output:`` fill ``output.path``; it becomes OUT only if
    the block finishes."""
    output = Output(out, force, **rules)
    try:
        yield output
        output.commit()
    finally:
        output.close()


def close_all():
    """Close every Output still open (one_line_exit, on the way out)."""
    for output in list(_OPEN):
        output.close()


def shown(path):
    """``path`` as the user will find it, whichever Output staged it."""
    for output in _ALL:
        path = output.shown(path)
    return path


def written():
    """The OUTs this process has swapped in so far."""
    return list(_WRITTEN)
