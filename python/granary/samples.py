"""How granary.write's samples become a db's fields: the schema inferred from
the first sample, each later sample checked and converted to arrays of it,
and converted samples gathered into the columns the C++ writer takes
(python/granary/writer.py uses them; so do its worker processes)."""
import warnings

import numpy as np

from .errors import InvalidArgumentError

_TUPLE_NAMES = ("input", "target")
_LABEL_NAMES = ("label", "labels", "target", "targets", "y", "class")
_IMAGE_CHANNELS = (1, 3, 4)
_RANDOM_TRANSFORMS = ("ColorJitter", "AutoAugment", "RandAugment", "TrivialAugmentWide", "AugMix", "ElasticTransform")
_SUPPORTED = (np.uint8, np.int8, np.int16, np.int32, np.int64, np.float32, np.float64)


TEXT_LAYOUT = "utf-8"  # a variable-length uint8 field holding a str as UTF-8 (docs/FORMAT.md)


class _Field:
    """One field of the schema: name, numpy dtype, shape (a tuple, -1 where
    each sample states the dim; None: bytes or str, a 1-D uint8 vector) and
    layout ("CHW" or "HWC" for an image, TEXT_LAYOUT for text, else "")."""

    def __init__(self, name, dtype, shape, layout="", origin="the first sample"):
        self.name, self.dtype, self.shape, self.layout = name, np.dtype(dtype), shape, layout
        self.origin = origin  # where the field's kind came from, for messages
        self.classes = None  # a label given as class names: {name: index} (from classes=)
        self.squeezed = False  # a label given as a one-element array: stored as the scalar
        if self.dtype == np.uint8 and shape == (-1,):
            self.shape = None  # bytes (or a 1-D uint8 array) as a schema= of uint8 [-1] says

    @property
    def variable(self):
        """Whether samples state (some of) the field's dims: it is not stacked."""
        return self.shape is None or -1 in self.shape

    def spec(self):
        return (self.name, self.dtype.name, [-1] if self.shape is None else list(self.shape), self.layout)

    def describe(self):
        if self.layout == TEXT_LAYOUT:
            return "str"
        if self.shape is None:
            return "bytes"
        return f"{self.dtype.name} {list(self.shape)}"


# dtypes the format lacks, and what to convert them to (the write refuses rather than choose).
_WIDER = {"float16": "float32", "bfloat16": "float32", "uint16": "int32", "uint32": "int64"}


