"""What the plugin changes in fairseq or the Python process beyond registering its components
(checkpoint_files, preemption, safe_exit, quiet, fused_adam, batched_optimizer_loops, tpu_mode: installed by
``import fairseq_pmlm``) and what its commands call (interrupts, output_dir, the torchrun launcher distributed_train and
the model's process_group_guard). docs/DESIGN.md §8 is the one list: each change, the fairseq
behaviour it replaces and the test that pins it. This ``__init__`` imports nothing."""
