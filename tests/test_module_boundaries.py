"""How the code is laid out, where a reader relies on it (docs/DESIGN.md §9): each shared rule
has one home, models and criteria do not reach into tasks, and the ground floor is written
without fairseq."""
import ast
import dataclasses
import json
import os
import subprocess
import sys
from types import SimpleNamespace

from fairseq_pmlm.arch import ARCH_SIZES, SIZE_FIELDS, TransformerShape

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(REPO, "fairseq_pmlm")


def plugin_imports(path):
    """The fairseq_pmlm modules a file imports, as dotted names relative to the package."""
    here = os.path.relpath(os.path.dirname(path), PACKAGE).replace(os.sep, ".").strip(".")
    out = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".") if here else []
                base = base[: len(base) - node.level + 1]
                out.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module and node.module.startswith("fairseq_pmlm"):
                out.add(node.module[len("fairseq_pmlm."):])
        elif isinstance(node, ast.Import):
            out.update(a.name[len("fairseq_pmlm."):] for a in node.names if a.name.startswith("fairseq_pmlm."))
    return out


def package_files(*subs):
    """(dotted name, path) of every module under the package's ``subs`` (all of it: no subs)."""
    for sub in subs or ("",):
        for root, _, files in os.walk(os.path.join(PACKAGE, sub)):
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(root, name)
                    yield os.path.relpath(path, PACKAGE)[:-3].replace(os.sep, "."), path


def test_models_criteria_and_weights_import_nothing_from_tasks_or_the_launcher():
    """The converters read the dictionary from data/ (load_pmlm_dictionary), not from a task."""
    for name, path in package_files("models", "criterions", "weights"):
        imported = plugin_imports(path)
        assert not {m for m in imported if m.startswith("tasks") or m == "runtime.distributed_train"}, name


# the package's floors, low to high: a module imports only from its own floor or lower ones
FLOORS = [{"symbols", "arch", "errors", "objectives", "optional_packages", "disk_full"}, {"runtime", "text"},
          {"modules"}, {"data", "public_data"},
          {"models", "criterions", "scoring", "sequence_generator", "beam_search_s2sft"}, {"weights"},
          {"tasks"}, {"recipe_info"}]  # the recipes' facts read checkpoints, tokenisers and tasks


def floor(module):
    return next(i for i, rooms in enumerate(FLOORS) if module.split(".")[0] in rooms)


def test_no_module_imports_from_a_higher_floor():
    """Data, models and the rest take tokenisers from text/ and process-wide changes from runtime/,
    never from tasks/ (the top floor but the recipes' facts), weights/ or each other upwards."""
    upward = []
    for name, path in package_files():
        if name != "__init__":  # the package's __init__ imports what it registers
            here = floor(name)
            upward += [f"{name} -> {m}" for m in plugin_imports(path) if m and floor(m) > here]
    assert upward == []


