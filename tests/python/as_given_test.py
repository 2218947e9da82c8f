#!/usr/bin/python3
"""Images, datasets and models as newcomers bring them: PIL images in the
mode a file opened without convert() has (a palette PNG, a CMYK JPEG, a
1-bit scan) written as the pixels they show, as prep decodes the same
files; arrays shaped like images that train would not read as one (floats
channels last, a batch dim of one left on) warned of at the first sample;
an exception of the user's dataset noted with the item it was reading; a
model trained on other classes (a file train saved, torchvision's ResNet)
fine-tuned on a db's with train --new-head (its head alone with --freeze),
and one its own script froze in part.

    GRANARY_BUILD=build /usr/bin/python3 tests/python/as_given_test.py
"""
import os
import unittest
import warnings

import numpy as np
import torch
from PIL import Image

from testenv import PREP, TRAIN, FolderTest, run  # puts the build's granary on sys.path
import granary  # noqa: E402


def photo(seed, size=24):
    """An RGB image of smooth colours (a photograph's kind: JPEG keeps it close)."""
    y, x = np.mgrid[0:size, 0:size] / size
    rng = np.random.default_rng(seed)
    channels = [np.sin(x * rng.uniform(1, 6) + y * rng.uniform(1, 6) + rng.uniform(0, 6)) for _ in range(3)]
    return Image.fromarray((np.stack(channels, axis=2) * 120 + 128).astype(np.uint8))


def written_images(db):
    """Each sample's image of a db as a uint8 array, as stored (H x W x C, or 1 x H x W for gray)."""
    dataset = granary.Dataset(db)
    return [dataset[k][granary.describe(db)["input_field"]].numpy() for k in range(len(dataset))]


