"""The lines of a one-example-a-line file, as every command counts them: a line ends at ``\\n``
only (a CRLF's ``\\r`` is dropped) and a last line without a newline counts. The data-bin engine
(``data/databin/reading.py``), ``scripts/score.py``, ``generate.sh`` (``awk``'s ``NR``), the
ablation driver's ``--refs`` check and ``convert_checkpoint.py``'s ``--keep-pieces-of`` read a file
the same way."""
from ..errors import BadInput


def count_lines(path):
    """Lines of ``path``, streamed."""
    n, last = 0, b"\n"
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            n += block.count(b"\n")
            last = block[-1:]
    return n + (last != b"\n")


def read_lines(path):
    """The decoded lines of a UTF-8 text file; a byte that is not UTF-8 -> BadInput naming the line."""
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    out = []
    for n, line in enumerate(lines, 1):
        try:
            out.append(line.decode("utf-8").removesuffix("\r"))
        except UnicodeDecodeError as e:
            raise BadInput(f"{path} line {n}: not UTF-8 text (byte {line[e.start]:#04x} at byte {e.start + 1} "
                           "of the line)") from None
    return out
