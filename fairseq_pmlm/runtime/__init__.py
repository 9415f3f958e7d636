"""Everything the plugin changes in fairseq, or in the Python process, beyond registering its
components: the one list (docs/DESIGN.md §8). Each item names the fairseq behaviour it replaces
and the test that pins it.

Installed by ``import fairseq_pmlm`` (what ``--user-dir`` does; the package ``__init__`` imports
these five, in this order):

- ``quiet``: fairseq 0.12 drives Hydra and torch through deprecated APIs, so every command printed
  a dozen deprecation notices, and importing fairseq sets the root logger to DEBUG (Hydra's
  "Setting JobRuntime" lines). Exactly those notices are ignored (by category and the start of
  their message), Hydra's logger is kept at INFO and absl's at WARNING; every other warning and
  every error still prints. Pinned by tests/test_module_boundaries.py
  (``test_importing_the_plugin_silences_exactly_the_notices_fairseq_triggers``) and
  tests/test_recipes.py (``test_the_recipes_print_their_own_lines_and_fairseq_log_without_deprecation_warnings``).
- ``safe_exit``: an ``atexit`` hook parks fairseq's data-prefetch threads (``BackgroundConsumer``)
  before the interpreter finalises; fairseq let one still collating at ``--max-update`` abort a
  successful run with exit status 134. Pinned by tests/test_safe_exit.py.
- ``checkpoint_files``: replaces, in ``fairseq.checkpoint_utils``, ``torch_persistent_save`` and the
  ``PathManager`` whose ``copy`` made a save's other names (every checkpoint file is written to
  ``NAME.tmp``, fsynced and renamed, where fairseq copied over the old file), and wraps
  ``load_checkpoint_to_cpu`` (an unreadable file is one ``CheckpointError`` line naming it and the
  newest intact checkpoint, not torch's traceback) and ``load_checkpoint`` (rank 0 checks the file
  to resume from, a missing ``--restore-file`` stops where fairseq trained from random weights, a
  checkpoint already at ``--max-update`` trains nothing where fairseq trained one more update);
  replaces ``fairseq.distributed.utils._broadcast_object_slow`` (the receiving ranks load rank 0's
  checkpoint bytes with ``weights_only=False``, which torch's default broke for every distributed
  resume); sets ``sys.excepthook`` so that a ``errors.OneLineError`` reaching the top of a program
  prints ``PROG: error: MESSAGE`` only. Pinned by tests/test_preemption.py (kills, unreadable and
  missing checkpoints, the finished run, the 2-rank resume) and tests/test_one_line_errors.py.
- ``preemption``: replaces ``fairseq_cli.train.main`` and ``validate_and_save``: while training
  runs, SIGTERM and SIGUSR1 (which would kill fairseq at once) only set a flag; after the update
  the ranks agree, ``checkpoint_last.pt`` is saved and the process exits 128 + the signal number.
  Pinned by tests/test_preemption.py and tests/test_interrupts.py.
- ``fused_adam``: replaces ``fairseq.optim.adam.get_fused_adam_class``: without apex, on a GPU,
  ``--optimizer adam`` steps fp32 parameters (``--fp16``'s master copy, or fp32 training) with
  torch's fused AdamW where fairseq ran its per-tensor Python loop; apex, if installed, keeps
  precedence, and the CPU path is unchanged. Pinned by tests/test_fused_adam.py.

Used by the commands that call them, not installed at import:

- ``interrupts``: SIGTERM handled as Ctrl-C (Python's default ends the process before any
  ``finally``) by the commands that build in a temporary directory (``text_to_databin``,
  ``convert_checkpoint``, ``s2s/get_data.py``: ``public_data/cnndm_xsum.py``, ``glue/prepare_glue.py``:
  ``public_data/glue.py``), so nothing is left behind. Pinned by tests/test_text_to_databin.py and
  tests/test_released_minilm.py.
- ``output_dir``: the one rule for an output directory that ``--force`` replaces (the same
  commands): refusals before anything is written, one run at a time, built beside OUT and swapped
  in with renames while SIGINT/SIGTERM wait, so an interrupt leaves the old or the new OUT whole.
  Pinned by tests/test_get_data.py, tests/test_text_to_databin.py, tests/test_export_hf.py and
  tests/test_glue.py.
- ``disk_full``: a write that finds no room (ENOSPC, EDQUOT) is one line naming the file, ``PATH:
  cannot write it: No space left on device``: the checkpoint saves, the output directories, the
  commands' exits and the exception hook (a ``print`` to fairseq-generate's results file raises
  without a file name: the hook names the file the failing code was writing). Pinned by
  tests/test_one_line_errors.py and tests/test_export_hf.py.
- ``process_group_guard``: ``UniLMv2Model.build_model`` refuses a process under torchrun
  (WORLD_SIZE > 1) that formed no process group, where fairseq-train silently trained WORLD_SIZE
  separate models. Pinned by tests/test_distributed_bad_input.py.
- ``distributed_train``: the launcher (``python -m fairseq_pmlm.runtime.distributed_train``, run
  by scripts/train_distributed.sh): fairseq-train as one rank of a torchrun job, forming the
  process group fairseq 0.12 cannot form from torchrun's variables, on GPUs or CPUs. Pinned by
  tests/test_distributed.py and tests/test_distributed_bad_input.py.

Left outside on purpose: ``errors.py`` (the one-line error types; the hook that prints them is
``checkpoint_files``') stays at the package root beside ``symbols.py`` and ``arch.py``: it changes
nothing in fairseq or the process, and the data checks, tasks, models and the recipes' helpers
import it for its classes alone. This ``__init__`` imports nothing: the package's ``__init__``
imports each change by name, and a command imports only the ones it uses (``interrupts``,
``output_dir``).
"""
