"""The run engine: one run of one method over the work it is fed, into one run directory.

* :mod:`.session`: ``RunSession``, what every run has (clients, lock, logs, ledger, workers, progress,
  the run directory's one consistent view); drivers feed it work (``anchor eval``: a benchmark's
  instances; ``anchor predict``: a user's table; a service: what arrives);
* :mod:`.answering`: the one bounded answer loop (also ``Anchor.apredict``'s: it imports nothing of
  anchor, and sits low enough in the layers for the pipeline to use);
* :mod:`.worker`: ``InstanceWorker`` and the ``Work`` it answers; :mod:`.pool` (here, and the pools'
  shared parts), :mod:`.processes` and :mod:`.helper` (``--workers N``), :mod:`.ray_pool`,
  :mod:`.ray_local` and :mod:`.ray_watchdog` (``--ray``): where work is answered;
* :mod:`.records` and :mod:`.instances`: the typed files of a run directory and the instances it
  answers; :mod:`.rundir`: the run directory's one owner (file names, schema version, strict or
  lenient reading, the lock, the workers' shards);
* :mod:`.identity`: which recorded settings must match for a rerun to resume a run directory;
  :mod:`.progress`: the progress line; :mod:`.errors`: ``RunError`` and ``WorkersCapped``.

The package itself imports nothing: its records and run directory sit lower in the layers than its
session (the method registry, between them, reads a run's configuration), so each module is imported
by its own name.
"""
