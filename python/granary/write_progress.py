"""What a write tells its user as it goes: the progress line on a terminal or
in a Jupyter notebook, the summary at its end, and where a warning points
(the user's own line, not granary's)."""
import os
import sys
import time


def _outside_granary():
    """warnings.warn's stacklevel, from its caller, of the first frame outside this package: the user's line."""
    frame, level = sys._getframe(1), 1
    here = os.path.dirname(os.path.abspath(__file__))
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == here:
        frame, level = frame.f_back, level + 1
    return level


def _user_line():
    """The file and line of the first frame outside this package: where the user called granary."""
    frame = sys._getframe(_outside_granary() - 1)  # a stacklevel counts the caller as 1
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


class _Progress:
    """A line on a terminal or in a Jupyter notebook (which redraws a line
    on "\\r" as a terminal does): samples written, rate, and the split's ETA
    where its length is known."""

    def __init__(self, show):
        self.show = (sys.stderr.isatty() or "ipykernel" in sys.modules) if show is None else show
        self.last = 0.0

    def update(self, split, done, total, start, final=False, first=0):
        """`first`: samples the split held before `start` (a resumed write)."""
        now = time.monotonic()
        if not self.show or (not final and now - self.last < 0.5):
            return
        self.last = now
        rate = (done - first) / max(now - start, 1e-9)
        eta = f", ETA {max(total - done, 0) / rate:.0f} s" if total and rate > 0 and not final else ""
        of = f"/{total}" if total else ""
        print(f"\rgranary.write: {split}: {done}{of} samples, {rate:,.0f}/s{eta}   ", end="\n" if final else "",
              file=sys.stderr, flush=True)

    def interrupt(self):
        """Ends the line being redrawn, so that a warning printed next stands on a line of its own."""
        if self.show and self.last:
            print(file=sys.stderr, flush=True)

    def summary(self, path, s):
        """The write's last line: what the db holds and where it came from."""
        if not self.show:
            return
        samples = sum(count for _, count in s["splits"])
        kept = f"; {s['resumed_samples']:,} kept from the interrupted write" if s["resumed_samples"] else ""
        splits = f"{len(s['splits'])} split" + ("s" if len(s["splits"]) != 1 else "")
        print(f"granary.write: wrote {path} in {s['seconds']:.1f} s: {splits}, {samples:,} "
              f"samples, {s['stored_bytes'] / 1e6:,.1f} MB ({s['stored_bytes'] / max(s['payload_bytes'], 1):.2f}x "
              f"of decoded), content hash {s['content_hash']}{kept}", file=sys.stderr, flush=True)
