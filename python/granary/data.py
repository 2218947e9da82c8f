"""granary.Dataset and granary.Loader: a db as torch data (see granary/__init__.py)."""
import math
import operator
import os
import warnings

import numpy as np
import torch
import torch.utils.data

from . import collate, db_fields, errors, loader_args
from .paths import os_bytes, os_str

try:
    from . import _native
except ImportError:  # the C++ module is not built: Dataset reads with granary.reader
    _native = None


def _batch_fields(path, input_field, target_field):
    """(input, target) as `train` picks them (the C++ rule, loader/fields.h): the
    label field, and 'image' or else the one other field, unless named."""
    if _native is not None:
        return _native.batch_fields(os_bytes(path), os.fsencode(input_field or ""), os.fsencode(target_field or ""))
    if input_field and target_field:
        return input_field, target_field
    raise errors.InvalidArgumentError("granary's C++ module is not built: name both input_field= and target_field=")


def _tuple_fields(path, input_field, target_field, fields):
    """The (input, target) of a Dataset's tuples: _batch_fields, or where the
    db has no label (images with masks), the two it needs named."""
    try:
        return _batch_fields(path, input_field, target_field)
    except errors.InvalidArgumentError as e:
        if target_field or "has no label field" not in str(e):
            raise
        names = ", ".join(repr(f) for f in fields)
        raise errors.InvalidArgumentError(f"{path}: as_tuple=True: the db has no label field to pair an input with "
                                          f"(its fields: {names}): name the two (input_field=..., target_field=..., "
                                          f"a mask too), or read each sample as a dict of its fields") from None


class _PythonSplit:
    """granary.reader's split with the C++ handle's interface."""

    def __init__(self, path, split):
        from . import reader
        db = reader.Db(path)
        if split not in db.splits:
            raise errors.NotFoundError(f"{path}: no split '{split}' (its splits: {', '.join(db.splits) or 'none'})")
        self._split = db[split]
        self.content_hash = db.manifest["content_hash"]

    def __len__(self):
        return len(self._split)

    def read(self, index):
        if not 0 <= index < len(self._split):
            raise IndexError(f"sample {index} of split '{self._split.name}' ({len(self._split)} samples)")
        return {name: np.array(array) for name, array in self._split[index].items()}  # writable copies


def _pil_image(x, layout):
    """A uint8 image tensor (H x W x C or C x H x W) as the PIL image
    torchvision's ImageFolder would hand a transform."""
    from PIL import Image
    hwc = x if layout == "HWC" else x.permute(1, 2, 0)
    pixels = np.ascontiguousarray(hwc.numpy())
    return Image.fromarray(pixels[:, :, 0] if pixels.shape[2] == 1 else pixels)


