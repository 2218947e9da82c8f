"""granary.load_table: a table's rows as the features a model `train --save`d
reads, for predictions on rows that have no db, as Kaggle's test.csv has
none (python/granary/__init__.py exports it)."""
import sys
import tempfile

import torch

from .errors import FormatError, InvalidArgumentError
from .paths import os_bytes, os_str


def load_table(table, model):
    """The rows of the CSV file `table` (or .csv.gz, .csv.zst) as the input
    of `model` (a file `train --save` wrote on a table's db, or
    granary.model_info's dict of one): `(x, rows)`, x a float32 N x F tensor
    (model(x) gives the logits, or a regression model's predicted values),
    rows each data row's fields as a dict by column name, in the file's
    order (rows[i]["PassengerId"] for a submission). Each row's features are
    made as `prep build` made its db's: the db's columns in its order,
    whatever the table's (columns it has no feature of, the label among
    them, left out), a text column's one-hot categories; a missing value, or
    a text value the db never had, is NaN, which a model train saved takes
    as its feature's mean; their counts are said on stderr.
    InvalidArgumentError naming the file (and line) for a column of the
    model's the table lacks, a row of another field count, a value that is
    no number; and for a model that reads no table."""
    from . import _native, model_info
    info = model if isinstance(model, dict) else model_info(model)
    if info is None:
        raise FormatError(f"{os_str(model, 'model')}: no granary.json in it (saved from Python, not by train "
                          f"--save): load_table does not know its columns")
    names = info.get("input_names")
    if not names:
        raise InvalidArgumentError(f"load_table: the model's card names no table columns: it reads "
                                   f"{info.get('input_field')} {list(info.get('input_shape', []))} (images: "
                                   f"granary.load_image), or it was saved before 2026-12 (train --save it again)")
    who = "the model" if isinstance(model, dict) else f"model {os_str(model, 'model')}"
    features, header, rows, missing, unseen, notes = _native.encode_table(
        os_bytes(table, "table"), names, who, tempfile.gettempdir())
    said = [f"{n} missing in '{c}'" for c, n in missing.items()] + [
        f"{n} in '{c}' none of its categories" for c, n in unseen.items()]
    if said:
        print(f"granary.load_table: {os_str(table, 'table')}: values taken as NaN (each its feature's mean to a "
              f"model train saved): {', '.join(said)}", file=sys.stderr)
    for note in notes:  # the columns left out; the lines above its header, whose notes name the table
        if note.startswith("column(s) none of"):
            print(f"granary.load_table: {os_str(table, 'table')}: {note}", file=sys.stderr)
        elif note.startswith(os_str(table, "table") + ": "):
            print(f"granary.load_table: {note}", file=sys.stderr)
    return torch.from_numpy(features), [dict(zip(header, row)) for row in rows]
