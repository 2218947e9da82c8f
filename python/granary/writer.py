"""granary.write and granary.Writer: a db from any Python dataset, written
by the same C++ writer as `prep build` (preprocess/sample_writer.h), so its
records, checksums, shards, manifest and content hash follow docs/FORMAT.md
and `train`, `loader bench`, granary.Loader, granary.Dataset and `prep
info/verify/cat` read it as they read prep's.

    granary.write("fashion.db", {"train": torchvision.datasets.FashionMNIST(root, train=True),
                                 "test": torchvision.datasets.FashionMNIST(root, train=False)})

    with granary.Writer("tokens.db") as w:
        for text, label in my_generator():
            w.write({"text": text, "label": label})

(granary.write, python/granary/write_dataset.py, writes a whole dataset
through a Writer.)

The schema comes from the first sample: a dict's keys name the fields, a
tuple's are "input" and "target" (then "field2", ...). Values may be numpy
arrays, torch tensors, PIL images, ints, floats, bools, bytes or str:

- an image-like uint8 array (H x W, H x W x C or C x H x W with C of 1, 3
  or 4; a PIL image) is stored as an image (H x W becomes 1 x H x W, "CHW";
  H x W x C is "HWC"), as are float C x H x W tensors (after ToTensor);
- other arrays keep their dtype and shape (float64 stays float64);
- ints are int64 scalars, floats float32 scalars (torch's default), bools
  uint8;
- bytes are variable-length uint8 vectors; a str is text: its UTF-8 bytes,
  in a field of layout "utf-8", which granary.Dataset gives back as str.

Every later sample must fit: the same fields, dtypes and shapes, or it is
refused naming its index, split and field. The label field is the one
integer scalar field (or `label=`), else a float scalar named like a label
(a tuple's "target"): a number to predict (regression); with one other
field besides it, that one is the input `train --db` reads with no flags.
"""
import json
import os
import pickle
import tempfile
import time
import warnings
import weakref

import numpy as np

from .errors import FailedPreconditionError, InvalidArgumentError
from .paths import os_bytes, os_str
from .sample_advice import (_classes_without_samples, _imbalance_note, _integer_values_note, _warn_of_encoded_images,
                            _warn_of_float64, _warn_of_float_pixels, _warn_of_unread_images, _warn_of_vector_label)
from .samples import _Batch, _checked_label, _convert, _infer_schema, _label_field, _labels_as_given
from .write_progress import _outside_granary, _Progress, _user_line

__all__ = ["Writer"]


def _check_split_name(split):
    if not isinstance(split, str) or not split:
        raise InvalidArgumentError(f"split={split!r}: a split is named by a non-empty str")


class _Spool:
    """A split's converted samples in an unnamed temporary file (beside the
    db), in batches, until the writer gets to that split."""

    def __init__(self, fields, folder):
        self.file = tempfile.TemporaryFile(dir=folder, prefix=".granary-spool-")
        self.batch = _Batch(fields)
        self.count = 0

    def add(self, arrays, batch_size):
        self.batch.add(arrays)
        self.count += 1
        if len(self.batch) >= batch_size:
            self._dump()

    def _dump(self):
        if len(self.batch):
            count = len(self.batch)
            pickle.dump((self.batch.columns(), count), self.file, protocol=pickle.HIGHEST_PROTOCOL)

    def batches(self):
        self._dump()
        self.file.seek(0)
        while True:
            try:
                yield pickle.load(self.file)
            except EOFError:
                break
        self.file.close()


# Classes seen are tracked (for classes with no sample) up to this many: a label for each sample is no class.
_MOST_LABELS_TRACKED = 65536

# A float label of at most this many distinct integer values may be classes written as floats: said.
_FEW_INTEGERS = 32

# The Writers of this process with a write under way, by the db's real path: a Writer left open (a notebook
# cell whose loop raised before close()) still holds its db's "<db>.partial", and a new Writer of that db names it.
_OPEN = weakref.WeakValueDictionary()  # an entry goes with its Writer


