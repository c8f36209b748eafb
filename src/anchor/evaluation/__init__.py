"""The evaluation harness of the ANCHOR paper's experiments (``anchor eval``, ``report``, ``cost``,
``calibrate``).

One folder per job, each with its contract beside its implementations:

* :mod:`.datasets`: the benchmark datasets by family (decision, pairwise, fact checking), the
  paper's seeded sample and which instances a run scores;
* :mod:`.methods`: the shape every method fills, one module per family (ANCHOR, the direct
  baselines, BIRD, BIRD on ANCHOR's space) and the registry ``METHODS`` that the runner reads;
* :mod:`.runner`: the evaluation loop, apart from the run directory's storage, the run's
  configuration and identity, and the scoring into ``metrics.json``;
* :mod:`.rundir`: the run directory's one owner (file names, schema version, reading, the lock);
* :mod:`.report`: ``report.md``'s tables, each of its figures in a module of its own, and the HTML
  index of a run (``write_run_index``);
* :mod:`.cost`: which scenario each request served, and ``anchor cost``'s comparison of two runs;
* :mod:`.calibrate`: ``anchor calibrate``, the calibrators of :mod:`anchor.calibration` fitted on
  labelled runs and judged on scenarios held out.

Beside them: :mod:`.results` (the typed files of a run directory, which every folder reads),
:mod:`.metrics` (F1, accuracy, balanced accuracy, calibration; on arrays, importing nothing of anchor, so
that :mod:`anchor.truth.scores` uses it too), :mod:`.scores` (a run's scores from its predictions, for
``metrics.json`` and for the report) and :mod:`.truth_scores` (a run's scores against the truth, when its
rows carry one). Imports run one way: datasets and
results at the bottom, then methods, then runner; report, cost and calibrate read what a run wrote.
"""