def _as_array(value, where="a value", first=False):
    """A sample's value as a numpy array, and what it was: "str" or "bytes"
    (a variable-length uint8 vector either way), else "".
    InvalidArgumentError, prefixed by `where`, for what no field holds, and
    for the `first` sample's dtypes the format lacks (a later sample's are
    converted to its field's dtype where that keeps their values)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return np.frombuffer(bytes(value), dtype=np.uint8), "bytes"
    if isinstance(value, str):
        try:
            return np.frombuffer(value.encode("utf-8"), dtype=np.uint8), "str"
        except UnicodeEncodeError as e:
            raise InvalidArgumentError(f"{where}: a str that UTF-8 cannot hold ({e.reason} at character {e.start}: "
                                       f"{value[e.start:e.end]!r}); write such data as bytes") from None
    if isinstance(value, bool) or isinstance(value, np.bool_):
        return np.asarray(value, dtype=np.uint8), ""
    if isinstance(value, int):
        return np.asarray(value, dtype=np.int64), ""
    if isinstance(value, float):
        return np.asarray(value, dtype=np.float32), ""
    if value is None or isinstance(value, dict):
        what = "None (a missing value)" if value is None else "a dict"
        raise InvalidArgumentError(f"{where}: is {what}; a field holds one array, number, str or bytes in every "
                                   f"sample" + (" (NaN for a missing float)" if value is None else
                                                " (make each of its members a field of the sample)"))
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
        kind = str(getattr(value, "dtype", "")).replace("torch.", "")
        if first and kind in _WIDER:
            raise _unstored(where, f"a torch.{kind} tensor", kind)
        value = value.detach().cpu()
        return (value.float() if kind == "bfloat16" else value).numpy(), ""  # numpy has no bfloat16
    try:
        array = np.asarray(value)  # a PIL image, a list, a numpy value
    except ValueError:  # numpy: "setting an array element with a sequence ... inhomogeneous shape"
        raise InvalidArgumentError(f"{where}: is nested lists of different lengths, not one rectangular array; pad "
                                   f"its rows to one length, or give it as one sequence (see schema= and -1)") from None
    if array.dtype.kind in "OUS":
        what = "str values" if array.dtype.kind in "US" else "Python objects"
        raise InvalidArgumentError(f"{where}: is an array of {what} ({type(value).__name__}); a field holds "
                                   f"numbers, or one str or bytes")
    if first and array.dtype.name in _WIDER:
        raise _unstored(where, f"{array.dtype.name}", array.dtype.name)
    return array, ""


def _unstored(where, what, dtype):
    return InvalidArgumentError(f"{where}: is {what}, a dtype granary does not store (it stores uint8, int8, int16, "
                                f"int32, int64, float32, float64): convert it to {_WIDER[dtype]} first")


def _named_values(sample, index, split):
    """(name, value) pairs of a sample: a dict's items, or a tuple's values
    as input, target, field2, ...; a lone value is "input"."""
    if isinstance(sample, dict):
        for name in sample:
            if not isinstance(name, str) or not name:
                raise InvalidArgumentError(f"sample {index} of split '{split}': field names must be non-empty str, "
                                           f"not {name!r}")
        return list(sample.items())
    if isinstance(sample, (tuple, list)):
        names = [_TUPLE_NAMES[k] if k < len(_TUPLE_NAMES) else f"field{k}" for k in range(len(sample))]
        return list(zip(names, sample))
    return [("input", sample)]


def _infer_field(name, value, where):
    array, kind = _as_array(value, f"{where}: field '{name}'", first=True)
    if kind:
        return _Field(name, np.uint8, None, TEXT_LAYOUT if kind == "str" else "")
    if array.dtype == np.bool_:
        array = array.astype(np.uint8)
    if array.dtype.type not in _SUPPORTED:
        raise InvalidArgumentError(f"{where}: field '{name}': dtype {array.dtype} is not one granary stores "
                                   f"(uint8, int8, int16, int32, int64, float32, float64)")
    shape, layout = tuple(array.shape), ""
    if array.dtype == np.uint8 and array.ndim == 2:
        shape, layout = (1,) + shape, "CHW"
    elif array.ndim == 3 and array.dtype == np.uint8 and shape[2] in _IMAGE_CHANNELS:
        layout = "HWC"
    elif array.ndim == 3 and shape[0] in _IMAGE_CHANNELS and array.dtype.kind in "uf":
        layout = "CHW"
    if any(d == 0 for d in shape):
        raise InvalidArgumentError(f"{where}: field '{name}': an empty array {list(array.shape)} fixes no shape "
                                   f"(where its length varies, see schema= and -1)")
    return _Field(name, array.dtype, shape, layout)


def _infer_schema(sample, index, split, schema):
    """The fields of the db: from `schema` if given ({name: (dtype, shape[,
    layout])}), else from the first sample."""
    if schema is not None:
        fields = []
        for name, spec in schema.items():
            dtype, shape = spec[0], spec[1]
            layout = spec[2] if len(spec) > 2 else ""
            fields.append(_Field(name, dtype, None if shape is None else tuple(shape), layout, "schema="))
        return fields
    where = f"sample {index} of split '{split}'"
    return [_infer_field(name, value, where) for name, value in _named_values(sample, index, split)]


def _convert(sample, fields, index, split):
    """The sample's values in field order, as arrays of the schema's dtype
    and shape; InvalidArgumentError naming the sample, split and field."""
    where = f"sample {index} of split '{split}'"
    named = _named_values(sample, index, split)
    if [n for n, _ in named] != [f.name for f in fields]:
        raise InvalidArgumentError(f"{where}: fields {[n for n, _ in named]}, but the db's are "
                                   f"{[f.name for f in fields]} (from {fields[0].origin})")
    out = []
    for field, (_, value) in zip(fields, named):
        if field.classes is not None:
            out.append(_class_index(field, value, where))
            continue
        array, kind = _as_array(value, f"{where}: field '{field.name}'")
        if field.squeezed and array.shape == (1,):
            array = array.reshape(())
        if field.shape is None:
            _check_variable(field, array, kind, where)
            out.append(array)
            continue
        if kind:
            raise InvalidArgumentError(f"{where}: field '{field.name}' is {field.describe()} in the db, not {kind}")
        if array.dtype == np.bool_:
            array = array.astype(np.uint8)
        if field.layout == "CHW" and array.ndim == len(field.shape) - 1 and field.shape[0] == 1:
            array = array.reshape((1,) + array.shape)  # H x W, stored as 1 x H x W
        if array.ndim != len(field.shape) or any(d not in (-1, a) for d, a in zip(field.shape, array.shape)):
            hint = _resize_hint(field, array) or _channels_hint(field, array) or _length_hint(field, array)
            raise InvalidArgumentError(f"{where}: field '{field.name}' has shape {list(array.shape)}, but the "
                                       f"db's is {list(field.shape)} (from {field.origin}){hint}")
        if array.dtype != field.dtype:
            if not np.can_cast(array.dtype, field.dtype, casting="same_kind"):
                raise InvalidArgumentError(f"{where}: field '{field.name}' is {array.dtype}, but the db's is "
                                           f"{field.dtype.name} (from {field.origin})")
            array = array.astype(field.dtype)
        out.append(array)
    return out


def _check_variable(field, array, kind, where):
    """A value for a variable-length field: a str for a text field; bytes
    (or a 1-D uint8 array) for the others. What was written is what a
    reader gives back, so the two are not mixed."""
    if field.layout == TEXT_LAYOUT:
        fits = kind == "str"
    else:
        fits = kind == "bytes" or not kind and array.dtype == np.uint8 and array.ndim == 1
    if fits:
        return
    given = kind or f"{array.dtype} {list(array.shape)}"
    raise InvalidArgumentError(f"{where}: field '{field.name}' holds {field.describe()}, not {given}: a field keeps "
                               f"the kind of its first sample (or of schema=, where text is ('uint8', [-1], "
                               f"{TEXT_LAYOUT!r})), so that a reader gives back what was written")


def _resize_hint(field, array):
    """What to do about an image whose size differs from the first one's:
    a db's field has one shape, so images are resized before they are
    written (as `prep build` does for a folder)."""
    if not field.layout or array.ndim != len(field.shape):
        return ""
    channels = 0 if field.layout == "CHW" else -1
    if array.shape[channels] != field.shape[channels]:
        return ""
    return ("; a field's images share one size: resize them in the dataset (in torchvision, "
            "transform=transforms.Resize((H, W)), or Resize(S) and CenterCrop(S)), or for an image folder use "
            "`prep build FOLDER DB --size WxH`, which resizes and centre-crops")


def _channels_hint(field, array):
    """What to do about an image of other channels than the first one's (a
    gray or RGBA file among RGB photographs, opened without convert())."""
    if field.layout not in ("HWC", "CHW") or array.dtype != np.uint8 or array.ndim not in (2, 3):
        return ""
    return ("; a field's images share one number of channels: convert each as torchvision's ImageFolder does "
            "(Image.open(path).convert('RGB'), or 'L' for gray)")


def _length_hint(field, array):
    """What to do about a sequence whose length differs from the first
    one's (token ids, a time series): declare the dim variable."""
    if field.layout or array.ndim != len(field.shape) or array.ndim == 0:
        return ""
    shape = [-1 if d != a else d for d, a in zip(field.shape, array.shape)]
    return (f"; where it varies from sample to sample (token ids, a time series), give the field as "
            f"schema={{'{field.name}': ('{field.dtype.name}', {shape}), ...}} (every field named): -1 marks a dim "
            f"each sample states, and granary.Dataset gives each sample's own shape back")


