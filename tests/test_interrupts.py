"""The tests that stop a command with Ctrl-C start it as a terminal would, whatever started the suite."""

from __future__ import annotations

import signal
import subprocess
import sys

from tests.run_helpers import like_a_terminal

SHOW = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"


def test_a_command_stopped_with_ctrl_c_gets_it_when_the_suite_runs_with_sigint_ignored():
    """A suite started in the background (``make test &``) has SIGINT ignored and its processes inherit that:
    without ``like_a_terminal`` the command's Python leaves it ignored and a test's Ctrl-C is lost (the two
    interrupt tests then waited for held requests until their deadline)."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        inherited = subprocess.run([sys.executable, "-c", SHOW], capture_output=True, text=True, check=True)
        restored = subprocess.run([sys.executable, "-c", SHOW], capture_output=True, text=True, check=True,
                                  preexec_fn=like_a_terminal)
    finally:
        signal.signal(signal.SIGINT, before)
    assert inherited.stdout.strip() == "False"  # the situation the helper exists for
    assert restored.stdout.strip() == "True"
