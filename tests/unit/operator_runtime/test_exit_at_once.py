"""A lost lease ends the process with EXIT_LOST_LEADERSHIP at once (`running.exit_at_once`), its
last log lines written, while other threads still run and log (watches, cluster supervisors):
the interpreter's shutdown, which can abort a process whose threads are mid-write (exit 134 in a
CI run), is skipped."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from operator_runtime.running import EXIT_LOST_LEADERSHIP

PROGRAM = textwrap.dedent("""
    import logging, sys, threading
    from operator_runtime.logs import configure_logging
    from operator_runtime.running import exit_at_once
    configure_logging("text", "INFO")
    started = threading.Barrier(5)
    def busy(index):
        started.wait()
        while True:
            logging.getLogger(f"worker{index}").info("still working")
    for index in range(4):
        threading.Thread(target=busy, args=(index,), daemon=False).start()
    started.wait()
    logging.getLogger("etcd_operator").error("lost leadership; exiting")
    exit_at_once(int(sys.argv[1]))
""")


def test_the_process_ends_with_its_code_and_its_last_line_while_threads_still_run() -> None:
    result = subprocess.run([sys.executable, "-c", PROGRAM, str(EXIT_LOST_LEADERSHIP)], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == EXIT_LOST_LEADERSHIP, result.stderr[-2000:]
    assert "lost leadership; exiting" in result.stdout + result.stderr
