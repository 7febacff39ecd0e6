"""Progress on stderr: a bar in a terminal, one log line per event otherwise.

In a terminal the bar moves every step and shows the training loss and accuracy of the last validation
(read then, so that a step on a GPU never waits on the host), the elapsed time and the time left (at
most: early stopping may end the run sooner). Without a terminal (a log file,
a pipe, a batch job) each validation is one line::

    train rnn on parity: step 400/2000  loss 0.512  val acc 87.5%  elapsed 12s  ETA 48s

and each test length, and each finished run of a sweep, one line too. A long evaluation says every
``TOKEN_EVERY`` seconds how far it is (tokens done of the length's batch, the rate, the time left). A line
wider than ``COLUMNS`` (80 when unset) continues on lines indented by two spaces, broken between its fields
(two spaces apart), so a log read in a terminal or an editor of that width is never cut or wrapped
mid-field. Progress never goes to stdout, so ``--json`` output stays clean. Durations come from the
monotonic clock: a clock set back never makes one negative.
"""

from __future__ import annotations

import os
import sys
import time

from statetrack.cli.output import PIPE_WIDTH, wrap
from statetrack.progress import describe_waits, duration

#: how a log line that does not fit continues
INDENT = "  "


def log_width() -> int:
    """The width of a log line: ``COLUMNS`` when set, else 80 (a log's lines are read in files and pipes)."""
    cols = os.environ.get("COLUMNS", "").strip()
    return int(cols) if cols.isdigit() and int(cols) > 0 else PIPE_WIDTH


def fit(text: str, width: int) -> list[str]:
    """``text`` as lines of at most ``width`` cells: its fields (separated by two spaces) kept whole and
    packed in order, each line after the first indented by :data:`INDENT`; a field wider than a line is
    broken at its spaces (``output.wrap``)."""
    out: list[str] = []  # finished lines, before their indent
    line = ""
    for field in (f for f in text.split("  ") if f):
        if line and len(line) + 2 + len(field) <= width - (len(INDENT) if out else 0):
            line += "  " + field
            continue
        if line:
            out.append(line)
        room = width - (len(INDENT) if out else 0)
        parts = wrap(field, max(1, width - len(INDENT))) if len(field) > room else [field]
        out.extend(parts[:-1])
        line = parts[-1]
    out.append(line)
    return [out[0]] + [INDENT + x for x in out[1:]]


#: seconds between the progress lines of a long evaluation (the first comes after as long)
TOKEN_EVERY = 5.0


class _Reporter:
    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.t0 = time.monotonic()
        self.bar = None

    def __enter__(self):
        if self.tty:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(bar_width=20),
                MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                transient=True,
                console=Console(file=self.stream),
            )
            self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)
        return False

    def log(self, text: str) -> None:
        if self.bar is not None:  # above the bar, which stays at the bottom
            self.bar.console.print(text, markup=False, highlight=False)
        else:
            print("\n".join(fit(text, log_width())), file=self.stream, flush=True)

    def times(self, done: float, total: float) -> str:
        el = time.monotonic() - self.t0
        eta = el / done * (total - done) if done else 0.0
        return f"elapsed {duration(el)}  ETA {duration(eta)}"


def _long_duration(s: float) -> str:
    """:func:`progress.duration`, and days or years beyond 99 hours."""
    if s == float("inf"):
        return "unknown"
    if s < 99 * 3600:
        return duration(s)
    days = s / 86400
    return f"{days:,.0f} days" if days < 3650 else f"{days / 365.25:,.3g} years"


