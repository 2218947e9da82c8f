"""granary's exceptions. Every failure granary reports from Python is a
granary.Error whose message is the one line granary's C++ tools print for it
(naming the file, shard, key or option)."""


class Error(Exception):
    """Any granary failure."""


class InvalidArgumentError(Error, ValueError):
    """An option or argument is out of bounds or does not fit the db."""


class NotFoundError(Error, LookupError):
    """No such db, split or field."""


class CorruptionError(Error):
    """Bytes on disk fail a check: a checksum, a record header, the manifest."""


class FormatError(Error):
    """The db was written in a newer format version than this granary reads."""


class ReadError(Error, OSError):
    """The operating system refused a read; the message names path and errno."""


class WriteError(Error, OSError):
    """The operating system refused what granary.write or a Writer asked of it
    (a folder it may not create files in, a full disk); the message names
    path and errno."""


class FailedPreconditionError(Error, RuntimeError):
    """What was asked needs a state that no longer holds: the db was replaced
    since it was opened, a newer iterator took over a Loader's stream, or a
    resumed write differs from the one it continues."""


class WorkerError(Error, RuntimeError):
    """A worker process of granary.write ended abruptly (killed by a signal:
    a crash in the dataset's own code, or the out-of-memory killer)."""
