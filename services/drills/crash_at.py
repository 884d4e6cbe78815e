"""Run a `memrig` command that kills itself with SIGKILL in the middle of writing a run file, for the rig-faults drill.

    python -m services.drills.crash_at WHAT -- bench --suite ... --out DIR

WHAT is where the process dies, leaving what a crash at that instant leaves on disk:
- `run.json:N`: the N-th write of run.json (services/coordinator/results.py `RunDir.write_run`) has written half of
  its temporary file, not yet renamed over run.json;
- `samples:N`: the N-th sample appended to samples.jsonl (`RunDir.append_sample`) has written the first half of its
  line, with no newline;
- `file:NAME`: the first whole-file write of NAME (metrics.json, report.md, ...: `RunDir.write_text`) has written
  half of its temporary file.

A SIGKILL from outside cannot be aimed at a write that takes microseconds; this puts it exactly there. Nothing runs
after it: no cleanup, no flush, as with `kill -9`.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from services.coordinator import results


def die() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def install(what: str) -> None:
    kind, _, arg = what.partition(":")
    counts = {"n": 0}

    if kind == "run.json":
        real_run = results.RunDir.write_run
        nth = int(arg or 1)

        def write_run(self, run):
            counts["n"] += 1
            if counts["n"] < nth:
                return real_run(self, run)
            text = json.dumps(run, indent=2, sort_keys=False, default=str)
            with open(self.run_json.with_suffix(".tmp"), "w") as f:
                f.write(text[: len(text) // 2])
            die()

        results.RunDir.write_run = write_run
    elif kind == "samples":
        real_append = results.RunDir.append_sample
        nth = int(arg or 1)

        def append_sample(self, sample):
            counts["n"] += 1
            if counts["n"] < nth:
                return real_append(self, sample)
            line = json.dumps(sample, default=str)
            with open(self.samples_path, "ab") as f:
                f.write(line[: len(line) // 2].encode())
            die()

        results.RunDir.append_sample = append_sample
    elif kind == "file":
        real_text = results.RunDir.write_text

        def write_text(self, name, text):
            if name != arg:
                return real_text(self, name, text)
            with open(self.path / f".{name}.{os.getpid()}.tmp", "w") as f:
                f.write(text[: len(text) // 2])
            die()

        results.RunDir.write_text = write_text
    else:
        raise SystemExit(f"crash_at: WHAT must be run.json:N, samples:N or file:NAME, not {what!r}")


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[1] != "--":
        raise SystemExit("usage: python -m services.drills.crash_at WHAT -- MEMRIG-ARGS...")
    install(argv[0])
    from services.cli import main as memrig

    memrig(argv[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
