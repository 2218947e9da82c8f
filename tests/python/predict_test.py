#!/usr/bin/python3
"""A model `train --save`d, used on new image files from Python:
granary.load_image gives exactly the input training saw for that file (the
db's record of it, scaled and normalised as the model card says), the saved
model classifies the folder's images, and what load_image cannot know is
refused (a feature model, a file that is no image, a model without a card).

    GRANARY_BUILD=build /usr/bin/python3 tests/python/predict_test.py
"""
import io
import os
import shutil
import tempfile
import unittest

import numpy as np

from testenv import PREP, ROOT, TRAIN, run  # puts the build's granary on sys.path
import granary  # noqa: E402
import torch  # noqa: E402


class PredictTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from PIL import Image
        cls.tmp = tempfile.mkdtemp(prefix="granary-predict-test-")
        cls.folder = os.path.join(cls.tmp, "colours")
        rng = np.random.default_rng(6)
        for c, colour in enumerate(((200, 40, 40), (40, 200, 40), (40, 40, 200))):
            os.makedirs(os.path.join(cls.folder, f"class{c}"))
            for k in range(40):  # photographs of other sizes and shapes: resized and cropped by prep
                size = (int(rng.integers(20, 60)), int(rng.integers(20, 60)))
                pixels = np.clip(np.array(colour) + rng.normal(0, 30, size[::-1] + (3,)), 0, 255).astype(np.uint8)
                Image.fromarray(pixels).save(os.path.join(cls.folder, f"class{c}", f"{k:02d}.jpg"), quality=90)
        cls.db, cls.model = os.path.join(cls.tmp, "db"), os.path.join(cls.tmp, "model.pt")
        run(PREP, "build", cls.folder, cls.db, "--size", "16", "--no-progress")
        run(TRAIN, "--db", cls.db, "--epochs", "3", "--batch-size", "16", "--mean", "0.5", "--std", "0.25",
            "--save", cls.model)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_an_image_file_is_the_input_training_saw_and_is_classified(self):
        dataset = granary.Dataset(self.db, split="train")
        names = sorted(f"class{c}/{k:02d}.jpg" for c in range(3) for k in range(40))  # the db's order: by path
        model, info = torch.jit.load(self.model), granary.model_info(self.model)
        correct = 0
        for i, name in enumerate(names):
            path = os.path.join(self.folder, name)
            x = granary.load_image(path, self.model)
            stored = dataset[i]["image"].permute(2, 0, 1).float() / 255
            self.assertTrue(torch.allclose(x, (stored - 0.5) / 0.25, rtol=0, atol=1e-5), name)  # a pixel off: 0.016
            with open(path, "rb") as f:  # a file object, and the model card's dict, do the same
                self.assertTrue(torch.equal(granary.load_image(f, info), x))
            correct += info["classes"][int(model(x[None]).argmax())] == name.split("/")[0]
        self.assertGreater(correct / len(names), 0.9)

    def test_the_readmes_example_runs(self):
        import contextlib
        import re
        with open(os.path.join(ROOT, "README.md")) as f:
            block = next(b for b in re.findall(r"```python\n(.*?)```", f.read(), re.S) if "granary.load_image(" in b)
        photo = os.path.join(self.folder, "class2", "07.jpg")
        code = block.replace('"model.pt"', repr(self.model)).replace('"new_photo.jpg"', repr(photo))
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(code, {"torch": torch, "granary": granary})
        self.assertIn(printed.getvalue().strip(), ("class0", "class1", "class2"))

    def test_what_load_image_cannot_know_is_refused(self):
        with self.assertRaisesRegex(granary.InvalidArgumentError, r"notes\.txt: not a JPEG, PNG or WebP image"):
            path = os.path.join(self.tmp, "notes.txt")
            with open(path, "w") as f:
                f.write("not an image")
            granary.load_image(path, self.model)
        table = os.path.join(self.tmp, "t.csv")
        with open(table, "w") as f:
            f.write("a,b,label\n" + "".join(f"{i},{i % 5},{i % 2}\n" for i in range(60)))
        features_model = os.path.join(self.tmp, "mlp.pt")
        run(PREP, "build", table, os.path.join(self.tmp, "t.db"), "--no-progress")
        run(TRAIN, "--db", os.path.join(self.tmp, "t.db"), "--epochs", "1", "--save", features_model)
        with self.assertRaisesRegex(granary.InvalidArgumentError, r"the model takes \[2\] \(features\)"):
            granary.load_image(io.BytesIO(b""), features_model)
        plain = os.path.join(self.tmp, "plain.pt")
        torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), plain)
        with self.assertRaisesRegex(granary.FormatError, r"no granary.json in it"):
            granary.load_image(io.BytesIO(b""), plain)


if __name__ == "__main__":
    unittest.main()
