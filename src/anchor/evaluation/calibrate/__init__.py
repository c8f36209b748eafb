"""``anchor calibrate``: the study of labelled evaluation runs behind the calibrators of
:mod:`anchor.calibration`. It fits one on finished runs and says honestly (cross-validated, grouped
by scenario) whether it helps.

* :mod:`.data`: the labelled probabilities of run directories, and the scenario of each instance;
* :mod:`.fit`: ``anchor calibrate fit``;
* :mod:`.folds`: scenario-grouped cross-validation folds, the same for every method;
* :mod:`.evaluate`: cross-validated figures before and after, per dataset and method;
* :mod:`.risk_coverage`: accuracy against the share answered, per run;
* :mod:`.report` and :mod:`.plots`: ``anchor calibrate report`` (Markdown, JSON, PNG).

Named after the command, as :mod:`anchor.evaluation.report` and :mod:`anchor.evaluation.cost` are.
It reads run directories (:mod:`anchor.rundir`) and scores with
:mod:`anchor.metrics`; the calibrators it fits import nothing from here.
"""
