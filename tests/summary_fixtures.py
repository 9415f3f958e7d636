"""Made-up news articles in each public form of CNN/DailyMail and XSum that scripts/s2s/get_data.py
reads (a plain module, as helpers.py): the Hugging Face datasets as parquet, JSON lines and a
save_to_disk folder, CNN/DailyMail's .story files with their URL split lists, and s2s-ft's
preprocessed JSON lines (text and WordPiece-token forms). Every form holds the same articles, so
every form must give the same raw files.

The articles are generated from a small vocabulary (a tiny model trained on them for a few
updates already emits words of the highlights), with the hard cases of the real data: a caption
line without a final period (the reader adds " ."), curly quotes, brackets, a hyphenated word.
"""
import hashlib
import json
import os
import random

SPLIT_SIZES = {"train": 24, "validation": 4, "test": 4}
PEOPLE = ["the mayor", "a local farmer", "the coach", "police", "the council", "a young pilot"]
ACTS = ["opened", "closed", "visited", "praised", "rebuilt", "sold"]
THINGS = ["the old bridge", "a new school", "the city museum", "the harbour", "a small bakery", "the stadium"]
WHEN = ["on monday", "last week", "after the storm", "before the election", "in the spring"]


def sentence(rng):
    return f"{rng.choice(PEOPLE).capitalize()} {rng.choice(ACTS)} {rng.choice(THINGS)} {rng.choice(WHEN)}."


def articles(seed=0):
    """{split: [(url, article lines, highlights)]}: CNN/DailyMail's split names."""
    rng = random.Random(seed)
    out = {}
    for split, n in SPLIT_SIZES.items():
        rows = []
        for i in range(n):
            body = [sentence(rng) for _ in range(rng.randint(5, 8))]
            body[1] = body[1][:-1]  # a caption-like line without an end mark
            body[2] = body[2][:-1] + " (pictured) \u201cwell-known\u201d."
            highlights = [s.rstrip(".") + " ." for s in body[:rng.randint(2, 4)] if s.endswith(".")]
            url = f"http://www.example.com/news/{split}/{i}/story.html"
            rows.append((url, body, highlights))
        out[split] = rows
    return out


def hf_article(body):
    """The article as the Hugging Face script makes it from the story lines (one space between
    lines, " ." after a line without an end mark)."""
    return " ".join(line if line.endswith((".", "\u201d")) else line + " ." for line in body)


def hf_records(dataset, rows):
    for url, body, highlights in rows:
        ident = hashlib.sha1(url.encode()).hexdigest()
        if dataset == "cnndm":
            yield {"article": hf_article(body), "highlights": "\n".join(highlights), "id": ident}
        else:  # XSum: one-sentence summaries, the document's sentences on lines of their own
            yield {"document": "\n".join(body), "summary": highlights[0], "id": ident}


def write_stories(root, data):
    """cnn/stories/*.story and the lists all_{train,val,test}.txt (URLs; a story is sha1(URL).story)."""
    stories = root / "cnn" / "stories"
    stories.mkdir(parents=True)
    for split, rows in data.items():
        name = {"validation": "val"}.get(split, split)
        (root / f"all_{name}.txt").write_text("".join(url + "\n" for url, _, _ in rows))
        for url, body, highlights in rows:
            text = "\n\n".join(body) + "\n\n" + "".join(f"@highlight\n\n{h}\n\n" for h in highlights)
            (stories / f"{hashlib.sha1(url.encode()).hexdigest()}.story").write_text(text)
    return root


def write_hf(root, data, dataset, form):
    """The Hugging Face form: parquet (the hub's refs/convert layout: one folder a split), JSON
    lines (split.jsonl) or a save_to_disk folder (split/data-00000-of-00001.arrow + its json)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root.mkdir(parents=True)
    for split, rows in data.items():
        records = list(hf_records(dataset, rows))
        table = pa.Table.from_pylist(records)
        if form == "parquet":
            (root / split).mkdir()
            pq.write_table(table, root / split / "0000.parquet", row_group_size=3)  # several row groups
        elif form == "jsonl":
            (root / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        else:
            (root / split).mkdir()
            with pa.OSFile(str(root / split / "data-00000-of-00001.arrow"), "wb") as sink:
                with pa.ipc.new_stream(sink, table.schema) as writer:
                    for batch in table.to_batches(max_chunksize=3):
                        writer.write_batch(batch)
            (root / split / "dataset_info.json").write_text("{}")
            (root / split / "state.json").write_text("{}")
    if form == "save_to_disk":
        (root / "dataset_dict.json").write_text(json.dumps({"splits": list(data)}))
    return root


def wordpieces(text):
    """A stand-in for s2s-ft's tokenized files: lower-cased words, punctuation apart, long words cut
    into ## pieces."""
    import re

    out = []
    for word in re.findall(r"\w+|[^\w\s]", text.lower()):
        out += [word] if len(word) <= 6 else [word[:4], "##" + word[4:]]
    return out


def write_s2sft(root, data, tokenized=False, test_gold=False):
    """s2s-ft's files: {train,dev,test}.json (src, tgt; CNN/DailyMail targets with [X_SEP]
    between sentences), and with ``test_gold`` a test.json without tgt beside test.target
    (" <S_SEP> " between sentences)."""
    root.mkdir(parents=True)
    for split, rows in data.items():
        name = {"validation": "dev"}.get(split, split)
        lines, gold = [], []
        for _, body, highlights in rows:
            src, tgt = hf_article(body), " [X_SEP] ".join(highlights)
            row = {"src": wordpieces(src) if tokenized else src}
            if not (test_gold and split == "test"):
                # s2s-ft's token lists carry the separator as a token of its own
                row["tgt"] = [t for h in highlights for t in ["[X_SEP]"] + wordpieces(h)][1:] if tokenized else tgt
            lines.append(json.dumps(row))
            gold.append(" <S_SEP> ".join(highlights))
        (root / f"{name}.json").write_text("".join(line + "\n" for line in lines))
        if test_gold and split == "test":
            (root / "test.target").write_text("".join(g + "\n" for g in gold))
    return root


def raw_files(out):
    return {name: (out / name).read_bytes() for name in sorted(os.listdir(out))}
