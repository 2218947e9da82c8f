"""How granary.write's samples become a db's fields: the schema inferred from
the first sample (a label as datasets give it made a scalar), each later
sample checked and converted to arrays of it, and converted samples gathered
into the columns the C++ writer takes (python/granary/writer.py uses them;
so do its worker processes). What is said of samples that are likely not
what was meant is in sample_advice.py."""
import sys

import numpy as np

from .errors import InvalidArgumentError

_TUPLE_NAMES = ("input", "target")
_LABEL_NAMES = ("label", "labels", "target", "targets", "y", "class")
_IMAGE_CHANNELS = (1, 3, 4)
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


# PIL modes whose array is not the colours the image shows (palette indices, bits of 0 and 1, other colour
# spaces), and the mode each is written in: the pixels torchvision's loader and prep's decoder give for it.
_PIL_SHOWN_AS = {"1": "L", "P": "RGB", "PA": "RGBA", "CMYK": "RGB", "YCbCr": "RGB", "LAB": "RGB", "HSV": "RGB",
                 "RGBX": "RGB"}

# dtypes the format lacks, and what to convert them to (the write refuses rather than choose).
_WIDER = {"float16": "float32", "bfloat16": "float32", "uint16": "int32", "uint32": "int64"}


def _names_mask(name):
    """Whether a field of this name holds masks: a palette or 1-bit PIL image
    in it is each pixel's class (a palette's index), as np.array(mask) gives
    it to a segmentation loss, not the colours it shows. A tuple's target is
    one: torchvision's VOCSegmentation gives (image, mask)."""
    n = name.lower()
    return n in _LABEL_NAMES or n == "gt" or any(w in n for w in ("mask", "seg", "label", "trimap", "annotation"))


def _as_array(value, where="a value", first=False, mask=False):
    """A sample's value as a numpy array, and what it was: "str" or "bytes"
    (a variable-length uint8 vector either way), else "".
    InvalidArgumentError, prefixed by `where`, for what no field holds, and
    for the `first` sample's dtypes the format lacks (a later sample's are
    converted to its field's dtype where that keeps their values). A PIL
    image is the pixels it shows, or with `mask` (_names_mask) its array."""
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
                                                " (make each of its members a field of the sample)") +
                                   _boxes_hint(value))
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
        kind = str(getattr(value, "dtype", "")).replace("torch.", "")
        if first and kind in _WIDER:
            raise _unstored(where, f"a torch.{kind} tensor", kind)
        value = value.detach().cpu()
        return (value.float() if kind == "bfloat16" else value).numpy(), ""  # numpy has no bfloat16
    try:
        array = np.asarray(value if mask else _shown_pixels(value))  # a PIL image, a list, a numpy value
    except ValueError:  # numpy: "setting an array element with a sequence ... inhomogeneous shape"
        raise InvalidArgumentError(f"{where}: is nested lists of different lengths, not one rectangular array; pad "
                                   f"its rows to one length, or give it as one sequence (see schema= and -1)") from None
    if array.dtype.kind in "OUS":
        what = "str values" if array.dtype.kind in "US" else "Python objects"
        raise InvalidArgumentError(f"{where}: is an array of {what} ({type(value).__name__}); a field holds "
                                   f"numbers, or one str or bytes" + _boxes_hint(value))
    if first and array.dtype.name in _WIDER:
        raise _unstored(where, f"{array.dtype.name}", array.dtype.name)
    return array, ""


def _boxes_hint(value):
    """What to do with a detection dataset's target as torchvision gives it
    (CocoDetection's list of dicts with "bbox", VOCDetection's parsed XML):
    its boxes as one array a sample; "" for any other value."""
    coco = isinstance(value, (list, tuple)) and value and all(isinstance(a, dict) and "bbox" in a for a in value)
    voc = isinstance(value, dict) and "annotation" in value
    if not (coco or voc):
        return ""
    source = "CocoDetection's annotations" if coco else "VOCDetection's XML"
    boxes = ("[a['bbox'] + [a['category_id']] for a in target]" if coco else
             "[[float(o['bndbox'][k]) for k in ('xmin', 'ymin', 'xmax', 'ymax')] + [classes.index(o['name'])] "
             "for o in target['annotation']['object']]")
    return (f". A detection dataset ({source}): write each sample's boxes as one float32 array, "
            f"np.array({boxes}, np.float32).reshape(-1, 5), with schema= giving its first dim as -1 (README, "
            f"\"Masks and boxes\")")


def _shown_pixels(value):
    """A PIL image in a mode whose array is not its colours (a palette PNG or
    GIF, a CMYK JPEG, a 1-bit scan) as the image it shows, in the mode prep
    and torchvision's loader decode it to; any other value as it is."""
    pil = sys.modules.get("PIL.Image")  # imported wherever a PIL image was made
    if pil is None or not isinstance(value, pil.Image) or value.mode not in _PIL_SHOWN_AS:
        return value
    return value.convert(_PIL_SHOWN_AS[value.mode])


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
    array, kind = _as_array(value, f"{where}: field '{name}'", first=True, mask=_names_mask(name))
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
        array, kind = _as_array(value, f"{where}: field '{field.name}'", mask=_names_mask(field.name))
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
    if _names_mask(field.name):
        return ("; a field's masks share one size: resize each image and its mask together (torchvision's "
                "VOCSegmentation(..., transforms=f), f(image, mask) resizing both), the mask with nearest "
                "neighbours (Image.NEAREST, InterpolationMode.NEAREST), which blends no two pixels' classes")
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
    label (a tuple's "target"). A field schema= declares stays as declared."""
    if any(f.shape == () and f.dtype.kind in "iu" for f in fields) and label is None:
        return
    where = f"sample 0 of split '{split}'"
    for field, (_, value) in zip(fields, _named_values(sample, 0, split)):
        named = field.name == label or (label is None and field.name in _LABEL_NAMES)
        if not named or field.origin == "schema=":
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