class Writer:
    """Writes a db sample by sample:

        with granary.Writer("my.db") as w:
            for sample in samples:
                w.write(sample)                 # split="train" by default
            w.write(test_sample, split="test")  # splits one after another

    `schema` ({name: (dtype, shape[, layout])}; shape None for bytes, a -1
    in shape for a dim each sample states: token ids of any length are
    ("int64", [-1]); layout "utf-8" for a str) fixes the fields instead of the
    first sample. `label` names the field training
    predicts (default: the one integer scalar field, else the float scalar
    named like a label: a regression target); `classes` the class
    names in label order (default: "0".."N-1" for N = the largest label +
    1). `threads` compress (0: every core); `zstd_level` and `dictionary`
    ("auto", "on", "off") as prep's flags. The db appears only when close()
    (or the end of the with block) succeeds: an exception inside the block, a
    crash or a kill leaves no db, only "<db>.partial", which no reader opens.
    An existing db is replaced only with overwrite=True (and only if it is a
    granary db); a second writer of the same path fails at once.

    resume=True continues the write that "<db>.partial" holds (as `prep build
    --resume` does): run the same code again, and the samples that write had
    already stored are skipped as they come (.resumed says how many of each
    split); the db is the one an uninterrupted write makes, if the samples
    come in the same order. A write with other options or fields is refused,
    naming what differs. Without a partial write to continue, it starts afresh.

    A Writer of the same db left open in this process (a notebook cell whose
    loop raised before close()) is named, not waited for: the new write
    takes its place with resume=True (continuing what it committed) or
    overwrite=True (starting afresh), and the old one is ended.
    """

    def __init__(self, db, schema=None, *, label=None, classes=None, overwrite=False, zstd_level=3, dictionary="auto",
                 threads=0, batch=1024, source="python", progress=None, options=None, resume=False):
        for name, value, low, high in (("zstd_level", zstd_level, 0, 22), ("threads", threads, 0, 4096),
                                       ("batch", batch, 1, 1 << 20)):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise InvalidArgumentError(f"{name}={value!r}: must be an int in {low}..{high}")
        if dictionary not in ("auto", "on", "off"):
            raise InvalidArgumentError(f"dictionary={dictionary!r}: must be 'auto', 'on' or 'off'")
        if classes is not None:
            classes = [str(c) for c in classes]
        self.path = os_str(db)
        self._db = os_bytes(db)
        self._schema, self._label, self._classes = schema, label, classes
        self._settings = dict(zstd_level=zstd_level, dictionary=dictionary, threads=threads, overwrite=bool(overwrite),
                              source=str(source), options={str(k): str(v) for k, v in (options or {}).items()},
                              resume=bool(resume))
        self._plan = None  # granary.write's splits and their lengths: part of what a resume must match
        self._batch_size = batch
        self._native = None
        self._opened = False  # the C++ writer was made: "<db>.partial" is this write's
        self._opened_at = None  # the user's line that opened it
        self._ended = "closed or aborted"  # why it writes no more, once it does not
        self._fields = None
        self._label_name = None
        self._regression = False  # the label field is a float: a number to predict
        self._integers = set()  # a float label's values while all are integers and few (None: not so, or resumed)
        self._max_label = -1
        # The classes seen and their samples, over every split (None: not known, past _MOST_LABELS_TRACKED or
        # resumed from before; a count of 0: a class a journal of an older granary named without its samples).
        self._label_counts = {}
        self._split = None  # the split streaming into the db
        self._written_splits = []
        self._spools = {}  # the other splits' samples, until close()
        self._index = 0
        self._first = 0  # samples of the streaming split written before this run (resumed)
        self._expected = 0
        self._batch = None
        # Resumed: {split: samples the interrupted write stored} (.resumed), and how many of each came again.
        self.resumed = {}
        self._finished = set()
        self._seen = {}
        self._progress = _Progress(progress)
        self._start = time.monotonic()
        self.summary = None

    def write(self, sample, split="train"):
        """Appends one sample to `split`. Splits may interleave: the first
        split's samples stream into the db, the others' wait in a temporary
        file (unnamed: it vanishes with the process) until close()."""
        if self._fields is not None and self._native is None:
            raise InvalidArgumentError(f"{self.path}: the writer was {self._ended}")
        _check_split_name(split)
        if self._native is None:
            self._open(sample, split)
        if self.resumed and self._stored_already(split):
            return
        if self._split is None and not self._written_splits:
            self._stream(split)
        if split == self._split:
            self._add(_convert(sample, self._fields, self._index, split))
            return
        if split in self._written_splits:
            raise InvalidArgumentError(f"split '{split}' was written already: write each split's samples together "
                                       f"(splits: {self._written_splits})")
        spool = self._spools.get(split)
        if spool is None:  # one spool (and temporary file) per split, not one made for each sample
            spool = self._spools[split] = _Spool(self._fields, os.path.dirname(self.path) or ".")
        arrays = _convert(sample, self._fields, spool.count, split)
        self._check_label(arrays, spool.count, split)
        spool.add(arrays, self._batch_size)

    def close(self):
        """Publishes the db and returns the summary (also in .summary): its
        splits (name, samples), content_hash, stored_bytes, payload_bytes,
        dictionary, seconds, threads."""
        if self.summary is not None:
            return self.summary
        if self._native is None:
            if self._opened:
                raise InvalidArgumentError(f"{self.path}: the writer was {self._ended}")
            raise InvalidArgumentError(f"{self.path}: no sample was written; a db needs at least one")
        self._end_split()
        for split, spool in self._spools.items():  # the splits that waited, in the order they came
            self._stream(split, spool.count)
            for columns, count in spool.batches():
                self._add_columns(columns, count)  # their labels were checked as they came
            self._end_split()
        self._spools = {}
        notes = []
        classes = self._classes
        num_classes = 0
        if self._label_name is not None and not self._regression:
            num_classes = len(classes) if classes is not None else self._max_label + 1
            if classes is not None and self._max_label >= len(classes):
                raise InvalidArgumentError(f"{self.path}: label {self._max_label} but only {len(classes)} classes "
                                           f"were named")
            seen = set(self._label_counts) if self._label_counts is not None else None
            gaps = _classes_without_samples(seen, num_classes) if classes is None else ""
            if gaps:
                notes.append(gaps)
                warnings.warn(f"granary.write: {gaps}", stacklevel=_outside_granary())
            classes = classes if classes is not None else [str(k) for k in range(num_classes)]
            imbalance = _imbalance_note(self._label_counts, classes)
            if imbalance:
                notes.append(imbalance)
                warnings.warn(f"granary.write: {imbalance}", stacklevel=_outside_granary())
        if self._regression and self._integers:
            note = _integer_values_note(self._fields[self._label_index], self._integers)
            warnings.warn(f"granary.write: {note}", stacklevel=_outside_granary())
        native, self._native = self._native, None
        self.summary = native.finish(self._label_name or "", num_classes, classes or [], notes)
        for note in self.summary.pop("notes"):  # a class one split holds and another lacks
            warnings.warn(f"granary.write: {note}", stacklevel=_outside_granary())
        self.summary["resumed_samples"] = sum(self.resumed.values())
        self.summary["splits"] = [(os.fsdecode(n) if isinstance(n, bytes) else n, c)
                                  for n, c in self.summary["splits"]]
        self._progress.summary(self.path, self.summary)
        return self.summary

    def abort(self):
        """Stops the write: no db appears, only "<db>.partial" (which
        resume=True continues and a write without it replaces)."""
        self._native = None
        self._batch = None
        self._spools = {}

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is None:
            self.close()
        else:
            self.abort()
            self._note_resumable(value)
        return False

    def _note_resumable(self, error):
        """Tells, beside an error that stopped this write, that resume=True can continue it."""
        from . import _native
        if self._opened and self.summary is None and _native.resumable(self._db):
            error.add_note(f"granary: {self.path}.partial keeps the samples written so far; the same write with "
                           f"resume=True continues from there")

    # What write() and granary.write share.

    def _open(self, sample, split):
        """Fixes the schema from `sample` and creates the C++ writer."""
        from . import _native
        if not self._settings["overwrite"] and os.path.lexists(self._db):
            raise InvalidArgumentError(f"{self.path}: already exists (pass overwrite=True to replace it, if it is a "
                                       f"granary db)")
        self._fields = _infer_schema(sample, 0, split, self._schema)
        _labels_as_given(self._fields, sample, split, self._label, self._classes)
        _warn_of_float_pixels(sample, self._fields, split)
        _warn_of_float64(self._fields, split)
        self._label_name = _label_field(self._fields, self._label)
        _warn_of_vector_label(self._fields, sample, split, self._label_name, _outside_granary() + 1)
        _warn_of_encoded_images(self._fields, sample, split, _outside_granary() + 1)
        _warn_of_unread_images(self._fields, split, _outside_granary() + 1)
        self._label_index = [f.name for f in self._fields].index(self._label_name) if self._label_name else None
        self._regression = self._label_name is not None and self._fields[self._label_index].dtype.kind == "f"
        if self._regression and self._classes is not None:
            raise InvalidArgumentError(f"classes=: label field '{self._label_name}' is a float, a number to predict "
                                       f"(regression), which has no classes")
        self._batch = _Batch(self._fields)
        self._take_over_a_writer_left_open()
        s = self._settings
        fingerprint = json.dumps({"source": s["source"], "label": self._label_name, "classes": self._classes,
                                  "splits": self._plan}, sort_keys=True)
        counts = [count for _, count in self._plan or []]
        expected = sum(counts) if counts and None not in counts else 0  # known for map-style datasets
        self._native = _native.Writer(self._db, [f.spec() for f in self._fields], s["zstd_level"], s["dictionary"],
                                      s["threads"], s["overwrite"], s["source"], s["options"], s["resume"], fingerprint,
                                      expected)
        self._opened = True
        resumed = self._native.resumed()
        if resumed is not None:
            self._integers = None  # the values stored before are not known
            state = json.loads(resumed["state"] or "{}")
            self._max_label = state.get("max_label", -1)
            counts, labels = state.get("counts"), state.get("labels")  # (an older granary's journal: labels alone)
            self._label_counts = ({int(c): n for c, n in counts.items()} if counts is not None else
                                  dict.fromkeys(labels, 0) if labels is not None else None)
            self.resumed = dict(resumed["finished"])
            self._finished = set(self.resumed)
            self._written_splits = list(self.resumed)
            if resumed["split"] is not None:
                self.resumed[resumed["split"]] = resumed["samples"]
                self._stream(resumed["split"])

    def _take_over_a_writer_left_open(self):
        """Names a Writer of this db that this process left open, or, with
        resume=True or overwrite=True, ends it so that this one takes its
        place (its committed samples continued, or dropped)."""
        key = os.path.realpath(self._db)
        here = _user_line()
        earlier = _OPEN.get(key)
        if earlier is not None and earlier is not self and earlier._native is not None:
            resume, overwrite = self._settings["resume"], self._settings["overwrite"]
            if not resume and not overwrite:
                raise FailedPreconditionError(
                    f"{self.path}: a granary.Writer of it that this process opened at {earlier._opened_at} is still "
                    f"open (its loop raised before close()?): call its abort(), or close() to publish what it "
                    f"wrote; or write again with resume=True to continue it, or overwrite=True to start afresh")
            earlier.abort()
            earlier._ended = f"ended by the Writer of the same db opened at {here}"
            fate = "continues what it committed" if resume else "starts afresh"
            warnings.warn(f"granary: {self.path}: the granary.Writer of it opened at {earlier._opened_at} was left "
                          f"open; it is ended, and this write {fate}", stacklevel=_outside_granary())
        self._opened_at = here
        _OPEN[key] = self

    def _stored_already(self, split):
        """Whether this sample of `split` is one the resumed write had stored
        (counted); InvalidArgumentError for one more than a split it finished."""
        seen = self._seen[split] = self._seen.get(split, 0) + 1
        if seen <= self.resumed.get(split, 0):
            return True
        if split in self._finished:
            raise InvalidArgumentError(f"split '{split}': the interrupted write finished it with "
                                       f"{self.resumed[split]} samples, and more came now; a resumed write needs the "
                                       f"same samples in the same order")
        return False

    def _stream(self, split, expected=0):
        """Ends the streaming split (if another) and streams `split` (a
        resumed one from its samples already stored)."""
        if split == self._split:
            self._expected = expected or self._expected
            return
        _check_split_name(split)
        if split in self._written_splits:
            raise InvalidArgumentError(f"split '{split}' was written already: write each split's samples together "
                                       f"(splits: {self._written_splits})")
        self._end_split()
        self._first = self.resumed.get(split, 0)
        self._split, self._index, self._expected = split, self._first, expected
        self._native.begin_split(split, expected)
        self._start = time.monotonic()

    def _check_label(self, arrays, index, split):
        if self._label_name is not None:
            _checked_label(arrays[self._label_index], self._regression, self._label_name, index, split)

    def _add(self, arrays):
        self._check_label(arrays, self._index, self._split)
        self._batch.add(arrays)
        self._index += 1
        if len(self._batch) >= self._batch_size:
            self._flush()

    def _add_columns(self, columns, count):
        """A batch converted (and its labels checked) elsewhere: a worker process, or a spool."""
        self._flush()
        self._note_labels(columns)
        self._native.set_state(self._state())
        self._native.add(columns)
        self._index += count
        self._warn_of_disk()
        self._progress.update(self._split, self._index, self._expected, self._start, first=self._first)

    def _flush(self):
        if self._batch is not None and len(self._batch):
            columns = self._batch.columns()
            self._note_labels(columns)
            self._native.set_state(self._state())
            self._native.add(columns)
            self._warn_of_disk()
            self._progress.update(self._split, self._index, self._expected, self._start, first=self._first)

    def _note_labels(self, columns):
        """The label column of a batch about to be added: its classes (the largest, and which, while they are few
        enough to keep in the journal's state) or, for a float label, its values while every one is an integer and
        they are few (classes written as floats?)."""
        if self._label_name is None:
            return
        if not self._regression:
            seen, counts = np.unique(columns[self._label_index], return_counts=True)
            if seen.size:
                self._max_label = max(self._max_label, int(seen[-1]))
            if self._label_counts is not None:
                for label, count in zip(seen.tolist(), counts.tolist()):
                    self._label_counts[label] = self._label_counts.get(label, 0) + count
                if len(self._label_counts) > _MOST_LABELS_TRACKED:
                    self._label_counts = None
            return
        if self._integers is None:
            return
        values = columns[self._label_index].astype(np.float64)
        if not np.array_equal(values, np.round(values)):
            self._integers = None
            return
        self._integers.update(np.unique(values).tolist())
        if len(self._integers) > _FEW_INTEGERS:
            self._integers = None

    def _warn_of_disk(self):
        """Once, where the rest of the samples will not fit on the db's disk (projected in C++)."""
        warning = self._native.take_disk_warning()
        if warning:
            self._progress.interrupt()
            warnings.warn(f"granary.write: {warning}", stacklevel=_outside_granary())

    def _state(self):
        """What a resumed write needs of this one (in the journal with each commit): the largest label so far,
        and the classes seen and their samples, as long as they are few enough to keep there."""
        counts = self._label_counts
        return json.dumps({"max_label": self._max_label,
                           "counts": {str(c): n for c, n in sorted(counts.items())} if counts is not None else None})

    def _end_split(self):
        if self._split is None:
            return
        self._flush()
        self._native.end_split()
        self._progress.update(self._split, self._index, self._expected, self._start, final=True, first=self._first)
        self._written_splits.append(self._split)
        self._split = None
