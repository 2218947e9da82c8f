"""granary.pad_collate: DataLoader's collate_fn for a granary.Dataset whose
fields vary in length (token ids, audio clips, written with schema= and -1):
each such field padded to the batch's longest, with its lengths beside it.

    loader = DataLoader(granary.Dataset("words.db"), batch_size=32, shuffle=True,
                        collate_fn=granary.pad_collate)
    for batch in loader:
        batch["audio"]          # int16 N x longest, zeros after each clip
        batch["audio_length"]   # int64 N: each clip's own length
"""
import torch
from torch.utils.data import default_collate


class Sample(dict):
    """A granary.Dataset sample of a db whose fields vary in length: a dict of
    its fields that knows which of them vary (`varying`: a field's dims of
    -1 in the db's schema), so that pad_collate gives their lengths in every
    batch, one whose samples happen to share a length too."""

    def __init__(self, fields=(), varying=None):
        super().__init__(fields)
        self.varying = varying or {}


class SamplePair(tuple):
    """(input, target) of such a db (as_tuple=True), `varying` by position."""

    def __new__(cls, pair, varying=None):
        made = super().__new__(cls, pair)
        made.varying = varying or {}
        return made

    def __getnewargs__(self):
        return (tuple(self),)


def _padded(values, padding_value, dims=None):
    """The tensors `values`, of one dtype and number of dims, stacked and each
    padded at its end to the largest size in every dim; and their sizes in
    the dim that varies (N), or in every dim where more than one varies (N x
    dims); `dims`: the dims that vary, where the schema says (else those the
    batch's sizes differ in)."""
    sizes = torch.tensor([list(v.shape) for v in values], dtype=torch.int64)
    out = torch.full([len(values)] + sizes.max(0).values.tolist(), padding_value, dtype=values[0].dtype)
    for row, value in zip(out, values):
        row[tuple(slice(0, n) for n in value.shape)] = value
    varying = dims or (sizes != sizes[0]).any(0).nonzero().flatten().tolist()
    return out, (sizes[:, varying[0]] if len(varying) == 1 else sizes)


def _column(values, padding_value, where, dims=None):
    """One field of a batch: strs as a list, tensors of one shape stacked, of
    several shapes (or of a field whose schema `dims` vary) padded, with
    their lengths, the rest as DataLoader does."""
    if all(isinstance(v, str) for v in values):
        return list(values), None
    tensors = all(isinstance(v, torch.Tensor) for v in values)
    if dims and tensors and all(v.dim() > max(dims) for v in values) and len({v.dim() for v in values}) == 1:
        return _padded(values, padding_value, dims)
    if tensors and len({tuple(v.shape) for v in values}) > 1:
        if len({v.dim() for v in values}) > 1 or len({v.dtype for v in values}) > 1:
            raise TypeError(f"granary.pad_collate: {where} holds tensors of different dims or dtypes "
                            f"({sorted({str(v.dtype) + str(list(v.shape)) for v in values})[:4]}), not one field")
        return _padded(values, padding_value)
    return default_collate(values), None


def pad_collate(batch, padding_value=0):
    """A batch of granary.Dataset samples (dicts, or tuples with
    as_tuple=True) as DataLoader's default collate makes it, but a field
    whose tensors differ in shape is padded with `padding_value` at the end
    of each dim to the batch's largest, and its lengths (int64 N, in the dim
    that varies; N x dims where more than one does) come beside it: as
    "<field>_length" in a dict, as a (padded, lengths) pair in a tuple; a
    field the db's schema says varies (-1) comes so in every batch, one
    whose samples happen to share a length too. A
    text field's strs stay a list. For another padding value:
    functools.partial(granary.pad_collate, padding_value=-1)."""
    if not batch:
        raise ValueError("granary.pad_collate: an empty batch")
    first = batch[0]
    varying = getattr(first, "varying", {})  # a granary.Dataset's sample knows its fields that vary
    if isinstance(first, dict):
        out = {}
        for name in first:
            out[name], lengths = _column([s[name] for s in batch], padding_value, f"field '{name}'", varying.get(name))
            if lengths is not None:
                if f"{name}_length" in first:
                    raise ValueError(f"granary.pad_collate: field '{name}' varies in length and '{name}_length', "
                                     f"where its lengths go, is a field of the samples too")
                out[f"{name}_length"] = lengths
        return out
    if isinstance(first, (tuple, list)):
        columns = [_column([s[k] for s in batch], padding_value, f"item {k} of the samples", varying.get(k))
                   for k in range(len(first))]
        return tuple(value if lengths is None else (value, lengths) for value, lengths in columns)
    return _column(batch, padding_value, "the batch")[0]
