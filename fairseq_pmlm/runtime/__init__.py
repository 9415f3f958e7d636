"""What the plugin changes in fairseq or the Python process beyond registering its components
(quiet, checkpoint_files, batched_optimizer_loops, bert_bpe, complete_batches, fused_adam, preemption,
safe_exit, tpu_mode: installed by ``import fairseq_pmlm``) and what its commands call (interrupts,
output_dir, the torchrun launcher distributed_train and the model's process_group_guard).
docs/DESIGN.md §8 is the one list: each change, the fairseq behaviour it replaces and the test that
pins it. This ``__init__`` imports nothing."""
