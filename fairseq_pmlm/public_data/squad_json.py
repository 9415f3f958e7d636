"""Reading the official SQuAD v1.1 / v2.0 JSON files into flat examples.

Errors name the file and the question id (or, for JSON syntax, the line and column). Where
the reference code (BERT's and Hugging Face's run_squad) skips a training example, an answer
whose text is not the passage text at ``answer_start``, we skip it too and count it.
"""
import json
import logging
from dataclasses import dataclass, field
from typing import List, Tuple

from ..errors import BadInput

logger = logging.getLogger(__name__)


class SquadFormatError(BadInput):
    pass


@dataclass
class SquadExample:
    qid: str
    question: str
    context: str
    answers: List[Tuple[str, int]] = field(default_factory=list)  # (text, char start); gold answers
    is_impossible: bool = False


def read_squad_json(path, training, version_2):
    """-> (examples, skipped). ``training``: the first answer must be the passage text at its
    ``answer_start`` (it becomes the target span); examples where it is not are skipped and
    counted. Evaluation files keep every gold answer as text only, and a question to answer may
    have none."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise SquadFormatError(f"{path}: line {e.lineno} column {e.colno}: malformed JSON ({e.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise SquadFormatError(f"{path}: not a SQuAD file (no top-level \"data\" list)")
    examples, skipped, mismatched = [], 0, []
    for a, article in enumerate(data["data"]):
        paragraphs = article.get("paragraphs", []) if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise SquadFormatError(f"{path}: data[{a}]: not a SQuAD article (an object with a \"paragraphs\" list)")
        for p, para in enumerate(paragraphs):
            where = f"data[{a}].paragraphs[{p}]"
            qas = para.get("qas", []) if isinstance(para, dict) else None
            if not isinstance(qas, list):
                raise SquadFormatError(f"{path}: {where}: not a SQuAD paragraph (an object with a \"qas\" list)")
            context = para.get("context")
            if not isinstance(context, str) or not context.strip():
                raise SquadFormatError(f"{path}: {where}: missing or empty \"context\"")
            for q, qa in enumerate(qas):
                if not isinstance(qa, dict):
                    raise SquadFormatError(f"{path}: {where}.qas[{q}]: not a question (an object with \"id\", "
                                           "\"question\", \"answers\")")
                qid = qa.get("id")
                if not qid:
                    raise SquadFormatError(f"{path}: {where}: a question without an \"id\"")
                question = qa.get("question")
                if not isinstance(question, str) or not question.strip():
                    raise SquadFormatError(f"{path}: question {qid}: empty question")
                impossible = bool(qa.get("is_impossible", False))
                if impossible and not version_2:
                    raise SquadFormatError(f"{path}: question {qid}: is_impossible in a SQuAD v1.1 run "
                                           "(SQuAD 2.0 data: fine-tune with --squad-v2)")
                answers = []
                gold = qa.get("answers", [])
                if not isinstance(gold, list):
                    raise SquadFormatError(f"{path}: question {qid}: \"answers\" is not a list")
                for ans in gold:
                    if not isinstance(ans, dict) or not isinstance(ans.get("text"), str) \
                            or not isinstance(ans.get("answer_start"), int):
                        raise SquadFormatError(f"{path}: question {qid}: an answer needs \"text\" and an "
                                               "integer \"answer_start\"")
                    answers.append((ans["text"], ans["answer_start"]))
                if training and not answers and not impossible:  # (questions to answer need none)
                    raise SquadFormatError(f"{path}: question {qid}: no answers and not is_impossible")
                if training and not impossible:
                    text, start = answers[0]
                    if context[start:start + len(text)] != text:
                        skipped += 1
                        mismatched.append(qid)
                        continue
                examples.append(SquadExample(qid, question.strip(), context, answers, impossible))
    if skipped:
        logger.warning(f"{path}: skipped {skipped} questions whose answer text is not the passage text at "
                       f"answer_start (first: {', '.join(mismatched[:3])})")
    if not examples:
        raise SquadFormatError(f"{path}: no usable questions")
    return examples, skipped