class RunProgress(_Reporter):
    """One run: training steps, validations, then the test lengths."""

    def __init__(self, title: str, steps: int, lengths: int, stream=None):
        super().__init__(stream)
        self.title, self.steps, self.lengths = title, steps, lengths
        self.loss, self.acc, self.done_lengths = None, None, 0

    def __enter__(self):
        super().__enter__()
        if self.bar is not None:
            self.task = self.bar.add_task(self.title, total=self.steps or self.lengths, info="")
        from statetrack.training.evaluation import watched  # heavy (torch): a run imports it anyway

        self._watch = watched(self.tokens)
        self._watch.__enter__()
        self._said: tuple[int, float] | None = None  # (length, when) of the last token line
        return self

    def __exit__(self, *exc):
        self._watch.__exit__(*exc)
        return super().__exit__(*exc)

    def tokens(self, length: int, done: int, total: int) -> None:
        """After each chunk of an evaluation: every ``TOKEN_EVERY`` s, a line with the tokens done of the
        length's batch, the rate and the time left."""
        now = time.monotonic()
        if self._said is None or self._said[0] != length:
            self._said = (length, now)  # the rate is counted from the length's first chunk
            self._first = (now, done)
            return
        if now - self._said[1] < TOKEN_EVERY:
            return
        self._said = (length, now)
        t0, d0 = self._first
        rate = (done - d0) / max(now - t0, 1e-9)
        left = (total - done) / rate if rate > 0 else float("inf")
        self.log(
            f"{self.title}: test length {length:,}: {done:,} of {total:,} tokens ({100 * done / total:.2g}%)  "
            f"{rate:,.0f} tokens/s  ETA {_long_duration(left)}"
        )

    def _info(self) -> str:
        return "  ".join(
            x
            for x in (
                f"loss {self.loss:.3f}" if self.loss is not None else "",
                f"val acc {100 * self.acc:.1f}%" if self.acc is not None else "",
            )
            if x
        )

    def step(self, step: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=step, info=self._info())

    def validation(self, step: int, info: dict) -> None:
        self.loss, self.acc = info["train_loss"], info["val_accuracy"]
        if self.bar is not None:
            self.bar.update(self.task, completed=step, info=self._info())
        else:
            self.log(
                f"{self.title}: step {step}/{self.steps}  {self._info()}  {self.times(step, self.steps)}"
            )

    def length(self, m) -> None:
        self.done_lengths += 1
        if self.bar is not None:
            self.bar.update(
                self.task,
                description=f"evaluate L={m.length}",
                completed=self.done_lengths,
                total=self.lengths,
                info=self._accuracy(m),
            )
        else:
            self.log(
                f"{self.title}: test length {m.length} ({self.done_lengths}/{self.lengths})  "
                f"{self._accuracy(m)}  elapsed {duration(time.monotonic() - self.t0)}"
            )

    @staticmethod
    def _accuracy(m) -> str:
        """The length's accuracy named for what it is (the label after all its inputs: a language model's
        final token), and its token accuracy (every scored position: the LM table's) where it differs."""
        if m.accuracy is None:
            return f"accuracy n/a ({m.note})"
        out = f"last-position accuracy {100 * m.accuracy:.1f}%"
        if m.token_accuracy is not None and round(1000 * m.token_accuracy) != round(1000 * m.accuracy):
            out += f"  token accuracy {100 * m.token_accuracy:.1f}%"
        return out


class SweepProgress(_Reporter):
    """A grid of runs: one line per finished run, and per validation of a running run."""

    def __init__(self, title: str, runs: int, stream=None):
        super().__init__(stream)
        self.title, self.runs, self.finished = title, runs, 0

    def __enter__(self):
        super().__enter__()
        if self.bar is not None:
            self.task = self.bar.add_task(self.title, total=self.runs, info="")
        return self

    @staticmethod
    def name(job) -> str:
        return f"{job.label} / {job.column or job.train.task} lr {job.train.lr:g} seed {job.seed}"

    def validation(self, job, step: int, info: dict) -> None:
        loss = "" if info["train_loss"] is None else f"loss {info['train_loss']:.3f}  "  # None: step 0
        text = f"{self.name(job)}: step {step}/{job.train.steps}  {loss}val acc {100 * info['val_accuracy']:.1f}%"
        if self.bar is not None:
            self.bar.update(self.task, info=text)
        else:
            self.log(f"{self.title}: {text}  elapsed {duration(time.monotonic() - self.t0)}")

    def waiting(self, waits: list[dict]) -> None:
        """A sweep with nothing of its own to run says which runs of other sweeps it waits for."""
        self.log(f"{self.title}: {describe_waits(waits)}")

    def done(self, job, res) -> None:
        self.finished += 1
        longest = (res.summary or {}).get("longest_90")
        what = ("reused" if res.reused else res.status) + (f", longest >=90% {longest}" if longest else "")
        if self.bar is not None:
            self.bar.update(self.task, advance=1, info=f"done {self.name(job)} ({what})")
        else:
            self.log(
                f"{self.title}: run {self.finished}/{self.runs} done: {self.name(job)} ({what})  "
                f"{self.times(self.finished, self.runs)}"
            )