def _labels_as_given(fields, sample, split, label, classes):
    """The label as Python datasets often give it, made the scalar a db's
    label is: class names (a str, as a table's or a folder's name gives
    them) written as their index in `classes`, which they need; a
    one-element array (`np.array([3])`, a column of a table's rows,
    `y.unsqueeze(0)`) as its one value. Which field is the label: `label`
    if named, else, where no field is an integer scalar, one named like a
    label (a tuple's "target")."""
    if any(f.shape == () and f.dtype.kind in "iu" for f in fields) and label is None:
        return
    where = f"sample 0 of split '{split}'"
    for field, (_, value) in zip(fields, _named_values(sample, 0, split)):
        if field.name != label and (label is not None or field.name not in _LABEL_NAMES):
            continue
        if field.layout == TEXT_LAYOUT:
            if classes is None:
                raise InvalidArgumentError(
                    f"{where}: field '{field.name}' is the str {value!r}, a class name: pass classes=[...], the "
                    f"class names in label order (e.g. sorted(set(names))), and each is written as its index "
                    f"there; or write int labels")
            if len(set(classes)) != len(classes):
                twice = next(c for c in classes if classes.count(c) > 1)
                raise InvalidArgumentError(f"classes=: names {twice!r} twice; each class is named once")
            field.dtype, field.shape, field.layout = np.dtype(np.int64), (), ""
            field.classes = {name: k for k, name in enumerate(classes)}
        elif field.shape == (1,) and field.dtype.kind in "iuf":
            field.shape, field.squeezed = (), True


