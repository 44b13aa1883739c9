"""Progress display for long optimisations (korch.compile, korch.InferenceSession).

make_progress(progress) turns the user's ``progress=`` argument into a callable taking one status
line at a time: None shows a rewritten line on stderr when stderr is a terminal (nothing
otherwise), True shows it always (one line per update, at most one a second, when stderr is not a
terminal), False shows nothing, and a callable is called with every line. Displays are throttled
(a line may be skipped, never reordered); ``.done()`` clears the terminal line.
"""
import sys
import time


class _Line:
    def __init__(self, stream, tty):
        self._stream = stream
        self._tty = tty
        self._interval = 0.1 if tty else 1.0
        self._last = 0.0
        self._shown = False

    def __call__(self, line, force=False):
        now = time.monotonic()
        if not force and now - self._last < self._interval:
            return
        self._last = now
        if self._tty:
            self._stream.write("\r\033[K" + line)
        else:
            self._stream.write(line + "\n")
        self._stream.flush()
        self._shown = True

    def done(self):
        if self._tty and self._shown:
            self._stream.write("\r\033[K")
            self._stream.flush()
        self._shown = False


class _Callback:
    def __init__(self, fn):
        self._fn = fn

    def __call__(self, line, force=False):
        self._fn(line)

    def done(self):
        pass


def make_progress(progress):
    """The display for korch.compile's ``progress=`` argument (see the module docstring)."""
    if callable(progress) and not isinstance(progress, bool):
        return _Callback(progress)
    if progress is None or isinstance(progress, bool):
        stream = sys.stderr
        tty = bool(getattr(stream, "isatty", lambda: False)())
        if progress is False or (progress is None and not tty):
            return _Callback(lambda line: None)
        return _Line(stream, tty)
    raise TypeError(f"progress must be None, True, False or a callable taking one str, got {progress!r}")
