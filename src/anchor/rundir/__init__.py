"""The run directory: one owner of its layout, written and read only through :class:`RunDirectory`.

An ``anchor eval`` or ``anchor predict`` run writes one directory; ``anchor report``, ``cost``,
``calibrate``, ``reproduce``, ``analyze`` and the HTML index read it back. None of them opens its
files by name: they ask a ``RunDirectory`` (see :mod:`.names` for the names and the schema history).

======================  =====================================================================
``config.json``         ``RunConfig``, written first; records ``schema_version``
``predictions.jsonl``   one ``Prediction`` per finished instance, appended (the last line of a
                        (run, id) counts); a predict run's is rewritten in input order at the end
``traces.jsonl``        one ``TraceRecord`` per answered condition
``calls.jsonl``         one ``CallRecord`` per request (announced, then its outcome) or cache hit
``sample.json``         ``SampleRecord``, when the run samples
``metrics.json``        ``MetricsReport``, written last
``calibration.json``    ``RunCalibration``, written by ``anchor calibrate report``
``rejected.jsonl``      ``anchor predict``'s bad rows (line and reason)
``instances.jsonl``     the instances the run scores, as read from its data file, in order, so
                        that its readers need not find the file again (optional: older runs and
                        runs killed before it was written go back to the data file)
``spaces/``, ``bird/``  per-scenario artefacts, one folder per kind
``.lock``               held by the process writing the run
``.workers/``           the shards of the workers that write their own records (helper
                        processes, ``--ray local``'s actors), until the runner has copied them
                        into the three logs above (:mod:`.shards`); gone when the run ends
======================  =====================================================================

**One view while workers write.** A log's readers see its own lines and then the lines of the
workers' shards that are not copied into it yet, so a run killed before its end reads complete
(its cost counts every request a worker sent) before it is resumed; the next start copies them in.

**A run is started only where it belongs**: in a new or empty folder, or in the directory of a run
to resume; a folder of other files is refused (:meth:`RunDirectory.check_target`), and a start
refused before it recorded anything leaves the folder as it was (:class:`RunStart`).

**Schema version.** ``config.json`` records the layout it was written in (``SCHEMA_VERSION``);
a directory without it is version 1, and every version up to this one is read (metrics.json's
older cost names included). A directory of a newer version is refused by every reader and by a
resume, in one line naming its ``config.json``.

**Strict, or lenient and saying so.** Every reader is strict by default: a line or file that is
not what it should be is an error naming it (a kill's unfinished last line excepted). Readers that
must survive a damaged line (the reproduction's estimates, the report's BIRD-on-ANCHOR table, a
predict run's cost) pass a :class:`Skipped` and put its note in what they write.
"""

from anchor.rundir.directory import RunDirectory
from anchor.rundir.lines import JsonLines, LineProblem, RunDirError, Skipped
from anchor.rundir.lock import DirectoryBusy, DirectoryLock
from anchor.rundir.names import SCHEMA_VERSION
from anchor.rundir.shards import ShardMerger, ShardWriter
from anchor.rundir.start import RunStart

__all__ = [
    "SCHEMA_VERSION",
    "DirectoryBusy",
    "DirectoryLock",
    "JsonLines",
    "LineProblem",
    "RunDirError",
    "RunDirectory",
    "RunStart",
    "ShardMerger",
    "ShardWriter",
    "Skipped",
]