def _class_index(field, value, where):
    """A class name's index in classes=, as an int64 scalar."""
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{where}: field '{field.name}' holds class names (str), not "
                                   f"{type(value).__name__} {value!r}")
    index = field.classes.get(value)
    if index is None:
        known = list(field.classes)
        shown = ", ".join(map(repr, known[:10])) + (", ..." if len(known) > 10 else "")
        raise InvalidArgumentError(f"{where}: field '{field.name}' is {value!r}, which classes= does not name "
                                   f"({len(known)} classes: {shown})")
    return np.asarray(index, dtype=np.int64)


def _label_field(fields, label):
    """The field training predicts: `label` if named, else the one integer
    scalar field; among several, the one named like a label (label, target,
    y, ...), else the one int64 (bools are uint8); where no integer scalar
    is, the one float scalar named like a label (a tuple's "target"): a
    number to predict (regression). None if that leaves not exactly one."""
    names = [f.name for f in fields]
    if label is not None:
        if label not in names:
            raise InvalidArgumentError(f"label={label!r}: not a field of the db ({names})")
        field = fields[names.index(label)]
        if field.shape != () or field.dtype.kind not in "iuf":
            raise InvalidArgumentError(f"label={label!r}: is {field.dtype} of shape {field.shape}; a label is a "
                                       f"scalar: an integer class, or a float to predict")
        return label
    integer_scalars = [f for f in fields if f.shape == () and f.dtype.kind in "iu"]
    for narrower in (lambda f: True, lambda f: f.name in _LABEL_NAMES, lambda f: f.dtype == np.int64):
        chosen = [f.name for f in integer_scalars if narrower(f)]
        if len(chosen) == 1:
            return chosen[0]
    values = [f.name for f in fields if f.shape == () and f.dtype.kind == "f" and f.name in _LABEL_NAMES]
    if not integer_scalars and len(values) == 1:
        return values[0]
    return None


def _checked_label(value, regression, name, index, split):
    """A sample's label field `name`, checked: a class (returned: 0 or more)
    or, for a regression target, a finite value (returns -1: no class)."""
    if regression:
        if not np.isfinite(value):
            raise InvalidArgumentError(f"sample {index} of split '{split}': {name} is {float(value)}; a value to "
                                       f"predict is finite")
        return -1
    label = int(value)
    if label < 0:
        raise InvalidArgumentError(f"sample {index} of split '{split}': label {label} is negative; class labels are "
                                   f"0..N-1")
    return label


class _Batch:
    """Converted samples gathered for one call of the C++ writer: per field,
    a list of arrays; columns() stacks the fixed-shape ones."""

    def __init__(self, fields):
        self.fields = fields
        self.values = [[] for _ in fields]

    def __len__(self):
        return len(self.values[0])

    def add(self, arrays):
        for column, array in zip(self.values, arrays):
            column.append(array)

    def columns(self):
        out = []
        for field, column in zip(self.fields, self.values):
            out.append(column if field.variable else np.stack(column) if field.shape else np.array(column))
        self.values = [[] for _ in self.fields]
        return out


