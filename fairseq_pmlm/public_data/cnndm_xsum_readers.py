"""The readers of each form in which CNN/DailyMail and XSum are released (``cnndm_xsum.py`` finds
the form and writes the pairs): Hugging Face rows (parquet, .arrow, JSON lines), CNN/DailyMail's
.story files and s2s-ft's JSON lines, each streamed as (source, target) examples. Bad input is a
``DataError``, one line naming the file (and line)."""
import hashlib
import json
import os

from ..errors import OneLineError

# the end marks after which the Hugging Face script adds no period (curly closing quotes included)
END_MARKS = (".", "!", "?", "...", "'", "`", '"', "\u2019", "\u201d", ")")
BATCH_ROWS = 1000


class DataError(OneLineError):
    """Bad input; the message is the one line the user sees."""


# ---------------------------------------------------------------- reading text
def text_lines(path):
    """Decoded lines of a text file (without their newline, nor a leading byte order mark), one at
    a time; bad UTF-8 -> DataError naming the file and line."""
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
                yield line.removeprefix("\ufeff") if n == 1 else line  # a UTF-8 byte order mark: not text
            except UnicodeDecodeError as e:
                raise DataError(f"{path}:{n}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column {e.start + 1}); "
                                "convert it, e.g. iconv -f latin1 -t utf-8") from None


def json_lines(path):
    """(line number, parsed value) of a JSON-lines file's non-blank lines; bad JSON -> DataError."""
    for n, line in enumerate(text_lines(path), 1):
        if not line.strip():
            continue
        try:
            yield n, json.loads(line)
        except ValueError as e:
            raise DataError(f"{path}:{n}: not a JSON object ({e.msg})") from None


# ---------------------------------------------------------------- the forms
def hf_rows(path, kind, fields):
    """(source, target sentences) of a Hugging Face split file, streamed."""
    if kind == "jsonl":
        for n, row in json_lines(path):
            missing = [f for f in fields if not isinstance(row, dict) or f not in row]
            if missing:
                raise DataError(f"{path}:{n}: no {' / '.join(missing)} field (expected {', '.join(fields)})")
            for field, value, lists in ((fields[0], row[fields[0]], False), (fields[1], row[fields[1]], True)):
                if not is_text(value, lists):
                    raise DataError(f"{path}:{n}: the {field} field holds {type(value).__name__}, not text")
            yield row[fields[0]], row[fields[1]]
        return
    for batch in arrow_batches(path, kind, fields):
        yield from zip(*(batch.column(f).to_pylist() for f in fields))


def arrow_batches(path, kind, fields):
    pa = pyarrow()
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            f = pq.ParquetFile(path)
            check_columns(path, f.schema_arrow, fields)
            yield from f.iter_batches(batch_size=BATCH_ROWS, columns=list(fields))
            return
        import pyarrow.ipc as ipc

        with pa.memory_map(path) as source:
            try:
                reader = ipc.open_stream(source)  # what save_to_disk writes
            except pa.ArrowInvalid:
                reader = ipc.open_file(source)
                reader = (reader.get_batch(i) for i in range(reader.num_record_batches))
            for batch in reader:
                check_columns(path, batch.schema, fields)
                yield batch
    except (pa.ArrowInvalid, OSError) as e:
        raise DataError(f"{path}: not a readable {kind} file ({str(e).splitlines()[0]})") from None


def is_text(value, lists):
    """A text field's value: text or nothing, and for a target (``lists``) a list of sentences too."""
    if value is None or isinstance(value, str):
        return True
    return lists and isinstance(value, list) and all(isinstance(s, str) for s in value)


def check_columns(path, schema, fields):
    missing = [f for f in fields if f not in schema.names]
    if missing:
        raise DataError(f"{path}: no {' / '.join(missing)} column (it has {', '.join(schema.names)}; expected "
                        f"{', '.join(fields)})")
    pa = pyarrow()
    for field, lists in ((fields[0], False), (fields[1], True)):
        kind = plain_type(schema.field(field).type)
        inner = plain_type(kind.value_type) if lists and (pa.types.is_list(kind) or pa.types.is_large_list(kind)) \
            else None
        text = (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind)
                or inner is not None and (pa.types.is_string(inner) or pa.types.is_large_string(inner)))
        if not text:  # bytes would be written as b'...', numbers and structs stop in the middle
            raise DataError(f"{path}: the {field} column holds {kind}, not text (convert it to strings)")


def plain_type(kind):
    """A dictionary-encoded column's type is its values' (each row reads as the value)."""
    return kind.value_type if pyarrow().types.is_dictionary(kind) else kind


def pyarrow():
    try:
        import pyarrow as pa
    except ImportError:
        raise DataError("reading parquet and .arrow files needs pyarrow: pip install pyarrow==26.0.1 "
                        "(requirements.txt pins it)") from None
    return pa


def read_story(path):
    """(article, highlights) of a .story file, as the Hugging Face cnn_dailymail script reads it."""
    article, highlights, after_marker = [], [], False
    for line in text_lines(path):
        line = line.strip()
        if not line:
            continue
        if line.startswith("@highlight"):
            after_marker = True
            continue
        if not line.endswith(END_MARKS):
            line += " ."  # image captions and the like would run into the next sentence
        (highlights if after_marker else article).append(line)
    if not highlights:
        raise DataError(f"{path}: a .story file with no highlights (no line after an @highlight line)")
    return " ".join(article), highlights


def s2sft_text(value, path, n):
    """An s2s-ft field: text, or WordPiece tokens (## pieces joined to the one before)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise DataError(f"{path}:{n}: src/tgt must be text or a list of tokens")
    words = []
    for t in value:
        if t.startswith("##") and words:
            words[-1] += t[2:]
        else:
            words.append(t)
    return " ".join(words)


def s2sft_rows(json_path, gold_path):
    """(source, target) of an s2s-ft split: its JSON lines, the targets from ``gold_path`` when given."""
    gold = iter(text_lines(gold_path)) if gold_path else None
    n_gold = 0
    for n, row in json_lines(json_path):
        if not isinstance(row, dict) or "src" not in row:
            raise DataError(f"{json_path}:{n}: no src field (s2s-ft's files hold src and tgt)")
        if gold is not None:
            target = next(gold, None)
            if target is None:
                raise DataError(f"{gold_path} has {n_gold} lines but {json_path} has more examples: "
                                "sources and targets do not line up")
            n_gold += 1
        elif "tgt" in row:
            target = s2sft_text(row["tgt"], json_path, n)
        else:
            raise DataError(f"{json_path}:{n}: no tgt field, and no {os.path.basename(json_path)[:-5]}.target "
                            "beside it")
        yield s2sft_text(row["src"], json_path, n), target
    if gold is not None and next(gold, None) is not None:
        raise DataError(f"{gold_path} has more lines than {json_path} has examples: sources and targets do not "
                        "line up")


def story_rows(list_path, stories):
    for n, url in enumerate(text_lines(list_path), 1):
        url = url.strip()
        if not url:
            continue
        digest = hashlib.sha1(url.encode("utf-8")).hexdigest()
        if digest not in stories:
            raise DataError(f"{list_path}:{n}: {url} -> {digest}.story is not among the .story files")
        yield read_story(stories[digest])
