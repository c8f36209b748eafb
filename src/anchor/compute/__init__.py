"""CPU-heavy work off the event loop: embedding and the clustering jobs the stages hand it.

* :mod:`.offload`: ``encode``, ``encode_condition`` and ``cluster``, run in helper processes
  (``ANCHOR_COMPUTE=processes``, the default) or on threads of this process, and the warm-ups;
* :mod:`.workerproc`: the helper process and its job pipe.

This layer sits under the stages and imports none of them: a stage passes in what to run.
"""
