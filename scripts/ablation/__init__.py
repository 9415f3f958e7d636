"""The objective ablation's parts beside its run driver, scripts/ablate_objectives.py: ``inputs``
(checks and settings) and ``report`` (results, table, plots)."""
