#!/usr/bin/python3
"""How scripts as people write them end under `launch` (build/trainer/launch),
named in its one line: a SyntaxError by what it is, not by the file line its
traceback begins with; a rank that ends with status 0 while its peers train
(a stopping rule only one rank reached) named beside the failure it causes
in the others, where the line named only a peer's `Connection closed by
peer`; a script written for GPUs (PyTorch's DDP tutorial for torchrun) named
with every line that puts work on a GPU, where each failed in a run of its
own.

    GRANARY_BUILD=build /usr/bin/python3 tests/python/launch_endings_test.py
"""
import os
import subprocess
import tempfile
import textwrap
import unittest

from testenv import BUILD

LAUNCH = os.path.join(BUILD, "trainer/launch")
PYTHON = "/usr/bin/python3"

# Rank 1 stops at step 5 by a rule of its own, with status 0; rank 0 trains on into its next all-reduce.
EARLY = """
import sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(200):
    if rank == 1 and step == 5:
        sys.exit(0)
    model(torch.randn(8, 4)).sum().backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
    opt.step()
    opt.zero_grad()
"""

# The shape of PyTorch's DDP tutorial for torchrun (examples' distributed/ddp-tutorial-series/multigpu_torchrun.py).
FOR_GPUS = """
import os, torch, torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed import init_process_group

def ddp_setup():
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    init_process_group(backend="nccl")

ddp_setup()
gpu_id = int(os.environ["LOCAL_RANK"])
device = "cuda" if torch.cuda.is_available() else "cpu"  # chooses: not a GPU line
model = DDP(torch.nn.Linear(20, 1).to(gpu_id), device_ids=[gpu_id])
# model.cuda()  (a comment: not a line that runs)
source = torch.randn(8, 20).to(gpu_id)
"""


class LaunchEndingsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="granary-launch-endings-")

    def tearDown(self):
        self.tmp.cleanup()

    def launch(self, script, *args):
        path = os.path.join(self.tmp.name, "script.py")
        with open(path, "w") as f:
            f.write(textwrap.dedent(script))
        done = subprocess.run([LAUNCH, "--ranks", "2", *args, "--", PYTHON, path], capture_output=True, text=True,
                              timeout=120)
        lines = [line for line in done.stderr.splitlines() if line.startswith("launch: rank")]
        return done.returncode, lines[-1] if lines else ""

    def test_a_syntax_error_is_named_by_what_it_is(self):
        code, line = self.launch("import torch\nprint('x'\n")
        self.assertEqual(code, 1)
        self.assertRegex(line, r"launch: rank [01] exited with status 1 \(SyntaxError: '\(' was never closed "
                               r"\(script.py, line 2\)\); stopping the other ranks")

    def test_a_script_written_for_gpus_is_named_with_each_of_its_gpu_lines(self):
        code, line = self.launch(FOR_GPUS)
        self.assertEqual(code, 1)
        self.assertRegex(line, r"launch: rank [01] exited with status 1 \(AttributeError: module 'torch._C' has no "
                               r"attribute '_cuda_setDevice'\): the script calls torch.cuda \(set_device\(LOCAL_RANK\) "
                               r"picks a rank's GPU\), and this torch runs on CPUs: leave the call out, ")
        self.assertIn("; its lines written for GPUs, each of which fails here in turn: "
                      f"{self.tmp.name}/script.py:7 torch.cuda.set_device(int(os.environ[\"LOCAL_RANK\"])), "
                      ":8 init_process_group(backend=\"nccl\"), :13 model = DDP(torch.nn.Linear(20, 1).to(gpu_id), "
                      "device_ids=[gpu_id]), :15 source = torch.randn(8, 20).to(gpu_id); stopping the other ranks",
                      line)

    def test_a_rank_that_ends_before_its_peers_is_named_beside_their_failure(self):
        code, line = self.launch(EARLY, "--timeout", "20")
        self.assertNotEqual(code, 0)
        self.assertRegex(line, r"launch: rank 0 (exited with status 1 \(RuntimeError: .*\)|made no progress .*), "
                               r"[0-9.]+ s after rank 1 ended with status 0 at step 5 \(a rank that ends before its "
                               r"peers leaves their collectives without it\); stopping the ")
        # Ranks that end together with status 0 are a job that ended: nothing is said.
        code, line = self.launch("import torch\n")
        self.assertEqual((code, line), (0, ""))


if __name__ == "__main__":
    unittest.main()