def test_the_launcher_runs_without_a_warning():
    """``python -m`` runs the launcher as __main__ (here: refusing to run outside torchrun) and
    nothing else is printed: runpy would warn if the package's import had imported it."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "PYTHONWARNINGS")}
    proc = subprocess.run([sys.executable, "-m", "fairseq_pmlm.runtime.distributed_train", "data"],
                          capture_output=True, text=True, cwd=REPO, env=env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        "fairseq_pmlm.runtime.distributed_train: error: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT "
        "not set: start it with torchrun (see scripts/train_distributed.sh) or set RANK, WORLD_SIZE, "
        "LOCAL_RANK, MASTER_ADDR, MASTER_PORT for every rank"], proc.stderr


def fairseq_imports(path):
    """The fairseq modules a file imports itself (not through the plugin's package)."""
    names = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return {n for n in names if n.split(".")[0] in ("fairseq", "fairseq_cli", "hydra")}


def test_the_ground_floor_and_text_are_written_without_fairseq():
    """symbols, arch, errors, objectives and the tokenisers (text/) are plain Python over the files
    fairseq reads: every floor above can use them, and so can anything that reads those files."""
    leaning = {name: fairseq_imports(path) for name, path in package_files()
               if name.startswith("text.") or name != "__init__" and floor(name) == 0}
    assert {name for name in leaning if name.startswith("text.")} and {"symbols", "arch"} <= set(leaning)
    assert {name: found for name, found in leaning.items() if found} == {}


def test_registered_archs_and_the_model_shape_come_from_the_arch_table():
    from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_NAME_REGISTRY

    from fairseq_pmlm.models.unilmv2 import UniLMv2Config
    from fairseq_pmlm.weights.checkpoint import model_flags, pick_arch

    # fairseq registers the model's own name as an arch too (sizes from the config's defaults)
    assert {a for a, m in ARCH_MODEL_NAME_REGISTRY.items() if m == "unilmv2"} == {"unilmv2", *ARCH_SIZES}
    for arch, sizes in ARCH_SIZES.items():
        args = SimpleNamespace()
        ARCH_CONFIG_REGISTRY[arch](args)
        assert tuple(getattr(args, f) for f in SIZE_FIELDS) == sizes
    # the config's shape fields are the shape's (one declaration), the defaults unilmv2_base's
    assert issubclass(UniLMv2Config, TransformerShape)
    config = {f.name: f.default for f in dataclasses.fields(UniLMv2Config)}
    shape = {f.name: f.default for f in dataclasses.fields(TransformerShape)}
    assert {k: config[k] for k in shape} == shape
    assert tuple(shape[f] for f in SIZE_FIELDS) == ARCH_SIZES["unilmv2_base"]
    # a converted model of default options needs no option flag to be rebuilt
    default = TransformerShape()
    assert pick_arch(default) == "unilmv2_base" and model_flags(default, "unilmv2_base") == []


NOTICES = [  # as Hydra and torch word them (fairseq 0.12 triggers each on every command)
    (UserWarning, "hydra.experimental.initialize() is no longer experimental. Use hydra.initialize()"),
    (UserWarning, "\nThe version_base parameter is not specified.\nHydra will assume defaults for version 1.1."),
    (UserWarning, "In 'config': Usage of deprecated keyword in package header '# @package _group_'."),
    (UserWarning, "\n'config' is validated against ConfigStore schema with the same name.\nThis behavior"),
    (UserWarning, "\nThe strict flag in the compose API is deprecated.\nSee https://hydra.cc/docs/1.2/upgrades/"),
    (FutureWarning, "`torch.cuda.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cuda', ...)`"),
    (UserWarning, "'pin_memory' argument is set as true but no accelerator is found, then device pinned memory won't"),
]


def test_importing_the_plugin_leaves_the_root_logger_as_it_found_it_not_at_fairseqs_debug():
    """fairseq's import runs ``logging.basicConfig(level=DEBUG)``: in Python use every library's debug
    lines printed on stderr, and a user's own ``basicConfig`` after the import did nothing. A program
    that configured logging before (fairseq's commands, at INFO) keeps it."""
    fresh = ("import logging, fairseq_pmlm\n"
             "root = logging.getLogger()\n"
             "print(logging.getLevelName(root.level), len(root.handlers))\n"
             "logging.getLogger('some.library').debug('a debug line')\n"
             "logging.basicConfig(level=logging.INFO, format='mine: %(message)s')\n"
             "logging.getLogger('fairseq').info('an info line')\n")
    proc = subprocess.run([sys.executable, "-c", fresh], capture_output=True, text=True, check=True, cwd=REPO)
    assert proc.stdout.split() == ["WARNING", "0"], proc.stdout
    assert "a debug line" not in proc.stderr and "mine: an info line" in proc.stderr, proc.stderr
    configured = ("import logging, sys\n"
                  "logging.basicConfig(level=logging.INFO, stream=sys.stdout, format='cli: %(message)s')\n"
                  "import fairseq_pmlm\n"
                  "logging.getLogger('some.library').debug('a debug line')\n"
                  "logging.getLogger('fairseq').info('an info line')\n")
    proc = subprocess.run([sys.executable, "-c", configured], capture_output=True, text=True, check=True, cwd=REPO)
    assert proc.stdout.splitlines() == ["cli: an info line"], proc.stdout + proc.stderr


def test_importing_the_plugin_silences_exactly_the_notices_fairseq_triggers():
    code = ("import json, sys, warnings; import fairseq_pmlm\n"
            "for category, message in json.loads(sys.argv[1]):\n"
            "    warnings.warn(message, getattr(__builtins__, category))\n"
            "warnings.warn('the strict flag of something else is deprecated', UserWarning)\n")
    notices = json.dumps([(c.__name__, m) for c, m in NOTICES])
    proc = subprocess.run([sys.executable, "-c", code, notices], capture_output=True, text=True, check=True)
    lines = [line for line in proc.stderr.splitlines() if "Warning" in line or "tensorboardX" in line]
    assert len(lines) == 1 and "the strict flag of something else" in lines[0], proc.stderr