def _random_transforms(dataset):
    """The random augmentations in a dataset's transforms (torchvision's
    Random* classes and the other transforms that draw, inside Compose,
    RandomApply or nn.Sequential; a Subset's dataset's too), in order."""
    found = []

    def walk(transform, depth):
        if transform is None or depth > 16:
            return
        name = type(transform).__name__
        if (name.startswith("Random") or name in _RANDOM_TRANSFORMS) and name not in found:
            found.append(name)
        children = getattr(transform, "transforms", None)
        if children is None and hasattr(transform, "children") and callable(transform.children):
            children = list(transform.children())  # nn.Sequential, or a module of transforms
        if isinstance(children, (list, tuple)):
            for child in children:
                walk(child, depth + 1)

    for _ in range(16):  # Subset(Subset(ImageFolder)) ...
        for attribute in ("transform", "target_transform"):
            walk(getattr(dataset, attribute, None), 0)
        dataset = getattr(dataset, "dataset", None)
        if dataset is None:
            break
    return found


def _warn_of_random_transforms(dataset, split):
    """A transform that draws at random is drawn once when a db is written,
    and every epoch then reads that one draw: worth a warning, as it is
    rarely what a training script that augmented each epoch meant."""
    found = _random_transforms(dataset)
    if found:
        warnings.warn(f"granary.write: split '{split}': the dataset's transform draws at random ({', '.join(found)}); "
                      f"the db stores one draw per sample, which every epoch then reads. Write the samples without "
                      f"their augmentation (e.g. transforms.Resize((H, W))) and augment as they are read "
                      f"(granary.Loader(augment='crop,flip'), or granary.Dataset(transform=...))", stacklevel=3)


def _warn_of_float_pixels(sample, fields, split):
    """Float C x H x W images whose values are all k/255 in [0, 1] are
    ToTensor() of uint8 pixels: stored as float32 they take 4x the bytes of
    the pixels, which granary.Loader would scale to [0, 1] itself."""
    for field, (_, value) in zip(fields, _named_values(sample, 0, split)):
        if field.layout != "CHW" or field.dtype.kind != "f":
            continue
        array = _as_array(value)[0].astype(np.float64)
        if array.size and array.min() >= 0 and array.max() <= 1 and np.allclose(array * 255, np.round(array * 255),
                                                                                   atol=1e-3):
            warnings.warn(f"granary.write: split '{split}': field '{field.name}' holds {field.dtype.name} images "
                          f"of values k/255 (ToTensor() of 8-bit pixels): stored as they are, 4x the bytes of the "
                          f"pixels. Write the uint8 pixels instead (no ToTensor(): a PIL image or a uint8 array); "
                          f"granary.Loader and train scale them to [0, 1] as they read", stacklevel=4)


def _warn_of_float64(fields, split):
    """float64 fields (NumPy's and scikit-learn's default) are stored as they
    are, 8 bytes a value, where train and granary.Loader compute in float32."""
    wide = [f.name for f in fields if f.dtype == np.float64 and f.origin != "schema="]  # schema= said so
    if wide:
        names = ", ".join(f"'{name}'" for name in wide)
        warnings.warn(f"granary.write: split '{split}': field(s) {names} hold float64 values (NumPy's default): "
                      f"stored as they are, twice float32's bytes, while train and granary.Loader compute in "
                      f"float32; .astype(np.float32) halves them (or schema= with 'float32')", stacklevel=4)


def _warn_of_vector_label(fields, sample, split, label_name, stacklevel):
    """A label given as a vector where train and granary.Loader read a
    scalar (a class's index, or a value): a one-hot vector (Keras's habit),
    several classes at once, a box. The db keeps it (granary.Dataset reads
    every field), but has no label for them: said at the first sample, not
    at the first training run."""
    if label_name is not None:
        return
    for field, (_, value) in zip(fields, _named_values(sample, 0, split)):
        if field.name not in _LABEL_NAMES or field.variable or not field.shape or field.dtype.kind not in "iuf":
            continue
        array = _as_array(value)[0]
        one_hot = array.ndim == 1 and array.size > 1 and np.count_nonzero(array) == 1 and array.max() == 1
        what = f"a one-hot vector (of class {int(array.argmax())})" if one_hot else "not one value"
        fix = ("write its class as an int (int(y.argmax())) to train on it" if one_hot else
               "train and granary.Loader train on one class or one value a sample")
        warnings.warn(f"granary.write: split '{split}': field '{field.name}' is {field.describe()}, {what}: the db "
                      f"will have no label for train and granary.Loader (granary.Dataset reads every field); "
                      f"{fix}", stacklevel=stacklevel)
        return


