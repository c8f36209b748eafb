"""``anchor serve``: an HTTP service over the predict engine (the ``serve`` extra: FastAPI and uvicorn).

* :mod:`.engine`: the one adapter to the run engine (online answers with predict's worker, jobs as predict
  runs, reading a run directory back): every import of the engine's internals is there;
* :mod:`.budget`: one LLM concurrency budget for every event loop of the process, online before batch
  (and, with ``--workers``, over the processes, through lock files);
* :mod:`.online`: online predictions (checked as a cases file's rows, admitted, answered, kept);
* :mod:`.jobs`: batch jobs, each a predict run directory on its own thread, run by whichever process holds
  its lock, resumed after a restart or the death of that process;
* :mod:`.spaces`: the space store shared with ``anchor predict --spaces``, and builds;
* :mod:`.state`: the state folder (its lock, jobs, answers); :mod:`.settings`: limits, keys, exposure;
* :mod:`.app`, :mod:`.routes`, :mod:`.job_routes`, :mod:`.page`: the FastAPI application, its routes and
  the live page; :mod:`.errors`: one JSON error shape; :mod:`.metrics`: ``/metrics``;
* :mod:`.service`: the parts put together; :mod:`.server`: uvicorn, SIGTERM and the listening socket;
  :mod:`.workers`: ``--workers N``, N processes under uvicorn's supervisor sharing the state folder.

docs/serve.md is the user's guide.
"""