class Dataset(torch.utils.data.Dataset):
    """One split of a db as a map-style torch Dataset.

    dataset[i] is a dict {field: tensor} of sample i, each field as stored
    (an image is uint8 H x W x C, a str written by granary.write a str, bytes
    a uint8 tensor), or (input, target) with as_tuple=True, after
    `transform` (applied to the dict, or to the input: to an image input as
    torchvision's ImageFolder applies it, to a PIL image, so a torchvision
    pipeline written for ImageFolder, ToTensor() and all, runs unchanged). Works with DataLoader
    (workers open the db again after fork, as LMDB requires) and
    DistributedSampler. backend: "native" (C++), "python" (granary.reader) or
    "auto" (native if built). classes and class_to_idx are torchvision's
    ImageFolder's (the db's class names in label order); element_names maps a
    field to its elements' names (a CSV table's features: its columns).
    """

    def __init__(self, db, split="train", as_tuple=False, transform=None, input_field=None, target_field=None,
                 backend="auto"):
        if backend not in ("auto", "native", "python"):
            raise errors.InvalidArgumentError(f"backend must be auto, native or python, not {backend!r}")
        if backend == "native" and _native is None:
            raise errors.InvalidArgumentError("backend='native': granary's C++ module is not built")
        self.path = os_str(db)
        self.split = split
        self.as_tuple = as_tuple
        self.transform = transform
        self.backend = "python" if backend == "python" or _native is None else "native"
        handle = self._open()  # fails here, in the caller's process, on a bad db or split
        self.content_hash = handle.content_hash  # every process must read this db, not one built since
        self._length = len(handle)
        sample = handle.read(0) if self._length > 0 else {}
        self.fields = list(sample)
        self.input_field, self.target_field = input_field, target_field
        if as_tuple:
            self.input_field, self.target_field = _tuple_fields(self.path, input_field, target_field, self.fields)
            for role, name in (("input_field", self.input_field), ("target_field", self.target_field)):
                if name not in self.fields:
                    raise errors.NotFoundError(f"{self.path}: {role} '{name}': no such field "
                                               f"(fields: {', '.join(self.fields)})")
        manifest = db_fields.manifest(self.path)
        self.classes, self.class_to_idx, self.element_names = db_fields.names(self.path, manifest)
        # A transform of an image input gets a PIL image: torchvision's transforms of tensors take C x H x W,
        # and would flip an H x W x C tensor's channels where they mean its columns.
        self._pil_layout = db_fields.image_layout(manifest, self.input_field) if as_tuple and transform else ""
        self._text = db_fields.text_fields(manifest)
        self._varying = db_fields.varying_fields(manifest)
        self._handle, self._pid = handle, os.getpid()

    def _open(self):
        if self.backend == "native":
            return _native.Split(os_bytes(self.path), self.split)
        return _PythonSplit(self.path, self.split)

    def _reader(self):
        if self._handle is None or self._pid != os.getpid():  # a DataLoader worker after fork
            handle = _same_db(self._open(), self.path, self.content_hash)
            self._handle, self._pid = handle, os.getpid()
        return self._handle

    def __len__(self):
        return self._length

    def __getitem__(self, index):
        if isinstance(index, slice):  # numpy's habit; a torch Dataset takes one index
            part = f"{'' if index.start is None else index.start}:{'' if index.stop is None else index.stop}"
            raise TypeError(f"granary.Dataset takes one index, not a slice [{part}]: torch.utils.data.Subset(dataset, "
                            f"range(len(dataset))[{part}]) is that part of it, [dataset[k] for k in "
                            f"range(len(dataset))[{part}]] its samples")
        index = _integer("index", index, -self._length, self._length - 1, IndexError)
        if index < 0:
            index += self._length
        sample = {name: self._text_of(index, name, array) if name in self._text else torch.from_numpy(array)
                  for name, array in self._reader().read(index).items()}
        if not self.as_tuple:
            sample = collate.Sample(sample, self._varying) if self._varying else sample
            return self.transform(sample) if self.transform else sample
        x = sample[self.input_field]
        if self.transform:
            x = self.transform(_pil_image(x, self._pil_layout) if self._pil_layout else x)
        if not self._varying:
            return x, sample[self.target_field]
        fields = (self.input_field, self.target_field)
        return collate.SamplePair((x, sample[self.target_field]),
                                  {k: self._varying[f] for k, f in enumerate(fields) if f in self._varying})

    def _text_of(self, index, name, array):
        try:
            return array.tobytes().decode("utf-8")
        except UnicodeDecodeError as e:
            raise errors.CorruptionError(f"{self.path}: sample {index} of split '{self.split}': field '{name}' is "
                                         f"not UTF-8 text, as its schema says ({e.reason} at byte {e.start})") from None

    def __getstate__(self):  # spawned workers and pickling: no open handle travels
        state = dict(self.__dict__)
        state["_handle"] = None
        return state


def _same_db(handle, path, content_hash):
    """`handle` if it reads the db of `content_hash`; else raise: a db rebuilt
    at `path` since it was first opened would mix two datasets in one run."""
    if handle.content_hash != content_hash:
        raise errors.FailedPreconditionError(
            f"{path}: the db was replaced since this process's parent opened it (content hash {content_hash}, "
            f"now {handle.content_hash}): samples of two datasets would mix; make a new Dataset or Loader")
    return handle


def _integer(name, value, low, high, error=errors.InvalidArgumentError):
    """`value` as an int in low..high (anything with __index__: numpy and 0-d torch
    integers too); a bool, a float (1.7) or anything else is refused, naming `name`."""
    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)
    except TypeError:
        number = None
    if number is None or not low <= number <= high:
        raise error(f"{name} must be an integer in {low}..{high}, got {value!r}")
    return number


def _normalization(normalize):
    if normalize is False or normalize is None:
        return [0.0], [1.0]
    if normalize is True:
        return [], []  # the C++ side picks by the input's channels: ImageNet's for RGB, else 0.5 / 0.5
    mean, std = normalize
    mean = [float(m) for m in (mean if hasattr(mean, "__len__") else [mean])]
    std = [float(s) for s in (std if hasattr(std, "__len__") else [std])]
    if not all(math.isfinite(m) for m in mean) or not all(math.isfinite(s) and s > 0 for s in std):
        raise errors.InvalidArgumentError(f"normalize: mean must be finite and std finite and > 0, got {normalize!r}")
    return mean, std