_IMAGE_FILES = ((b"\xff\xd8\xff", "JPEG"), (b"\x89PNG\r\n\x1a\n", "PNG"), (b"RIFF", "WebP"))


def _warn_of_encoded_images(fields, sample, split, stacklevel):
    """Image files' bytes (a web dataset's .jpg, a Parquet column of PNGs)
    are stored as they are: bytes of any length, which train and
    granary.Loader, reading pixels of one shape, cannot batch. Said at the
    first sample, with how to write pixels instead."""
    for field, (_, value) in zip(fields, _named_values(sample, 0, split)):
        if field.shape is not None or field.layout == TEXT_LAYOUT:
            continue
        head = bytes(_as_array(value)[0][:12])
        kind = next((name for magic, name in _IMAGE_FILES if head.startswith(magic)), None)
        if kind == "WebP" and head[8:12] != b"WEBP":
            kind = None
        if kind:
            warnings.warn(f"granary.write: split '{split}': field '{field.name}' holds {kind} files' bytes: stored "
                          f"as they are, which train and granary.Loader (they read pixels of one shape) cannot "
                          f"batch. Decode and resize them in the dataset (PIL.Image.open(io.BytesIO(b))"
                          f".convert('RGB').resize((S, S))), or save them into class folders for `prep build "
                          f"--size S`, which decodes and resizes", stacklevel=stacklevel)


def _are_columns(values):
    """Whether `values` are arrays (numpy or torch) with as many rows each
    but not one shape: the columns of a table, not samples alike."""
    arrays = all(isinstance(v, np.ndarray) or type(v).__name__ == "Tensor" for v in values)
    if not arrays or any(v.ndim == 0 for v in values):
        return False
    return len({len(v) for v in values}) == 1 and len({tuple(v.shape) for v in values}) > 1


def _refuse_tables(samples, splits):
    """Two shapes of tabular data that iterate as something else: a pandas
    DataFrame gives its column names, and a dict of equally long arrays
    ({"features": X, "label": y}) would be read as splits named by its keys.
    A tuple of such arrays ((X, y), as TensorDataset takes them) would be
    read as that many samples. All refused, saying how their rows are
    written."""
    rows = "[{'features': x, 'label': y} for x, y in zip(X, y)]"
    for name, dataset in splits.items():
        if isinstance(dataset, (tuple, list)) and 2 <= len(dataset) <= 8 and _are_columns(dataset):
            shapes = ", ".join(str(list(c.shape)) for c in dataset)
            raise InvalidArgumentError(
                f"split '{name}' is a {type(dataset).__name__} of {len(dataset)} arrays of {len(dataset[0])} rows "
                f"(shapes {shapes}): columns, which would be read as {len(dataset)} samples; write their rows: "
                f"zip(X, y) (list(zip(X, y)) for val_fraction or workers), or torch's TensorDataset(X, y)")
        if type(dataset).__module__.split(".")[0] == "pandas" and hasattr(dataset, "columns"):
            raise InvalidArgumentError(
                f"split '{name}' is a pandas DataFrame, which iterates over its column names, not its rows: write "
                f"it as a CSV table for prep (df.to_csv('t.csv', index=False), then prep build t.csv db: text "
                f"columns one-hot encoded, statistics recorded), or give its rows as samples: "
                f"X = df[feature_columns].to_numpy(np.float32), y = df['label'].to_numpy(), then {rows}")
    if not isinstance(samples, dict) or len(samples) < 2:
        return
    splits_named = {"train", "val", "validation", "test"}
    lengths = {len(v) if isinstance(v, np.ndarray) or type(v).__name__ == "Tensor" else None for v in samples.values()}
    if None not in lengths and len(lengths) == 1 and not set(samples) <= splits_named:
        raise InvalidArgumentError(
            f"samples is a dict of {len(samples)} arrays of {lengths.pop()} rows ({', '.join(map(repr, samples))}): "
            f"a dict's keys name splits ({{'train': samples, 'test': ...}}); columns are written as samples: {rows}")

