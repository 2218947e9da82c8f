"""Paths as the operating system sees them, whatever form the caller gives.

A path may be str (a name that is not UTF-8 arrives as os.fsdecode makes it,
with surrogate escapes), bytes, or os.PathLike. The C++ module and LMDB get
its bytes; messages and `.path` attributes get its str. A NUL byte cannot be
in a file name: C would cut the name there and open another file, so it is
refused. A leading "~" is the user's home, as the shell and pandas take
it ("~/data/fashion.db"; Python's open() would look for a folder named "~").
"""
import os

try:
    from .errors import InvalidArgumentError
except ImportError:  # reader.py run as a script
    from errors import InvalidArgumentError


def os_bytes(path, what="db"):
    """`path` as the bytes the OS sees (os.fsencode, "~" expanded); InvalidArgumentError for a NUL byte."""
    raw = os.path.expanduser(os.fsencode(path))
    if b"\0" in raw:
        raise InvalidArgumentError(f"{what} {os.fsdecode(raw)!r}: a path cannot contain a NUL byte")
    return raw


def os_str(path, what="db"):
    """`path` as str (os.fsdecode of os_bytes), for messages and os.path."""
    return os.fsdecode(os_bytes(path, what))
