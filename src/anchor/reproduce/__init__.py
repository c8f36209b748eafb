"""``anchor reproduce``: the paper's tables, figures and appendix analyses on the user's model, each of
our cells beside the paper's published one, and the paper's claims checked.

One module per step, data flowing one way:

* :mod:`.published`: the paper's numbers, settings and claims (``anchor/data/paper/``);
* :mod:`.selection`: what to reproduce (tables, figures, appendix, runs, ``--quick``, data files);
* :mod:`.plan`: the selection as planned runs and analyses, and what they share;
* :mod:`.execute` (with :mod:`.analyses`): running the plan in this process, pilot first, resumably,
  under a budget; :mod:`.estimate`: the requests and tokens each run needs;
* :mod:`.cells`: our number for each published cell; :mod:`.claims`: the claims on our numbers;
* :mod:`.sections`, :mod:`.report` and :mod:`.document`: ``report.md`` and ``report.html``.

Nothing here imports the heavy modules at package import: ``anchor.reproduce.published`` stays light
for the command line.
"""