def _check_unit_range(manifest, split, field):
    """For normalize=True (ImageNet's mean and std, for values in [0, 1]): a
    float field whose values the db's `manifest` records outside [0, 1] holds
    images written after ToTensor() and Normalize(), which it would normalise
    a second time (a silent wrong input). Refused, naming the values; uint8
    fields (scaled to [0, 1] first) and dbs without statistics are not
    checked."""
    stats = ((manifest.get("statistics") or {}).get(split) or {}).get(field)
    if not isinstance(stats, dict) or not isinstance(stats.get("min"), list) or not isinstance(stats.get("max"), list):
        return
    values = [v for v in stats["min"] + stats["max"] if isinstance(v, (int, float)) and math.isfinite(v)]
    if not values:
        return
    low, high = min(values), max(values)
    if low < -0.01 or high > 1.01:
        raise errors.InvalidArgumentError(
            f"normalize=True: field '{field}' of split '{split}' holds float values from {low:.3g} to {high:.3g}, "
            f"not images in [0, 1]: normalised already when written (Normalize() in the transform)? "
            f"normalize=False reads them as they are; normalize=(mean, std) gives the statistics to use")


def _feature_scaling(manifest, field):
    """(mean, 1 / std) tensors that standardise the feature vector `field`
    with the train split's statistics in the db's `manifest` (as `train`'s
    MLP does: a missing value, NaN, becomes the mean, 0), or None where
    `field` is no feature vector (for images normalize=True means
    ImageNet's). InvalidArgumentError where the db records no statistics of
    it."""
    shapes = {f.get("name"): f.get("shape") for f in manifest.get("schema", {}).get("fields", [])}
    if not isinstance(shapes.get(field), list) or len(shapes[field]) != 1:
        return None
    stats = ((manifest.get("statistics") or {}).get("train") or {}).get(field)
    if not isinstance(stats, dict) or not isinstance(stats.get("mean"), list) or not isinstance(stats.get("std"), list):
        raise errors.InvalidArgumentError(
            f"normalize=True: the db records no statistics of feature field '{field}' for its train split to "
            f"standardise with (a db built before December 2026, or without a train split): standardise the "
            f"features yourself, or rebuild it")
    def usable(v):  # a column of missing values alone has none
        return isinstance(v, (int, float)) and math.isfinite(v)
    mean = torch.tensor([v if usable(v) else 0.0 for v in stats["mean"]], dtype=torch.float32)
    std = torch.tensor([v if usable(v) and v > 0 else 1.0 for v in stats["std"]], dtype=torch.float32)
    return mean, 1 / std


def _superseded():
    return errors.FailedPreconditionError(
        "granary.Loader: another iterator over this Loader was started; a Loader gives one stream of batches, "
        "so only its newest iterator may read (make a second Loader for a second, independent pass)")


def _from_launcher(rank, world, threads):
    """rank and world from torchrun's RANK and WORLD_SIZE (as `launch` and
    torchrun set them) when not given, else 0 and 1; threads from `launch`'s
    GRANARY_LOADER_THREADS (the rank's share of its CPUs) when not given,
    else 2."""
    def number(name):
        value = os.environ.get(name)
        try:
            return int(value) if value is not None else None
        except ValueError:
            raise errors.InvalidArgumentError(f"{name}={value!r} in the environment: not an integer") from None
    if rank is None and world is None and number("WORLD_SIZE") is not None:
        rank, world = number("RANK"), number("WORLD_SIZE")
        if rank is None:
            raise errors.InvalidArgumentError("WORLD_SIZE is set in the environment but RANK is not")
    if threads is None:
        threads = number("GRANARY_LOADER_THREADS") or 2
    return (0 if rank is None else rank), (1 if world is None else world), threads


class _Sampler:
    """Loader.sampler: what a script asks of a DistributedSampler."""

    def __init__(self, loader):
        self._of = loader
        self.rank, self.num_replicas = loader._rank_world

    @property
    def epoch(self):
        return self._of._epoch

    def set_epoch(self, epoch):
        self._of.set_epoch(epoch)

    def __len__(self):
        return self._of._loader.plan(0)["samples_per_rank"]


