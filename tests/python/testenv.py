"""What the Python tests of the build share: where the checkout and the build
are (GRANARY_BUILD, else build/), the build's granary package on sys.path,
its programs, a run of one that must succeed, and a test case with a folder
of its own."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("GRANARY_BUILD", os.path.join(ROOT, "build")))
sys.path.insert(0, os.path.join(BUILD, "python"))

PREP = os.path.join(BUILD, "preprocess/prep")
TRAIN = os.path.join(BUILD, "trainer/train")


def run(*args):
    """The program and arguments run to the end; AssertionError with its stderr's tail unless it exits 0."""
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, args))} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done


class FolderTest(unittest.TestCase):
    """A test with a folder of its own (self.tmp), removed after it; self.path(name) is a path in it."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix=f"granary-{type(self).__name__}-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.tmp, name)
