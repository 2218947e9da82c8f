#!/usr/bin/python3
"""`launch` (build/trainer/launch) against unmodified torchrun-style scripts:
the same parameters as under torchrun's environment set by hand, the
environment every runtime sees inside the ranks, failures named (a rank that
exits 3, killed, stopped, hung), restarts, signals forwarded, --tune on a
script without granary.Loader, the user's own mpirun, two nodes through
tools/netsim, and bad flags refused before anything starts.

    GRANARY_BUILD=build /usr/bin/python3 tests/python/launch_test.py
"""
import json
import os
import signal
import socket
import subprocess
import tempfile
import textwrap
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("GRANARY_BUILD", os.path.join(ROOT, "build")))
LAUNCH = os.path.join(BUILD, "trainer/launch")
PYTHON = "/usr/bin/python3"

# A torchrun-style DDP script (env:// rendezvous), unchanged by granary: prints
# one JSON line per rank with what it saw and its parameters' checksum.
DDP = """
import json, os, sys, torch, torch.distributed as dist, torch.nn as nn
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(100 + rank)
for i in range(int(os.environ.get("STEPS", "30"))):
    x, y = torch.randn(16, 32, generator=g), torch.randint(0, 4, (16,), generator=g)
    opt.zero_grad(); nn.functional.cross_entropy(model(x), y).backward(); opt.step()
names = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
         "TORCHELASTIC_RESTART_COUNT", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
         "GRANARY_LOADER_THREADS", "LD_PRELOAD", "GLOO_SOCKET_IFNAME"]
checksum = sum(p.detach().double().sum().item() for p in model.parameters())
print(json.dumps({"rank": rank, "world": world, "threads": torch.get_num_threads(),
                  "cpus": sorted(os.sched_getaffinity(0)), "checksum": f"{checksum:.12e}",
                  "env": {n: os.environ.get(n) for n in names}}), flush=True)
del model
dist.destroy_process_group()
"""

# Fails as argv[1] says on rank 1 at step 10; "once": only before a restart.
FAIL = """
import os, sys, time, torch, torch.distributed as dist, torch.nn as nn
from torch.distributed.elastic.multiprocessing.errors import record
@record  # writes the exception to TORCHELASTIC_ERROR_FILE, as torchrun's docs advise
def bad_batch(): raise ValueError("a bad batch at step 10")
mode = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()
model = nn.parallel.DistributedDataParallel(nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
restart = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
for i in range(40):
    if i == 10 and rank == 1:
        if mode == "exit3": sys.exit(3)
        if mode == "raise": bad_batch()
        if mode == "kill":
            open(sys.argv[2], "w").write(str(time.time()))
            os.kill(os.getpid(), 9)
        if mode == "stop": os.kill(os.getpid(), 19)  # SIGSTOP
        if mode == "sleep": time.sleep(1000)
        if mode == "once" and restart == 0: sys.exit(5)
        if mode == "always": sys.exit(4)
    opt.zero_grad(); model(torch.randn(4, 8)).sum().backward(); opt.step()
    time.sleep(0.02)
sys.stdout.write(f"done {rank} restart {restart}\\n")  # one write: the ranks share the launcher's stdout
del model
dist.destroy_process_group()
"""

# Trains until stopped: a convnet on random data, no granary.Loader.
CONV = """
import torch, torch.distributed as dist, torch.nn as nn
dist.init_process_group("gloo")
model = nn.parallel.DistributedDataParallel(nn.Sequential(
    nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,))
while True:
    opt.zero_grad(); nn.functional.cross_entropy(model(x), y).backward(); opt.step()
"""

