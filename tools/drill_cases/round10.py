"""Round 10 of the hostile drill (eighteenth session): jobs and data one
pace off the path."""
import random

from drill_cases.common import FASHION, PREP, TRAIN, run


def round10(d, w):
    """Round 10's cases, each group on its own scratch input."""
    node_started_alone(d, w)


def node_started_alone(d, w):
    """A two-node job whose other node never comes: the line says which side to start."""
    db = w("r10.db")
    run([PREP, "build", FASHION, db, "--limit", "256", "--no-progress"])
    port = str(random.randint(20000, 60000))
    node = [TRAIN, "--db", db, "--epochs", "1", "--threads", "1", "--pin", "off", "--nnodes", "2", "--timeout", "3",
            "--master-addr", "127.0.0.1", "--master-port", port]
    d.case("node 1 of 2 started alone: node 0 named, with what to check", node + ["--ranks", "1", "--node-rank", "1"],
           1, needle="start node 0 (--node-rank 0) too")
    # A rank's store or the launcher watching the ranks wait: whichever notices first says it.
    d.case("node 0 of 2 started alone: the nodes to start", node + ["--ranks", "2", "--node-rank", "0"], 1,
           needle="start all 2 nodes", lines=(1, 2))
