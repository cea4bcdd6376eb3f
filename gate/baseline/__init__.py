"""Baselines: a run compared with an earlier one, an evidence folder or a stored run.

:mod:`gate.baseline.resolve` finds the baseline (``latest-accepted`` of a runner class,
a revision, a tag, or a folder) and :func:`gate.baseline.resolve.compare_records` asks
the rules (:mod:`gate.rules.baseline`) what was lost.
"""
