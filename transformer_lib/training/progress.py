"""A training run's progress bar, and the lines a terminal or a log shows beside it.

A terminal gets tqdm's bar; a notebook gets it on stdout (the book's pages show a cell's stdout
before its stderr); a log file (a sweep's, ``train ... 2> log``) gets a plain line a minute.
"""

from __future__ import annotations

import sys
import time

from tqdm import tqdm


class Progress:
    """A training call's progress bar, and the lines a terminal shows above it (a lesson plots its history).

    Where stderr is a file (a sweep's log, ``train ... 2> log``), a redrawn bar would be one line of
    carriage returns, hundreds of kilobytes long: there the progress is a plain line every ``PLAIN_EVERY``
    seconds.
    """

    PLAIN_EVERY = 60.0
    PLAIN_FORMAT = "{desc}: {percentage:3.0f}% {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]"

    def __init__(self, total: int, initial: int, enabled: bool) -> None:
        # In a notebook, the bar goes to stdout: the book's pages show a cell's stdout before its
        # stderr, which would put the bar after what training printed.
        self.in_notebook = "ipykernel" in sys.modules
        self.plain = enabled and not self.in_notebook and not sys.stderr.isatty()
        self.enabled, self.total, self.initial, self.n = enabled, total, initial, initial
        self.started = self.printed = time.monotonic()
        self.postfix, self.printed_n = "", initial
        self.bar = tqdm(
            total=total,
            initial=initial,
            desc="train",
            disable=not enabled or self.plain,
            file=sys.stdout if self.in_notebook else None,
            dynamic_ncols=not self.in_notebook,
            mininterval=1.0,
        )

    def update(self, record: dict) -> None:
        self.n += 1
        self.postfix = f"items_s={record['items_per_s']:.0f}, loss={record['loss']:.3f}, lr={record['lr']:.2e}"
        if self.plain and time.monotonic() - self.printed >= self.PLAIN_EVERY:
            self._plain_line()
        self.bar.total = self.total
        self.bar.update(1)
        self.bar.set_postfix_str(self.postfix, refresh=False)  # the bar redraws at most every `mininterval` s

    def _plain_line(self) -> None:
        self.printed = now = time.monotonic()
        self.printed_n = self.n
        line = tqdm.format_meter(
            self.n, self.total, now - self.started, prefix="train",
            postfix=self.postfix, initial=self.initial, bar_format=self.PLAIN_FORMAT,
        )  # fmt: skip
        print(line, file=sys.stderr, flush=True)

    def say(self, line: str) -> None:
        if self.plain:
            print(line, flush=True)
        elif self.enabled and not self.in_notebook:
            self.bar.write(line)

    def close(self) -> None:
        if self.plain and self.n != self.printed_n:  # the last step, unless just printed
            self._plain_line()
        self.bar.close()


def steps_in_time(done: int, elapsed: float, budget: float) -> int:
    """How many steps a time budget of ``budget`` seconds allows at the rate of ``done`` steps in ``elapsed``."""
    if done < 1 or elapsed <= 0:
        return done
    return max(done, round(done * budget / elapsed))
