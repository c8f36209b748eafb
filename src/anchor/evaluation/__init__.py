"""The evaluation harness of the ANCHOR paper's experiments (``anchor eval``, ``report``, ``cost``,
``calibrate``): what is about benchmarks. The run engine they drive is :mod:`anchor.runs`, the methods
:mod:`anchor.methods`.

* :mod:`.datasets`: the benchmark datasets by family (decision, pairwise, fact checking), the
  paper's seeded sample and which instances a run scores;
* :mod:`.driver`: ``EvalRunner``, ``anchor eval``'s thin driver over the run engine's session, and
  :mod:`.run_config` (a run's configuration made from the command's settings);
* :mod:`.scoring`: ``metrics.json`` of a finished run, read one record at a time;
* :mod:`.report`: ``report.md``'s tables, each of its figures in a module of its own, and the HTML
  index of a run (``write_run_index``);
* :mod:`.cost`: which scenario each request served, and ``anchor cost``'s comparison of two runs;
* :mod:`.calibrate`: ``anchor calibrate``, the calibrators of :mod:`anchor.calibration` fitted on
  labelled runs and judged on scenarios held out.

Beside them: :mod:`.metrics` (F1, accuracy, balanced accuracy, calibration; on arrays, importing nothing
of anchor, so that :mod:`anchor.truth.scores` uses it too), :mod:`.scores` (a run's scores from its
predictions, for ``metrics.json`` and for the report) and :mod:`.truth_scores` (a run's scores against
the truth, when its rows carry one). Imports run one way: datasets at the bottom, then the driver and
the scoring; report, cost and calibrate read what a run wrote.
"""
