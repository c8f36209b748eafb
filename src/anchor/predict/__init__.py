"""``anchor predict``: a user's own table of cases answered into a resumable, audited run directory.

* :mod:`.config`: the cases file and how it is read (``CasesInput``), and the run's ``RunConfig`` of
  kind ``cases`` (``make_predict_config``);
* :mod:`.runner`: ``PredictRunner``, a thin driver of the run engine over the file read as a stream;
* :mod:`.export`: ``predictions.jsonl`` put back in input order, and the flat table (CSV, Parquet);
* :mod:`.estimate`: the requests and tokens a run should need, from the file's check alone.

docs/your-data.md is the user's guide.
"""
