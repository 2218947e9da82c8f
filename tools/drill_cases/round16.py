"""Round 16 of the hostile drill (twenty-fourth session): images, datasets
and models as newcomers bring them. Palette PNGs opened without convert(),
float images channels last and a dataset that raises, written by
granary.write; a model of other classes fine-tuned with --new-head; an
imbalanced split whose accuracy is only its largest class's share, and
--class-weights; a torchrun script written for GPUs under launch."""
import textwrap

from drill_cases.common import FASHION, LAUNCH, PREP, PYTHON, TRAIN, granary_script as script, run

def round16(d, w):
    """Round 16's cases."""
    palette = script(w, "r16palette.py", """
        from PIL import Image
        rng = np.random.default_rng(0)
        images = [Image.fromarray(rng.integers(0, 255, (16, 16, 3), dtype=np.uint8)).convert("P") for _ in range(6)]
        granary.write(sys.argv[1], [(im, k % 2) for k, im in enumerate(images)], progress=False)
        print(granary.describe(sys.argv[1])["fields"][0], file=sys.stderr)
    """)
    d.case("granary.write of palette images (Image.open of a GIF or PNG, no convert()): the RGB pixels they show",
           [PYTHON, palette, w("r16palette.db")], 0, needle="'shape': [16, 16, 3], 'layout': 'HWC'")
    channels_last = script(w, "r16hwc.py", """
        rng = np.random.default_rng(0)
        granary.write(sys.argv[1], [(rng.random((16, 16, 3), dtype=np.float32), k % 2) for k in range(8)],
                      progress=False)
    """)
    d.case("granary.write of float images channels last (albumentations without ToTensorV2): warned of",
           [PYTHON, channels_last, w("r16hwc.db")], 0, needle="images channels last (H x W x C)")
    raising = script(w, "r16raises.py", """
        class Photos:
            def __len__(self):
                return 100
            def __getitem__(self, k):
                if k == 37:
                    raise OSError("image file is truncated")
                return np.full(4, k, np.float32), k % 2
        granary.write(sys.argv[1], Photos(), workers=2, progress=False)
    """)
    d.case("granary.write(workers=2) of a dataset whose item 37 raises: the exception, noted with its item",
           [PYTHON, raising, w("r16raises.db")], 1, lines=None,
           needle="granary.write: raised by dataset[37], read for split 'train'")
    new_head(d, w)
    imbalanced(d, w)
    gpus = w("r16gpus.py")
    with open(gpus, "w") as f:
        f.write(textwrap.dedent("""
            import os, torch
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
            torch.distributed.init_process_group(backend="nccl")
            model = torch.nn.Linear(4, 1).to(int(os.environ["LOCAL_RANK"]))
        """))
    d.case("launch of a torchrun script written for GPUs: its first error advised, and every GPU line listed",
           [LAUNCH, "--ranks", "2", "--", PYTHON, gpus], 1, lines=None,
           needle="its lines written for GPUs, each of which fails here in turn: ")


def new_head(d, w):
    """A model trained on 10 classes, given a db of 3."""
    db, three = w("r16ten.db"), w("r16three.db")
    run([PREP, "build", FASHION, db, "--limit", "400", "--no-progress"])
    run([TRAIN, "--db", db, "--epochs", "1", "--save", w("r16ten.pt")])
    regroup = script(w, "r16three.py", """
        d = granary.Dataset(sys.argv[1])
        granary.write(sys.argv[2], [(d[i]["image"].numpy()[0], int(d[i]["label"]) % 3) for i in range(300)],
                      val_fraction=0.2, classes=["a", "b", "c"], progress=False)
    """)
    run([PYTHON, regroup, db, three])
    d.case("train --model of a model of 10 classes on a db of 3: refused naming its outputs and --new-head",
           [TRAIN, "--db", three, "--model", w("r16ten.pt")], 1,
           needle="gives [2, 10], training needs [2, 3] (3 classes); to fine-tune it on the db's classes, --new-head")
    d.case("train --new-head: its last linear layer made anew for the db's 3 classes, fine-tuned",
           [TRAIN, "--db", three, "--model", w("r16ten.pt"), "--new-head", "--epochs", "1"], 0, report=True,
           needle="(10 outputs), replaced by one of 3, initialised at random")
    d.case("train --new-head with a model train builds: refused",
           [TRAIN, "--db", three, "--model", "convnet", "--new-head"], 1,
           needle="--new-head: replaces the last layer of a model file (--model FILE.pt)")


def imbalanced(d, w):
    """A split of 95% one class, and --class-weights on a number to predict."""
    rare = script(w, "r16rare.py", """
        rng = np.random.default_rng(0)
        rows = [(rng.random(8, dtype=np.float32), int(k % 20 == 7)) for k in range(600)]
        granary.write(sys.argv[1], {"train": rows[:500], "test": rows[500:]}, progress=False)
        granary.write(sys.argv[2], [(x, float(k)) for k, (x, _) in enumerate(rows)], progress=False)
    """)
    db, values = w("r16rare.db"), w("r16values.db")
    run([PYTHON, rare, db, values])
    d.case("train on a split of 95% one class, a model that answers it always: its accuracy named for what it is",
           [TRAIN, "--db", db, "--epochs", "1", "--lr", "0.0001"], 0, report=True,
           needle="its accuracy 0.9500 is what always answering '0' scores")
    d.case("train --class-weights balanced on a number to predict: refused",
           [TRAIN, "--db", values, "--class-weights", "balanced"], 1,
           needle="--class-weights: weighs classes; the db's target 'target' is a number to predict")