class AsGivenTest(FolderTest):
    def test_pil_images_of_any_mode_are_written_as_the_pixels_they_show(self):
        # A folder as people keep it: PNGs saved with a palette, a CMYK JPEG from a print workflow.
        for name in ("a", "b"):
            os.makedirs(self.path(f"raw/{name}"))
        files = []
        for k, (mode, ext) in enumerate([("P", "png"), ("CMYK", "jpg"), ("P", "png"), ("RGB", "png")]):
            path = self.path(f"raw/{'ab'[k % 2]}/{k}.{ext}")
            photo(k).convert(mode).save(path)
            files.append(path)
        with Image.open(files[0]) as opened:
            self.assertEqual(opened.mode, "P")  # what Image.open gives a dataset that does not convert()

        class Opened(torch.utils.data.Dataset):  # a custom dataset's __getitem__: Image.open, no convert()
            def __len__(self):
                return len(files)

            def __getitem__(self, k):
                return Image.open(sorted(files)[k]), int(sorted(files)[k].split("/")[-2] == "b")

        granary.write(self.path("opened.db"), Opened(), progress=False)
        run(PREP, "build", self.path("raw"), self.path("prep.db"), "--size", "24")
        opened, decoded = written_images(self.path("opened.db")), written_images(self.path("prep.db"))
        for path, image, prepped in zip(sorted(files), opened, decoded):
            with Image.open(path) as source:
                shown = np.asarray(source.convert("RGB"))
            self.assertEqual(image.shape, (24, 24, 3), path)
            np.testing.assert_array_equal(image, shown, err_msg=path)  # the colours, not palette indices
            np.testing.assert_array_equal(image, prepped, err_msg=path)  # as prep decodes the file
        # A 1-bit scan is gray pixels of 0 and 255 (its array's 0 and 1 would read as black).
        scans = [(photo(k).convert("1"), k % 2) for k in range(4)]
        granary.write(self.path("scans.db"), scans, progress=False)
        pixels = written_images(self.path("scans.db"))
        self.assertEqual(pixels[0].shape, (1, 24, 24))
        np.testing.assert_array_equal(pixels[0][0], np.asarray(scans[0][0].convert("L")))
        self.assertEqual(set(np.unique(np.concatenate(pixels))), {0, 255})

    def test_image_shaped_arrays_train_would_not_read_as_images_are_warned_of(self):
        rng = np.random.default_rng(0)
        cases = {
            "hwc": (rng.random((16, 16, 3), dtype=np.float32), "channels last (H x W x C)"),
            "batched": (torch.rand(1, 3, 16, 16), "[1, 3, 16, 16], an image with a batch dim of one"),
            "batched_pixels": (rng.integers(0, 255, (1, 16, 16, 3), dtype=np.uint8), "a batch dim of one"),
            "chw": (rng.random((3, 16, 16), dtype=np.float32), None),
            "pixels": (rng.integers(0, 255, (16, 16, 3), dtype=np.uint8), None),
            "points": (rng.random((100, 3), dtype=np.float32), None),
        }
        for name, (value, said) in cases.items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                granary.write(self.path(f"{name}.db"), [(value, k % 2) for k in range(8)], progress=False)
            shapes = [str(w.message) for w in caught if "do not read it as an image" in str(w.message)]
            if said is None:
                self.assertEqual(shapes, [], name)
                continue
            self.assertEqual(len(shapes), 1, name)
            self.assertIn(said, shapes[0])
            self.assertEqual(caught[0].filename, __file__)  # on the user's line
        # What the warning foretells: train refuses the channels-last db.
        done = run_failing(TRAIN, "--db", self.path("hwc.db"), "--epochs", "1")
        self.assertIn("[16, 16, 3]", done)

    def test_an_exception_of_the_dataset_is_noted_with_the_item_it_was_reading(self):
        class Broken(torch.utils.data.Dataset):
            def __len__(self):
                return 100  # one more than it has

            def __getitem__(self, k):
                if k == 37:
                    raise ValueError("cannot identify image file 'photos/37.jpg'")
                if k >= 99:
                    raise IndexError(k)
                return np.full(4, k, np.float32), k % 2

        for workers in (1, 2):
            with self.assertRaises(ValueError) as raised:
                granary.write(self.path(f"broken{workers}.db"), Broken(), workers=workers, progress=False)
            self.assertIn("granary.write: raised by dataset[37], read for split 'train'", raised.exception.__notes__)
        with self.assertRaises(IndexError) as raised:
            granary.write(self.path("short.db"), torch.utils.data.Subset(Broken(), range(38, 100)), progress=False)
        self.assertIn("len(dataset) is 62, so dataset[0] to dataset[61] are read", raised.exception.__notes__[0])

        def camera():
            for k in range(30):
                if k == 12:
                    raise OSError("the camera went away")
                yield np.full(4, k, np.float32), k % 2

        with self.assertRaises(OSError) as raised:
            granary.write(self.path("camera.db"), {"test": camera()}, progress=False)
        self.assertEqual(raised.exception.__notes__,
                         ["granary.write: raised by the iterable of split 'test' when asked for its sample 12"])
        self.assertFalse(os.path.exists(self.path("camera.db")))

    def test_a_model_trained_on_other_classes_is_fine_tuned_with_a_new_head(self):
        images = [photo(k, 32) for k in range(240)]
        granary.write(self.path("ten.db"), [(im, k % 10) for k, im in enumerate(images)], val_fraction=0.2,
                      progress=False)
        granary.write(self.path("three.db"), [(im, k % 3) for k, im in enumerate(images[:90])], val_fraction=0.2,
                      classes=["cat", "dog", "bird"], progress=False)
        run(TRAIN, "--db", self.path("ten.db"), "--model", "convnet", "--epochs", "1", "--save", self.path("ten.pt"))
        # Without --new-head: the outputs are named, and the flag that changes them.
        refused = run_failing(TRAIN, "--db", self.path("three.db"), "--model", self.path("ten.pt"), "--epochs", "1")
        self.assertIn("gives [2, 10], training needs [2, 3] (3 classes); to fine-tune it on the db's classes, "
                      "--new-head replaces its last linear layer with one of 3 outputs", refused)
        done = run(TRAIN, "--db", self.path("three.db"), "--model", self.path("ten.pt"), "--new-head", "--epochs", "1",
                   "--save", self.path("three.pt"))
        self.assertIn("(10 outputs), replaced by one of 3, initialised at random", done.stdout)
        self.assertEqual(granary.model_info(self.path("three.pt"))["classes"], ["cat", "dog", "bird"])
        before, after = torch.jit.load(self.path("ten.pt")), torch.jit.load(self.path("three.pt"))
        kept = dict(before.named_parameters())
        for name, weight in after.named_parameters():
            if weight.shape != kept[name].shape:  # the head's weight and bias, made anew
                self.assertEqual((weight.shape[0], kept[name].shape[0]), (3, 10), name)
            else:  # the rest fine-tuned from where it was: one epoch moves it a little
                cosine = torch.nn.functional.cosine_similarity(weight.flatten(), kept[name].flatten(), dim=0)
                self.assertGreater(cosine.item(), 0.9, name)
        # A model of someone else's: torchvision's ResNet, 1000 ImageNet classes.
        import torchvision
        torch.jit.script(torchvision.models.resnet18()).save(self.path("resnet18.pt"))
        done = run(TRAIN, "--db", self.path("three.db"), "--model", self.path("resnet18.pt"), "--new-head",
                   "--epochs", "1", "--batch-size", "16")
        self.assertIn("'fc' (1000 outputs), replaced by one of 3", done.stdout)
        self.assertIn("epoch 1/1", done.stdout)
        # ImageNet's model takes RGB; a db of gray images is told how to give it that.
        granary.write(self.path("gray.db"), [(im.convert("L"), k % 3) for k, im in enumerate(images[:30])],
                      progress=False)
        refused = run_failing(TRAIN, "--db", self.path("gray.db"), "--model", self.path("resnet18.pt"), "--new-head")
        self.assertIn("to have 3 channels, but got 1 channels instead; the db's images are gray (1 channel) and the "
                      "model takes 3 (RGB): build the db with 3 channels", refused)
        # Where it means nothing: a model train builds, and a number to predict.
        refused = run_failing(TRAIN, "--db", self.path("three.db"), "--model", "convnet", "--new-head")
        self.assertIn("--new-head: replaces the last layer of a model file (--model FILE.pt)", refused)
        granary.write(self.path("ages.db"), [(im, float(k)) for k, im in enumerate(images[:40])], progress=False)
        refused = run_failing(TRAIN, "--db", self.path("ages.db"), "--model", self.path("ten.pt"), "--new-head")
        self.assertIn("--new-head: gives a model one output per class, and the db's label 'target' is a number to "
                      "predict", refused)

    def test_a_model_frozen_but_its_head_trains_its_head_alone(self):
        images = [photo(k, 32) for k in range(120)]
        granary.write(self.path("f10.db"), [(im, k % 10) for k, im in enumerate(images)], progress=False)
        granary.write(self.path("f3.db"), [(im, k % 3) for k, im in enumerate(images[:60])], val_fraction=0.2,
                      classes=["cat", "dog", "bird"], progress=False)
        run(TRAIN, "--db", self.path("f10.db"), "--model", "convnet", "--epochs", "1", "--save", self.path("f10.pt"))
        done = run(TRAIN, "--db", self.path("f3.db"), "--model", self.path("f10.pt"), "--new-head", "--freeze",
                   "--epochs", "2", "--save", self.path("f3.pt"))
        self.assertRegex(done.stdout, r"\(all but its last linear layer, 'fc2', frozen: 3075 of \d+ parameters train\)")
        before, after = dict(torch.jit.load(self.path("f10.pt")).named_parameters()), torch.jit.load(self.path("f3.pt"))
        for name, weight in after.named_parameters():
            if not name.startswith("fc2."):
                self.assertTrue(torch.equal(weight, before[name]), name)  # kept as it was, to the bit
        # The saved file fine-tunes whole in a later run without --freeze.
        run(TRAIN, "--db", self.path("f3.db"), "--model", self.path("f3.pt"), "--epochs", "1", "--save",
            self.path("f3_whole.pt"))
        whole = dict(torch.jit.load(self.path("f3_whole.pt")).named_parameters())
        self.assertFalse(torch.equal(whole["conv1.weight"], dict(after.named_parameters())["conv1.weight"]))
        # torchvision's ResNet: its BatchNorm statistics are kept too (the module in eval mode).
        import torchvision
        torch.jit.script(torchvision.models.resnet18()).save(self.path("r18.pt"))
        run(TRAIN, "--db", self.path("f3.db"), "--model", self.path("r18.pt"), "--new-head", "--freeze", "--epochs",
            "1", "--batch-size", "16", "--save", self.path("r18_3.pt"))
        kept = dict(torch.jit.load(self.path("r18.pt")).named_buffers())
        for name, buffer in torch.jit.load(self.path("r18_3.pt")).named_buffers():
            self.assertTrue(torch.equal(buffer, kept[name]), name)
        refused = run_failing(TRAIN, "--db", self.path("f3.db"), "--model", "convnet", "--freeze")
        self.assertIn("--freeze: keeps a model file's trained layers (--model FILE.pt) as they are", refused)

    def test_a_model_its_own_script_froze_in_part_trains_the_rest(self):
        # A backbone whose requires_grad the user's script turned off before scripting: two ranks, the rest trains
        # (it crashed the ranks: the gradient sync hooked parameters that have no gradient).
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.body = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
                self.fc = torch.nn.Linear(8, 3)

            def forward(self, x):
                return self.fc(self.body(x))

        net = Net()
        for p in net.body.parameters():
            p.requires_grad_(False)
        torch.jit.script(net).save(self.path("part.pt"))
        granary.write(self.path("p3.db"), [(photo(k, 16), k % 3) for k in range(64)], progress=False)
        for sync in ("bucketed", "after-backward"):
            run(TRAIN, "--db", self.path("p3.db"), "--model", self.path("part.pt"), "--ranks", "2", "--epochs", "1",
                "--sync", sync, "--save", self.path(f"part_{sync}.pt"))
            trained = dict(torch.jit.load(self.path(f"part_{sync}.pt")).named_parameters())
            for name, weight in net.named_parameters():
                self.assertEqual(torch.equal(trained[name], weight), name.startswith("body."), (sync, name))

    def test_an_imbalanced_split_is_told_beyond_its_accuracy_and_weighed_on_request(self):
        # 95 of 100 one class: a model that always answers it scores 0.95, as the accuracy alone would hide.
        rng = np.random.default_rng(0)
        rows = [(rng.random(8, dtype=np.float32), int(k % 20 == 7)) for k in range(600)]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            granary.write(self.path("rare.db"), {"train": rows[:500], "test": rows[500:]},
                          classes=["common", "rare"], progress=False)
        said = [str(w.message) for w in caught if "imbalanced" in str(w.message)]
        self.assertEqual(said, ["granary.write: the classes are imbalanced ('common' 95.0%, 'rare' 5.0% of the "
                                "samples): a model that always answers 'common' scores 95.0% accuracy. train reports "
                                "the balanced accuracy beside it, and --class-weights balanced weighs the loss by the "
                                "classes' rarity (in a loop of your own: "
                                "nn.CrossEntropyLoss(weight=granary.class_weights(db)))"])
        self.assertIn("the classes are imbalanced", run(PREP, "info", self.path("rare.db")).stdout)
        done = run(TRAIN, "--db", self.path("rare.db"), "--epochs", "2", "--lr", "0.0001", "--save",
                   self.path("rare.pt"))
        lines = done.stdout.splitlines()
        self.assertRegex(lines[-2], r"^epoch 2/2 .* test_acc 0\.9500  bal_acc 0\.5000 ")
        self.assertEqual(lines[-1], "train: split 'test' is imbalanced ('common' is 95% of it): recall per class "
                                    "common 1.00, rare 0.00; balanced accuracy 0.5000. The model answers 'common' "
                                    "for 100% of the samples: its accuracy 0.9500 is what always answering 'common' "
                                    "scores, and it has learnt little else (--class-weights balanced weighs the "
                                    "loss against the imbalance)")
        stopped = run(TRAIN, "--db", self.path("rare.db"), "--epochs", "3", "--lr", "0.0001", "--stop-at-accuracy",
                      "0.9").stderr
        self.assertIn("test accuracy 0.9500 after epoch 1", stopped)
        self.assertIn("stopping (but the eval split's largest class is 95% of it: a model that always answers it "
                      "scores 0.9500; a target above that asks for more", stopped)
        evaluated = run(TRAIN, "--db", self.path("rare.db"), "--model", self.path("rare.pt"), "--eval-only").stdout
        self.assertRegex(evaluated, r"acc 0\.9500  loss [0-9.]+  bal_acc 0\.5000  samples/s")
        done = run(TRAIN, "--db", self.path("rare.db"), "--epochs", "1", "--class-weights", "balanced", "--json")
        self.assertIn("train: --class-weights balanced: the loss weighs each class (samples in split 'train'): "
                      "common 0.526 (475), rare 10.000 (25)", done.stderr)
        import json
        last = json.loads(done.stdout.splitlines()[-1])
        self.assertIn("test_balanced_accuracy", json.dumps(last))
        # The same weights for a Python training loop: CrossEntropyLoss(weight=granary.class_weights(db)).
        self.assertEqual(granary.class_counts(self.path("rare.db")), [475, 25])
        self.assertEqual(granary.class_counts(self.path("rare.db"), "test"), [95, 5])
        torch.testing.assert_close(granary.class_weights(self.path("rare.db")), torch.tensor([500 / 950, 500 / 50]))
        # Where it means nothing: a number to predict.
        granary.write(self.path("values.db"), [(rng.random(8, dtype=np.float32), float(k)) for k in range(40)],
                      progress=False)
        refused = run_failing(TRAIN, "--db", self.path("values.db"), "--class-weights", "balanced")
        self.assertIn("--class-weights: weighs classes; the db's target 'target' is a number to predict", refused)
        with self.assertRaisesRegex(granary.InvalidArgumentError, "its label 'target' is a number to predict"):
            granary.class_counts(self.path("values.db"))
        with self.assertRaisesRegex(granary.NotFoundError, r"no split 'val' \(its splits: train, test\)"):
            granary.class_weights(self.path("rare.db"), "val")


def run_failing(*args):
    """The program's stderr, where it must exit non-zero."""
    import subprocess
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if done.returncode == 0:
        raise AssertionError(f"{' '.join(map(str, args))} succeeded:\n{done.stdout[-2000:]}")
    return done.stderr


if __name__ == "__main__":
    unittest.main()