class Loader:
    """granary's C++ prefetching loader over one split, for one rank.

    Iterating yields (input, target) torch tensors: float32 N x C x H x W
    images (values / 255, then normalised; channels_last=True gives the same
    shape in channels-last memory) or N x F features, and int64 N labels
    (float32 N values for a regression db: `prep build --regression`). The
    tensors share the loader's batch buffers (no copy); each batch's buffers
    return to the loader once both tensors are gone.

    rank and world default to torchrun's RANK and WORLD_SIZE when set (under
    torchrun or `launch`), else 0 and 1; threads to `launch`'s
    GRANARY_LOADER_THREADS when set, else 2.
    Rank r of `world` reads positions r, r + world, ... of the epoch's shuffled
    order (the same order `train` and `loader order` use), padded by wrapping
    around so every rank gets as many samples, unless sampler_drop_last
    (DistributedSampler's drop_last: the epoch's tail is dropped instead).
    drop_last is DataLoader's: this rank's last batch, if short, is not
    given. Set the epoch with set_epoch(e) before iterating, as with
    DistributedSampler (a second pass over an epoch without it, which gives
    the same order, is warned of: DataLoader(shuffle=True) reshuffles itself).
    state_dict() after some batches and load_state_dict() on a new Loader (any
    world size) continue the epoch where it stopped.

    augment: comma list of "flip", "crop" (pad 4, random crop), "rrc" (random
    resized crop). normalize: False (values / 255 only), True (ImageNet's mean
    and std for RGB, 0.5 / 0.5 for gray; refused for float images whose
    recorded values lie outside [0, 1]: normalised when written; features
    standardised with the train split's recorded mean and std, a missing
    value becoming 0, as `train`'s MLP does), or (mean, std) for images, each
    a number or one per channel. shuffle: "full", "block" or "none" (True and
    False, DataLoader's, are "full" and "none"); DataLoader's num_workers=N is
    threads=N, its pin_memory and persistent_workers are taken and mean
    nothing here, its other arguments are refused naming what the Loader
    does instead (granary/loader_args.py). input_field and
    target_field: the fields batched (default: as `train` picks them, see
    granary.describe). classes, class_to_idx and element_names as Dataset's.
    As a DataLoader: .batch_size, .dataset (the split, all ranks' samples:
    len(loader.dataset)) and .sampler (set_epoch, len: this rank's samples).
    """

    def __init__(self, db, split="train", batch_size=64, rank=None, world=None, seed=0, threads=None, prefetch=4,
                 augment="", normalize=False, channels_last=False, drop_last=False, shuffle="full", input_field=None,
                 target_field=None, sampler_drop_last=False, **dataloader_args):
        if _native is None:
            raise errors.Error("granary.Loader needs granary's C++ module (build granary; see README)")
        shuffle = loader_args.shuffle_mode(shuffle)
        rank, world, threads = _from_launcher(rank, world, loader_args.threads_of(dataloader_args, threads))
        # The loader's own bounds (loader/loader.h), checked before anything is allocated.
        bounds = _native.loader_bounds()
        for name, value, low, high in (("batch_size", batch_size, 1, bounds["batch_size"]),
                                       ("world", world, 1, 1 << 20), ("threads", threads, 1, bounds["threads"]),
                                       ("prefetch", prefetch, 1, bounds["prefetch"]),
                                       ("rank", rank, 0, world - 1), ("seed", seed, 0, (1 << 64) - 1)):
            _integer(name, value, low, high)
        self.path = os_str(db)
        self.channels_last = channels_last
        self.batch_size = self._batch = batch_size
        self.split = split
        self._rank_world = (rank, world)
        self._fields = (input_field, target_field)
        self._dataset = None  # .dataset, made when first asked for
        self.drop_last = bool(drop_last)
        # normalize=True of features: standardised here, with the train split's statistics.
        manifest, self._scaling = None, None
        if normalize is True:
            batched = _batch_fields(self.path, input_field, target_field)[0]  # opens the db: the tools' errors
            manifest = db_fields.manifest(self.path)
            self._scaling = _feature_scaling(manifest, batched)
        mean, std = _normalization(False if self._scaling is not None else normalize)
        self._args = (os_bytes(self.path), split, batch_size, rank, world, seed, threads, prefetch, augment, shuffle,
                      mean, std, channels_last, bool(sampler_drop_last), os.fsencode(input_field or ""),
                      os.fsencode(target_field or ""))
        self._made = (os.getpid(), _native.Loader(*self._args))  # bad options fail here
        self.content_hash = self._made[1].content_hash
        if manifest is None:
            manifest = db_fields.manifest(self.path)
        self.classes, self.class_to_idx, self.element_names = db_fields.names(self.path, manifest)
        if normalize is True and self._scaling is None:
            _check_unit_range(manifest, split, batched)
        self._epoch = 0
        self._finished = None  # the epoch a pass last ran to its end, until set_epoch
        self._warned = False
        self._iterations = 0  # iterators made: only the newest may take batches
        self._position = 0  # where the next iteration starts (load_state_dict)

    @property
    def _loader(self):
        """The C++ loader of this process: its threads do not survive fork(), so a
        forked child (a DataLoader worker) opens its own, as Dataset does."""
        if self._made is None or self._made[0] != os.getpid():
            self._made = (os.getpid(), _same_db(_native.Loader(*self._args), self.path, self.content_hash))
        return self._made[1]

    def __getstate__(self):
        """Pickled (into a spawned process, or saved): the options, epoch and
        position travel, not the C++ loader; it is opened again where the
        copy is first used, refusing a db rebuilt since (content hash)."""
        state = dict(self.__dict__)
        state["_made"] = None
        return state

    def set_epoch(self, epoch):
        self._epoch = _integer("set_epoch: epoch", epoch, 0, (1 << 64) - 1)
        self._position = 0
        self._finished = None

    @property
    def dataset(self):
        """The split as a map-style Dataset of (input, target), as DataLoader's
        .dataset: len(loader.dataset) is the split's size over all ranks
        (what a script divides its summed test loss by), .classes its classes."""
        if self._dataset is None:
            self._dataset = Dataset(self.path, split=self.split, as_tuple=True, input_field=self._fields[0],
                                    target_field=self._fields[1])
        return self._dataset

    @property
    def sampler(self):
        """DistributedSampler's face of this loader: set_epoch(e) and len()
        (samples this rank gets an epoch), for a script that calls
        loader.sampler.set_epoch(epoch)."""
        return _Sampler(self)

    def __len__(self):
        """Batches this rank gets in the coming iteration (the last may be smaller, unless drop_last)."""
        per_rank = self._loader.plan(self._position)["samples_per_rank"]
        return per_rank // self._batch if self.drop_last else (per_rank + self._batch - 1) // self._batch

    def plan(self):
        """Samples in the split, per rank, and padded or dropped over all ranks, for the coming iteration."""
        return self._loader.plan(self._position)

    def __iter__(self):
        """One pass over the rest of the epoch. The loader has one stream of
        batches: a new iterator takes it over, and an older one still in use
        raises (two iterators sharing it would each get part of the epoch)."""
        self._iterations += 1
        if self._finished == self._epoch and self._position == 0 and not self._warned:
            # DataLoader(shuffle=True) reshuffles each pass by itself; DistributedSampler, and this loader, do not.
            self._warned = True
            warnings.warn(f"granary.Loader: a second pass over epoch {self._epoch} without set_epoch(): the same "
                          f"order and augmentation as the pass before; call loader.set_epoch(epoch) before each "
                          f"epoch, as with DistributedSampler", stacklevel=2)
        return self._batches(self._iterations)

    def _batches(self, iteration):
        if iteration != self._iterations:
            raise _superseded()
        self._loader.start(self._epoch, self._position)
        self._position = 0
        while True:
            batch = self._loader.next()
            if iteration != self._iterations:
                raise _superseded()
            if batch is None or (self.drop_last and len(batch[1]) < self._batch):
                self._finished = self._epoch
                return
            x, y = batch
            x, y = torch.from_numpy(x), torch.from_numpy(y)
            if self._scaling is not None:
                x = torch.nan_to_num((x - self._scaling[0]) * self._scaling[1], nan=0.0)
            if self.channels_last and x.dim() == 4:
                x = x.permute(0, 3, 1, 2)  # N x C x H x W, channels-last in memory
            yield x, y

    def state_dict(self):
        epoch, position = self._loader.state()
        return {"epoch": epoch, "position": position}

    def load_state_dict(self, state):
        self._epoch = _integer("state['epoch']", state["epoch"], 0, (1 << 64) - 1)
        self._finished = None
        self._position = _integer("state['position']", state["position"], 0, self._loader.plan(0)["samples"])

    def stats(self):
        """Batches delivered, seconds the consumer waited, mean batches ready."""
        return self._loader.stats()