# Runs until stopped and never steps an optimizer.
IDLE = "import time\nwhile True: time.sleep(0.1)\n"
# Says how it was started: its rank, world, arguments and interpreter's.
WHO = """
import json, os, sys
print(json.dumps({"rank": int(os.environ["RANK"]), "world": int(os.environ["WORLD_SIZE"]), "args": sys.argv[1:],
                  "interpreter": sys.orig_argv[:2], "name": __name__}))
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def leftovers(marker):
    """Processes whose command line holds `marker` (a test's own folder)."""
    out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    return [p for p in out if int(p) != os.getpid()]


class LaunchTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="granary-launch-")
        for name, text in (("ddp.py", DDP), ("fail.py", FAIL), ("conv.py", CONV), ("idle.py", IDLE),
                           ("who.py", WHO)):
            with open(os.path.join(self.dir, name), "w") as f:
                f.write(textwrap.dedent(text))

    def tearDown(self):
        left = leftovers(self.dir)
        subprocess.run(["pkill", "-9", "-f", self.dir])
        subprocess.run(["rm", "-rf", self.dir])
        self.assertEqual(left, [], "processes outlived their launcher")

    def script(self, name):
        return os.path.join(self.dir, name)

    def launch(self, *args, timeout=240, env=None):
        return subprocess.run([LAUNCH, *args], capture_output=True, text=True, timeout=timeout, cwd=self.dir,
                              env=env)

    def ranks_of(self, out):
        lines = [line.split("] ", 1)[-1] for line in out.splitlines() if "{" in line]
        return {r["rank"]: r for r in map(json.loads, lines)}

    def test_same_parameters_as_torchrun_environment_by_hand(self):
        r = self.launch("--ranks", "2", PYTHON, self.script("ddp.py"))
        self.assertEqual(r.returncode, 0, r.stderr)
        under_launch = self.ranks_of(r.stdout)
        self.assertEqual(sorted(under_launch), [0, 1])
        self.assertIn("[rank 1] {", r.stdout)  # rank 0 plain, the others prefixed
        self.assertNotIn("without joining", r.stderr)  # a DDP script joined its peers
        # torchrun's environment for 2 processes, set by hand.
        port = free_port()
        procs = []
        for rank in range(2):
            env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
            procs.append(subprocess.Popen([PYTHON, self.script("ddp.py")], env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        by_hand = {}
        for p in procs:
            out, err = p.communicate(timeout=120)
            self.assertEqual(p.returncode, 0, err)
            by_hand.update(self.ranks_of(out))
        for rank in (0, 1):
            self.assertEqual(under_launch[rank]["checksum"], by_hand[rank]["checksum"])
        self.assertEqual(under_launch[0]["checksum"], under_launch[1]["checksum"])  # DDP kept them equal

    def test_ranks_that_train_apart_or_spawn_their_own_processes_are_told_so(self):
        alone = os.path.join(self.dir, "alone.py")
        with open(alone, "w") as f:  # written for torch.distributed.launch, which passed --local_rank
            f.write(textwrap.dedent("""
                import argparse, torch, torch.nn as nn
                parser = argparse.ArgumentParser()
                parser.add_argument("--local_rank", type=int, default=-1)
                if parser.parse_args().local_rank != -1:
                    torch.distributed.init_process_group("gloo")
                model = nn.Linear(8, 2)
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                for _ in range(25):
                    opt.zero_grad(); model(torch.randn(4, 8)).sum().backward(); opt.step()
            """))
        r = self.launch("--ranks", "2", PYTHON, alone)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.count("without joining"), 1, r.stderr)  # rank 0's line, once
        self.assertIn("launch: rank 0 took 20 optimizer steps without joining its 1 peer(s) (torch.distributed."
                      "init_process_group was not called): the 2 ranks each train a model of their own", r.stderr)
        self.assertIn("The script reads --local_rank, which torch.distributed.launch passed", r.stderr)
        self.assertNotIn("without joining", self.launch("--ranks", "1", PYTHON, alone).stderr)  # one rank: alone
        # The PyTorch DDP tutorial's way: the script spawns its own processes, in each of launch's ranks.
        spawner = os.path.join(self.dir, "spawner.py")
        with open(spawner, "w") as f:
            f.write(textwrap.dedent("""
                import torch.multiprocessing as mp
                def main(rank, world):
                    pass
                if __name__ == "__main__":
                    mp.spawn(main, args=(2,), nprocs=2, join=True)
            """))
        r = self.launch("--ranks", "2", PYTHON, spawner)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.count("processes of its own"), 1, r.stderr)
        self.assertIn("launch: the script starts 2 processes of its own (torch.multiprocessing.spawn) in each of "
                      "launch's 2 ranks: 4 processes where one job was meant", r.stderr)
        self.assertNotIn("processes of its own", self.launch("--ranks", "1", PYTHON, spawner).stderr)

    def test_every_runtime_sees_its_share_inside_the_ranks(self):
        cpus = len(os.sched_getaffinity(0))
        args = ["--ranks", "2", "--threads", "1", "--loader-threads", "1", "--iface", "lo"]
        if os.path.exists("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"):
            args += ["--allocator", "jemalloc"]
        r = self.launch(*args, "--", PYTHON, self.script("ddp.py"))
        self.assertEqual(r.returncode, 0, r.stderr)
        ranks = self.ranks_of(r.stdout)
        for rank, seen in ranks.items():
            env = seen["env"]
            self.assertEqual(seen["world"], 2)
            self.assertEqual(seen["threads"], 1)  # torch read OMP_NUM_THREADS
            for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GRANARY_LOADER_THREADS"):
                self.assertEqual(env[name], "1", name)
            self.assertEqual((env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"]),
                             (str(rank), str(rank), "2", "2"))
            self.assertEqual(env["GROUP_RANK"], "0")
            self.assertEqual(env["TORCHELASTIC_RESTART_COUNT"], "0")
            self.assertEqual(env["GLOO_SOCKET_IFNAME"], "lo")
            if "--allocator" in args:
                self.assertIn("libjemalloc.so.2", env["LD_PRELOAD"])
            if cpus >= 2:
                self.assertEqual(len(seen["cpus"]), 1, "each rank pinned to its own CPU")
        if cpus >= 2:
            self.assertNotEqual(ranks[0]["cpus"], ranks[1]["cpus"])
        self.assertIn("pinned: rank 0 CPU", r.stderr)

    def test_a_script_that_sets_more_threads_than_its_cpus_is_told_so(self):
        # A script written for a workstation sets its own threads; under launch's pinning they share one CPU.
        greedy = os.path.join(self.dir, "greedy.py")
        with open(greedy, "w") as f:
            f.write(textwrap.dedent("""
                import sys, torch
                torch.set_num_threads(int(sys.argv[1]))
                model = torch.nn.Linear(8, 1)
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                for _ in range(3):
                    opt.zero_grad(); model(torch.randn(4, 8)).sum().backward(); opt.step()
            """))
        cpus = len(os.sched_getaffinity(0))
        r = self.launch("--ranks", "2", "--threads", "1", PYTHON, greedy, str(2 * cpus))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.count("take turns"), 1, r.stderr)  # rank 0's line, once
        self.assertIn(f"launch: rank 0 runs torch on {2 * cpus} threads, set by the script (torch.set_num_threads, "
                      f"or its own OMP_NUM_THREADS), over the 1 CPU(s) the rank has", r.stderr)
        self.assertIn("launch gave each rank 1; leave the threads to it", r.stderr)
        # As many threads as its CPUs: nothing to say; nor where launch itself gave them.
        self.assertNotIn("take turns", self.launch("--ranks", "1", PYTHON, greedy, str(cpus)).stderr)
        self.assertNotIn("take turns", self.launch("--ranks", "2", "--threads", "1", PYTHON, greedy, "1").stderr)

    def test_a_script_that_passes_its_own_rank_and_world_size_is_told_so(self):
        # Written for `python3 train.py --rank R --world-size N` by hand: argparse's defaults under launch.
        own = os.path.join(self.dir, "own.py")
        with open(own, "w") as f:
            f.write(textwrap.dedent("""
                import argparse, torch, torch.distributed as dist
                parser = argparse.ArgumentParser()
                parser.add_argument("--rank", type=int, default=0)
                parser.add_argument("--world-size", type=int, default=1)
                args = parser.parse_args()
                dist.init_process_group("gloo", rank=args.rank, world_size=args.world_size)
                model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                for _ in range(25):
                    opt.zero_grad(); model(torch.randn(4, 8)).sum().backward(); opt.step()
            """))
        took_rank_0 = "two ranks took rank 0: the script passes rank= of its own to init_process_group"
        rank_0_lost = "or by another program (--master-port to choose another port)"
        # Both ranks serve a store on MASTER_PORT: the one that binds second fails, unless the first has ended by
        # then, and then each trains alone in a group of one: either is said.
        r = self.launch("--ranks", "2", PYTHON, own)
        if r.returncode == 0:
            self.assertIn("launch: rank 0 took 20 optimizer steps in a process group of 1 rank(s) (as rank 0), where "
                          "launch started 2: the script passed world_size= (and rank=) of its own", r.stderr)
        else:
            self.assertTrue(took_rank_0 in r.stderr or rank_0_lost in r.stderr, r.stderr)
        r = self.launch("--ranks", "2", PYTHON, own, "--world-size", "2")
        self.assertNotEqual(r.returncode, 0)
        self.assertTrue(took_rank_0 in r.stderr or rank_0_lost in r.stderr, r.stderr)
        self.assertNotIn("process group of", self.launch("--ranks", "1", PYTHON, own).stderr)  # one rank: its world

    def test_a_rank_that_exits_3_is_named_and_its_status_kept(self):
        r = self.launch("--ranks", "2", PYTHON, self.script("fail.py"), "exit3")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("launch: rank 1 exited with status 3; stopping the other ranks", r.stderr)

    def test_a_rank_that_raises_is_named_with_the_exception_it_recorded(self):
        r = self.launch("--ranks", "2", PYTHON, self.script("fail.py"), "raise")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("launch: rank 1 exited with status 1 (ValueError: a bad batch at step 10); stopping the other "
                      "ranks", r.stderr)

    def test_a_script_written_for_gpus_is_named_with_what_to_change(self):
        gpu = os.path.join(self.dir, "gpu.py")
        with open(gpu, "w") as f:  # no @record: launch's startup module records what ended the rank
            f.write(textwrap.dedent("""
                import sys, torch, torch.distributed as dist
                if sys.argv[1] == "nccl":
                    dist.init_process_group("nccl")
                model = torch.nn.Linear(4, 2).cuda()
            """))
        r = self.launch("--ranks", "2", PYTHON, gpu, "cuda")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertRegex(r.stderr, r"launch: rank [01] exited with status 1 \(AssertionError: Torch not compiled with "
                                   r"CUDA enabled\): the script puts its model or tensors on CUDA, and this torch runs "
                                   r"on CPUs: use torch.device\(\"cpu\"\)")
        r = self.launch("--ranks", "2", PYTHON, gpu, "nccl")
        self.assertRegex(r.stderr, r"\(RuntimeError: Distributed package doesn't have NCCL built in\): NCCL needs GPUs: "
                                   r"dist.init_process_group\(\"gloo\"\) runs on CPUs")
        self.assertIn("Traceback", r.stderr)  # the script's own traceback still shows

    def test_a_killed_rank_is_named_within_2_s(self):
        killed_at = os.path.join(self.dir, "killed_at")
        start = time.time()
        p = subprocess.Popen([LAUNCH, "--ranks", "2", PYTHON, self.script("fail.py"), "kill", killed_at],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = p.communicate(timeout=120)
        ended = time.time()
        self.assertEqual(p.returncode, 128 + 9, err)
        self.assertIn("launch: rank 1 was killed by signal 9 (Killed)", err)
        with open(killed_at) as f:
            self.assertLess(ended - float(f.read()), 2.0 + 0.5, f"started {start}")

    def test_a_stopped_rank_is_named_within_timeout_and_5_s(self):
        # --timeout 8, not 4: on a loaded machine (the suite at -j2) loading torch's libraries, one call in
        # which a rank shows no sign of life, once took over 4 s, and the rank was named before it stopped.
        start = time.time()
        r = self.launch("--ranks", "2", "--timeout", "8", "--grace", "2", PYTHON, self.script("fail.py"), "stop")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("launch: rank 1 made no progress for", r.stderr)
        self.assertIn("its process is stopped", r.stderr)
        self.assertLess(time.time() - start, 8 + 5 + 15)  # + start-up and the grace on a loaded machine

    def test_the_rank_that_hangs_in_its_own_code_is_named(self):
        r = self.launch("--ranks", "2", "--timeout", "4", "--grace", "2", PYTHON, self.script("fail.py"), "sleep")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("launch: rank 1 made no progress for", r.stderr)
        self.assertIn("not inside torch", r.stderr)

    def test_a_rank_whose_peer_never_comes_to_the_rendezvous_is_stopped(self):
        # One task of the user's srun (no PMI) whose peer failed before it started: srun leaves this one
        # waiting in init_process_group (holding the GIL), which launch ends at --timeout.
        env = dict(os.environ, SLURM_JOB_ID="4711", SLURM_STEP_ID="0", SLURM_PROCID="1", SLURM_LOCALID="1",
                   SLURM_NTASKS="2", SLURM_STEP_NUM_TASKS="2", SLURM_NNODES="1")
        start = time.time()
        r = self.launch("--timeout", "4", "--grace", "2", PYTHON, self.script("ddp.py"), env=env)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("rank 1 of srun's job", r.stderr)
        self.assertIn("launch: rank 1 made no progress for", r.stderr)
        self.assertIn("before its first step: the rendezvous may wait for a peer that is gone", r.stderr)
        self.assertLess(time.time() - start, 4 + 5 + 15)

    def test_max_restarts_starts_the_job_again(self):
        r = self.launch("--ranks", "2", "--max-restarts", "2", PYTHON, self.script("fail.py"), "once")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("launch: rank 1 exited with status 5; stopping the other ranks; restarting the job "
                      "(restart 1 of 2)", r.stderr)
        self.assertIn("done 0 restart 1", r.stdout)
        self.assertIn("done 1 restart 1", r.stdout)
        r = self.launch("--ranks", "2", "--max-restarts", "1", "--json", PYTHON, self.script("fail.py"), "always")
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn("rank 1 exited with status 4; stopping the other ranks (after 1 restart)", r.stderr)
        report = json.loads(r.stdout.splitlines()[-1])
        self.assertEqual([a["exit_code"] for a in report["attempts"]], [4, 4])

    def test_sigterm_to_the_launcher_stops_every_rank(self):
        p = subprocess.Popen([LAUNCH, "--ranks", "2", PYTHON, self.script("conv.py")], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while len(leftovers(self.script("conv.py"))) < 2 and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(2)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
        self.assertIn("launch: stopped by signal 15", err)

    def test_tune_measures_a_script_without_granary_loader(self):
        r = self.launch("--tune-only", "--tune-seconds", "1", "--json", PYTHON, self.script("conv.py"), timeout=400)
        self.assertEqual(r.returncode, 0, r.stderr)
        table = json.loads(r.stdout.splitlines()[-1])["tune"]
        rows = table["rows"]
        self.assertEqual(sum(row["chosen"] for row in rows), 1)
        chosen = next(row for row in rows if row["chosen"])
        self.assertEqual(chosen["steps_per_s"], max(row["steps_per_s"] for row in rows))
        self.assertTrue(all(row["steps_per_s"] > 0 for row in rows), rows)
        cores = len(os.sched_getaffinity(0))
        layouts = {(row["ranks"], row["threads"]) for row in rows}
        self.assertEqual({(r, cores // r) for r in range(1, cores + 1) if cores % r == 0} - layouts, set())
        # --ranks given: the world stays.
        r = self.launch("--ranks", "1", "--tune-only", "--tune-seconds", "1", "--allocator", "glibc", "--json",
                        PYTHON, self.script("conv.py"), timeout=400)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = json.loads(r.stdout.splitlines()[-1])["tune"]["rows"]
        self.assertEqual({row["ranks"] for row in rows}, {1})
        self.assertEqual({row["allocator"] for row in rows}, {"glibc"})

    def test_tune_refuses_a_command_without_steps(self):
        r = self.launch("--tune-only", "--tune-seconds", "1", PYTHON, "-c", "print('hello')")
        self.assertEqual(r.returncode, 1)
        self.assertIn("launch: --tune: the command ended without a training step", r.stderr)
        self.assertIn("torch.optim", r.stderr)
        # A command that fails is named with its own last word.
        r = self.launch("--tune-only", "--tune-seconds", "1", PYTHON, "-c", "raise SystemExit('no data here')")
        self.assertEqual(r.returncode, 1)
        self.assertIn("the command failed before its first step (exit status 1)", r.stderr)
        self.assertIn("its stderr's last line: no data here", r.stderr)

    def test_under_the_users_mpirun(self):
        mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
        env = dict(os.environ, OMPI_MCA_plm_rsh_agent="false")
        r = subprocess.run([*mpirun, LAUNCH, "--", PYTHON, self.script("ddp.py")], capture_output=True, text=True,
                           timeout=240, env=env, cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        ranks = self.ranks_of(r.stdout)
        self.assertEqual(sorted(ranks), [0, 1])
        self.assertEqual(ranks[0]["checksum"], ranks[1]["checksum"])
        self.assertEqual(ranks[1]["env"]["LOCAL_RANK"], "1")
        self.assertIn("of mpirun's job", r.stderr)
        r = subprocess.run([*mpirun, LAUNCH, "--ranks", "2", "--", PYTHON, self.script("ddp.py")],
                           capture_output=True, text=True, timeout=120, env=env, cwd=self.dir)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("launch: --ranks 2 under mpirun (a job of 2 processes): each process is one rank", r.stderr)

    def test_two_nodes_through_netsim(self):
        netsim = os.path.join(ROOT, "tools/netsim")
        probe = subprocess.run([netsim, "--nodes", "1", "--rate", "1gbit", "--", "true"], capture_output=True,
                               text=True, timeout=60)
        if probe.returncode != 0:
            self.skipTest("tools/netsim cannot run here: " + probe.stderr.strip())
        command = (f"{LAUNCH} --nnodes 2 --node-rank $NODE_RANK --master-addr $MASTER_ADDR "
                   f"--master-port $MASTER_PORT --iface eth0 --ranks 1 -- {PYTHON} {self.script('ddp.py')}")
        r = subprocess.run([netsim, "--nodes", "2", "--rate", "1gbit", "--", command], capture_output=True,
                           text=True, timeout=240, cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        ranks = self.ranks_of(r.stdout)
        self.assertEqual(sorted(ranks), [0, 1])
        self.assertEqual(ranks[0]["checksum"], ranks[1]["checksum"])
        self.assertEqual(ranks[1]["env"]["GROUP_RANK"], "1")
        self.assertEqual(ranks[1]["env"]["WORLD_SIZE"], "2")

    def test_a_script_is_started_as_torchrun_starts_it(self):
        # What a torchrun user types: torchrun's flag spellings, a .py with no interpreter, -m MODULE.
        path = dict(os.environ, PATH="/usr/bin:" + os.environ.get("PATH", ""))  # Debian's python3, torch's
        for args in (["--nproc-per-node", "2", "--standalone", "who.py", "--lr", "0.1"],
                     ["--nproc_per_node=2", "--max_restarts=0", "-m", "who", "--lr", "0.1"]):
            r = self.launch(*args, env=path)
            self.assertEqual(r.returncode, 0, (args, r.stderr))
            ranks = self.ranks_of(r.stdout)
            self.assertEqual(sorted(ranks), [0, 1], args)
            for rank in ranks.values():
                self.assertEqual(rank["world"], 2)
                self.assertEqual(rank["args"], ["--lr", "0.1"])
                self.assertEqual(rank["interpreter"], ["python3", "-u"])  # torchrun's sys.executable -u
                self.assertEqual(rank["name"], "__main__")
            self.assertIn(f"launch: {'-m who' if '-m' in args else 'who.py'} is run by /usr/bin/python3 -u (the "
                          f"python3 on PATH), as torchrun runs a script", r.stderr)

    def test_bad_flags_are_refused_before_anything_starts(self):
        cases = [
            (["--ranks", "0", PYTHON, "x.py"], "launch: --ranks 0: must be in 1..1024"),
            (["--allocator", "mimalloc", PYTHON, "x.py"], "launch: --allocator mimalloc: expected auto, glibc, jemalloc or tcmalloc"),
            (["--nnodes", "2", PYTHON, "x.py"], "launch: --nnodes 2 needs --master-addr and --master-port"),
            (["--prefix", "some", PYTHON, "x.py"], "launch: --prefix some: expected auto, all or none"),
            (["--ranks", "2"], "launch: no COMMAND"),
            (["--tune-seconds", "0", PYTHON, "x.py"], "launch: --tune-seconds 0"),
            (["--rdzv-endpoint=10.0.0.1:29400", "x.py"], "launch: --rdzv-endpoint=10.0.0.1:29400: torchrun's "
             "--rdzv-endpoint is not launch's: launch's rendezvous is torch's TCPStore served by rank 0: give "
             "--master-addr and --master-port"),
            (["--tee", "3", "x.py"], "torchrun's --tee is not launch's: launch relays every rank's output"),
            (["--bogus", "x.py"], "launch: --bogus: no such flag (see launch --help"),
            (["-m", "who", "--no-python"], "launch: -m MODULE with --no-python: give one"),
            (["--nnodes", "2", "--standalone", "--master-addr", "a", "--master-port", "5", "x.py"],
             "launch: --standalone is one node"),
        ]
        for args, line in cases:
            r = self.launch(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertEqual(r.stderr.strip().splitlines(), [r.stderr.strip()], args)  # one line
            self.assertIn(line, r.stderr, args)
        r = self.launch("no-such-program-here")
        self.assertEqual(r.returncode, 1)
        self.assertIn("launch: COMMAND no-such-program-here: no such program on PATH", r.stderr)
        r = self.launch("no-such-script.py")
        self.assertEqual(r.returncode, 1)
        self.assertIn("launch: COMMAND no-such-script.py: no such file", r.stderr)
        # The same through the interpreter named (the README's `python3 train.py` habit): said once, before any rank.
        r = self.launch("--", "python3", "-u", "-W", "ignore", "no-such-script.py", "--epochs", "3")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, "launch: COMMAND python3 no-such-script.py: no such file\n")
        r = self.launch("--no-python", "who.py")  # as it is: not a program (no path, not on PATH)
        self.assertEqual(r.returncode, 1)
        self.assertIn("launch: COMMAND who.py: no such program on PATH", r.stderr)
        # Debian 12 has python3 and no python (unless python-is-python3): the README's habit, named.
        bin_dir = os.path.join(self.dir, "bin")
        os.makedirs(bin_dir, exist_ok=True)
        if not os.path.exists(os.path.join(bin_dir, "python3")):
            os.symlink("/usr/bin/python3", os.path.join(bin_dir, "python3"))
        r = self.launch("--", "python", "x.py", env=dict(os.environ, PATH=bin_dir))
        self.assertEqual(r.returncode, 1)
        self.assertIn("launch: COMMAND python: no such program on PATH (Debian names it python3: launch SCRIPT.py "
                      "runs a script with it)", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
