#!/usr/bin/python3
"""The pure-Python granary db reader, python/granary/reader.py, from a checkout
without installing the package (it needs numpy, lmdb, zstandard, xxhash):

    import sys; sys.path.insert(0, "tools")
    import granary_db
    db = granary_db.Db("build/fashion-mnist.db")

    tools/granary_db.py DB [--verify] [--split S --index I]
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
from granary.reader import *  # noqa: E402,F401,F403
from granary.reader import CorruptionError, FormatError, NotFoundError, main  # noqa: E402,F401

if __name__ == "__main__":
    sys.exit(main())
