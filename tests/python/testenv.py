"""What the Python tests of the build share: where the checkout and the build
are (GRANARY_BUILD, else build/), the build's granary package on sys.path,
its programs, and a run of one that must succeed."""
import os
import subprocess
import sys

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
