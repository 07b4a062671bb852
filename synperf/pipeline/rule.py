"""What every rule script does around its stage: logging into the rule's log file, and bad input reported as
one line.

A stage raising :class:`synperf.data.io.InputError` (bad data or config, a failed leak check) ends the job with one
line on stderr, ``rule <name>: <message>`` (the message names the file, row, column or key and what was expected),
and exit status 1; any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import Callable

from synperf.data.io import InputError


def run(sm, step: Callable[[], None]) -> None:
    """Run ``step()`` for the Snakemake script object ``sm``.

    Log records (``logging``, level INFO) and anything the stage prints go to ``sm.log[0]`` when the rule has a
    log file, else to stderr.

    Raises:
        SystemExit: status 1 after an :class:`InputError` (its one-line message on stderr and in the log).
    """
    log_path = sm.log[0] if len(sm.log) else None
    stream = open(log_path, "w") if log_path else sys.stderr
    logging.basicConfig(level=logging.INFO, stream=stream, format="%(asctime)s %(name)s: %(message)s", force=True)
    try:
        with contextlib.redirect_stdout(stream) if log_path else contextlib.nullcontext():
            step()
    except InputError as err:
        line = f"rule {sm.rule}: {str(err).splitlines()[0] if str(err) else type(err).__name__}"
        if log_path:
            logging.getLogger("synperf").error(line)
        print(line, file=sys.stderr, flush=True)
        sys.exit(1)
    finally:
        logging.shutdown()
        if log_path:
            stream.close()
