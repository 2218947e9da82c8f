"""granary.write's worker processes (workers=N > 1): each converts a range
of a map-style dataset's items into columns, which the parent gives the
native writer in order. Batches of fixed-shape samples come back through
memory the processes share (_Slots), others through the pool's pipe; a
worker that dies ends the write with WorkerError."""
import collections
import concurrent.futures
import multiprocessing
import os
import sys

import numpy as np

from .errors import WorkerError
from .samples import _Batch, _checked_label, _convert

_WORKER = {}


class _Slots:
    """Memory shared by the parent and its workers (an anonymous shared
    mapping made before the pool forks) that holds converted batches: a
    worker fills a slot with its batch's columns, the parent reads them from
    there, so a batch is neither pickled, sent through a pipe, nor allocated
    and faulted in again by the parent. Only for fields of fixed shape (a
    batch's size is known); `None` from make() where they are not, or where
    the slots would take more than `most_bytes` (then batches come back
    through the pool's pipe)."""

    def __init__(self, fields, rows, count, row_bytes):
        import mmap
        self.fields, self.row_bytes = fields, row_bytes
        # Each field's column at its own offset in a slot, a multiple of 64 bytes (aligned for any dtype).
        self.offsets, self.slot_bytes = [], 0
        for row in row_bytes:
            self.offsets.append(self.slot_bytes)
            self.slot_bytes += -(-rows * row // 64) * 64
        self.memory = mmap.mmap(-1, max(1, count * self.slot_bytes))  # MAP_SHARED | MAP_ANONYMOUS

    @classmethod
    def make(cls, fields, rows, count, most_bytes=1 << 30):
        """`count` slots of `rows` samples each, or None (see above)."""
        if any(f.variable for f in fields):
            return None
        row_bytes = [int(np.prod(f.shape, dtype=np.int64)) * f.dtype.itemsize for f in fields]
        return cls(fields, rows, count, row_bytes) if count * rows * sum(row_bytes) <= most_bytes else None

    def columns(self, slot, n):
        """Slot `slot`'s columns of `n` rows, as arrays over the shared memory."""
        base = slot * self.slot_bytes
        return [np.frombuffer(self.memory, field.dtype, n * row // field.dtype.itemsize, base + offset)
                .reshape((n,) + field.shape) for field, row, offset in zip(self.fields, self.row_bytes, self.offsets)]


def _item(dataset, index, split):
    """dataset[index]; an exception the dataset raises gets a note naming the
    item (its own message may name no file or row, and a worker's traceback
    ends in the pool's code)."""
    try:
        return dataset[index]
    except Exception as error:
        note = f"granary.write: raised by dataset[{index}], read for split '{split}'"
        if isinstance(error, IndexError) and hasattr(dataset, "__len__"):
            note += (f"; len(dataset) is {len(dataset)}, so dataset[0] to dataset[{len(dataset) - 1}] are read: "
                     f"its __len__ counts items that its __getitem__ does not give")
        error.add_note(note)
        raise


def _worker_init(parent, dataset, fields, label_name, regression, slots):
    from . import _native
    _native.die_with_parent(parent)  # a parent killed outright leaves no worker behind
    torch = sys.modules.get("torch")
    if torch is not None:  # as in DataLoader's workers: N workers of every core's threads would oversubscribe
        torch.set_num_threads(1)
    _WORKER.update(dataset=dataset, fields=fields, label_name=label_name, regression=regression, slots=slots)


def _worker_convert(split, indices, slot):
    """The columns of `indices`' items, or None when they were put in `slot`
    of the shared slots; with their count (each label checked)."""
    fields = _WORKER["fields"]
    slots = _WORKER["slots"]
    batch = _Batch(fields) if slot is None else None
    columns = slots.columns(slot, len(indices)) if slot is not None else None
    name = _WORKER["label_name"]
    k = [f.name for f in fields].index(name) if name is not None else None
    for row, (position, index) in enumerate(indices):
        arrays = _convert(_item(_WORKER["dataset"], index, split), fields, position, split)
        if k is not None:
            _checked_label(arrays[k], _WORKER["regression"], name, position, split)
        if columns is None:
            batch.add(arrays)
        else:
            for column, array in zip(columns, arrays):
                column[row] = array
    return (batch.columns() if columns is None else None), len(indices)


def _write_with_workers(writer, name, dataset, order, start, expected, workers):
    """Writes items `order` of `dataset`, samples `start`.. of split `name`."""
    if len(order) == 0:
        return
    writer._stream(name, expected)
    chunk = max(8, min(256, len(order) // (8 * workers)))  # small enough to keep every worker busy to the end
    window = 4 * workers  # batches in flight: memory does not grow with the dataset
    positions = list(enumerate(order, start))
    ranges = [positions[k:k + chunk] for k in range(0, len(positions), chunk)]
    slots = _Slots.make(writer._fields, chunk, window)
    free = list(range(window)) if slots is not None else []
    from . import _native  # the writer's: built where granary.write runs
    oom_kills = _native.oom_kills()  # before any worker starts: one killed for memory is said so
    # A pool that notices a worker that died (a crash in the dataset's code, the OOM killer): its
    # futures fail, where multiprocessing.Pool's would wait for ever.
    pool = concurrent.futures.ProcessPoolExecutor(workers, multiprocessing.get_context("fork"), _worker_init,
                                                  (os.getpid(), dataset, writer._fields, writer._label_name,
                                                   writer._regression, slots))
    pending = collections.deque()

    def take():
        slot, _, future = pending[0]
        columns, count = future.result()
        pending.popleft()
        if columns is None:
            columns = slots.columns(slot, count)
        try:
            writer._add_columns(columns, count)  # copied: the slot may be filled again
        finally:
            del columns  # no view of the slots outlives this, so they can be closed
        if slot is not None:
            free.append(slot)

    try:
        for r in ranges:
            if len(pending) >= window:
                take()
            slot = free.pop() if slots is not None else None
            pending.append((slot, r[0][0], pool.submit(_worker_convert, name, r, slot)))
        while pending:
            take()
    except concurrent.futures.process.BrokenProcessPool:
        reading = (f" (samples {pending[0][1]} to {min(pending[-1][1] + chunk, len(order)) - 1} were being read)"
                   if pending else "")
        raise WorkerError(f"a worker process ended abruptly ({_why_killed(oom_kills, workers)}) while reading split "
                          f"'{name}'{reading}") from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        if slots is not None:
            slots.memory.close()


def _why_killed(before, workers):
    """Why a worker died, from the kernel's counts of out-of-memory kills
    (_native.oom_kills: its memory cgroup's, the machine's, and the memory
    this process may use) taken before the workers started."""
    from . import _native
    cgroup, machine, limit = _native.oom_kills()
    less = f"fewer workers (workers={workers} now hold {workers} copies of what the dataset holds) need less"
    if cgroup > before[0]:
        return (f"the kernel's out-of-memory killer ended it, the write's processes having outgrown the "
                f"{limit / (1 << 20):.0f} MiB their memory cgroup allows: {less}")
    if machine > before[1]:
        return f"most likely the kernel's out-of-memory killer, which ended a process meanwhile: {less}"
    return "killed by a signal: a crash in the dataset's code, or the out-of-memory killer"
