"""One-shot image episodes for the attention-paths theory: Omniglot in distribution, FashionMNIST and
handwritten digits out of distribution (docs/attention_paths.md, "One-shot images").

An **image set** is a stack of 32 × 32 images with a class and a "drawer" per image (Omniglot: the
person who drew it; the other sets: the image itself). Every image is brought to the same form by
:func:`standardise_image`: foreground high, resized to 32 × 32 by area averaging (PIL's box filter),
then shifted and scaled to mean 0 and variance 1 over its 1024 pixels.

An **episode** is two supports (one image of each of two classes, in random order) and a query (an
image of one of the two classes by another drawer than that class's support); the label is +1 when the
query is of the class of support 1, −1 when of support 2. Labels are balanced (half of each, shuffled).
An **N-way episode** (``ways`` = N ≥ 3) has N supports of N different classes and a query of one of them;
its label is the position of the query's class among the supports (balanced, shuffled), its target the
one-hot vector of that position (M = N outputs, docs/attention_paths.md §16). Two ways are the task above.

**Tokens** (:func:`episode_tokens`): each image is cut into 16 patches of 8 × 8 (row-major), so an
episode has T = 48 tokens (support 1, support 2, query); token t is the column

    x_t = (patch (64 pixels), 8 · one-hot position of the patch (16), 8 · one-hot role (3)) ∈ ℝ^{N0},  N0 = 83,

the position and role parts frozen (never learned) and scaled by :data:`EMBEDDING_SCALE` = 8, the root
mean square norm of a standardised patch (√64), so that the three parts of a token have the same mean
squared norm (64 each). With unit one-hots the role and position parts carried 1/64 of a token's squared
norm and a network trained by gradient descent sat on its initial plateau (output ≈ 0, loss ≈ 1) for
about 1000 Adam steps; with equal parts it leaves it within about 200 (docs/attention_paths.md, "One-shot
images"). Nothing here needs torch.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dotattn.core.validation import ParameterError, check_int, check_number

__all__ = [
    "IMAGE_SIZE",
    "PATCH",
    "N_PATCHES",
    "ROLES",
    "TOKENS",
    "N0",
    "ImageSet",
    "standardise_image",
    "read_omniglot",
    "read_idx_set",
    "read_fashion_mnist",
    "read_digits",
    "CharacterSplit",
    "split_characters",
    "Episodes",
    "make_episodes",
    "episode_tokens",
    "FASHION_CLASSES",
    "DIGIT_CLASSES",
    "DEFAULT_FASHION_MNIST",
    "EMBEDDING_SCALE",
    "MAX_WAYS",
    "roles",
    "token_dim",
    "episode_length",
    "FASHION_NAMES",
]

IMAGE_SIZE = 32
PATCH = 8
N_PATCHES = (IMAGE_SIZE // PATCH) ** 2
ROLES: tuple[str, ...] = ("support 1", "support 2", "query")
TOKENS = len(ROLES) * N_PATCHES
N0 = PATCH * PATCH + N_PATCHES + len(ROLES)
"""Token dimension: 64 pixels, 16 positions, 3 roles."""
EMBEDDING_SCALE = float(PATCH)
"""Height of the position and role one-hots: √(PATCH²) = 8, the root mean square norm of a patch of an image
standardised to mean 0 and variance 1, so that pixels, position and role have equal mean squared norms."""
FASHION_CLASSES: tuple[int, int] = (0, 1)
"""FashionMNIST labels used out of distribution: 0 = T-shirt/top, 1 = trouser."""
DIGIT_CLASSES: tuple[int, int] = (0, 1)
FASHION_NAMES: tuple[str, ...] = (
    "T-shirt/top",
    "trouser",
    "pullover",
    "dress",
    "coat",
    "sandal",
    "shirt",
    "sneaker",
    "bag",
    "ankle boot",
)
"""The ten FashionMNIST classes; an N-way study uses classes 0..N−1 (and the digits 0..N−1)."""
MAX_WAYS = 10
"""Most classes of an episode: FashionMNIST and the digits have 10."""


def roles(ways: int = 2) -> tuple[str, ...]:
    """Token roles of an episode of ``ways`` supports: support 1, …, support N, query."""
    return tuple(f"support {i + 1}" for i in range(ways)) + ("query",)


def token_dim(ways: int = 2) -> int:
    """N0 of an episode of ``ways`` supports: 64 pixels, 16 positions, ways + 1 roles (83 for two ways)."""
    return PATCH * PATCH + N_PATCHES + ways + 1


def episode_length(ways: int = 2) -> int:
    """T = 16 (ways + 1) tokens."""
    return (ways + 1) * N_PATCHES


DEFAULT_FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
"""Where Debian's ``dataset-fashion-mnist`` package puts the four IDX files."""
IDX_FILES = ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", "train-images-idx3-ubyte", "train-labels-idx1-ubyte")


@dataclass(frozen=True)
class ImageSet:
    """Standardised images (n, 32, 32), their class (n,) and drawer (n,) indices, and the class names."""

    name: str
    images: np.ndarray
    classes: np.ndarray
    drawers: np.ndarray
    class_names: tuple[str, ...]

    @property
    def n_classes(self) -> int:
        return len(self.class_names)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "images": int(len(self.images)), "classes": self.n_classes}


def standardise_image(pixels: np.ndarray) -> np.ndarray:
    """A 2-D array of intensities in [0, 1], foreground high, as a 32 × 32 image of mean 0 and variance 1
    (PIL box-filter resize, i.e. the area average of the source pixels; constant images are refused)."""
    from PIL import Image

    a = np.asarray(pixels, dtype=np.float32)
    if a.ndim != 2 or min(a.shape) < 1:
        raise ParameterError(f"an image must be a 2-D array, got shape {a.shape}")
    x = np.asarray(Image.fromarray(a, mode="F").resize((IMAGE_SIZE, IMAGE_SIZE), Image.Resampling.BOX), dtype=float)
    sd = float(x.std())
    if not np.isfinite(sd) or sd <= 1e-12:
        raise ParameterError("an image is constant (blank): it cannot be standardised")
    return (x - x.mean()) / sd


# -- Omniglot ---------------------------------------------------------------------------------------


def _png_entries(root: Path) -> Iterator[tuple[str, tuple[str, ...], bytes]]:
    """(where, path parts, bytes) of every .png in ``root``: a .zip file, or a folder holding .zip files
    and/or the extracted layout."""
    zips = [root] if root.is_file() else sorted(root.rglob("*.zip"))
    for z in zips:
        try:
            with zipfile.ZipFile(z) as zf:
                for name in zf.namelist():
                    if name.lower().endswith(".png"):
                        yield f"{z}:{name}", tuple(p for p in name.split("/") if p), zf.read(name)
        except (zipfile.BadZipFile, OSError) as err:
            raise ParameterError(f"--omniglot: {z} is not a readable zip file ({err})") from None
    if root.is_dir():
        for p in sorted(root.rglob("*.png")):
            yield str(p), p.relative_to(root).parts, p.read_bytes()


def _check_sums(root: Path) -> None:
    """Where the folder has a SHA256SUMS file, every file it lists that is present must match it."""
    sums = root / "SHA256SUMS" if root.is_dir() else None
    if sums is None or not sums.is_file():
        return
    for line in sums.read_text().splitlines():
        parts = line.split()
        if len(parts) != 2:
            continue
        digest, name = parts[0], parts[1].lstrip("*")
        f = root / name
        if f.is_file() and hashlib.sha256(f.read_bytes()).hexdigest() != digest:
            raise ParameterError(f"--omniglot: {f} does not match its SHA-256 in {sums} (corrupt or replaced file)")


def _decode_png(where: str, data: bytes) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as im:
            return np.asarray(im.convert("L"), dtype=float) / 255.0
    except (UnidentifiedImageError, OSError, ValueError) as err:
        raise ParameterError(f"--omniglot: {where} does not decode as an image ({err})") from None


def read_omniglot(path: str | Path) -> ImageSet:
    """The characters under ``path`` (a .zip, a folder of zips, or the extracted
    ``<set>/<alphabet>/characterNN/<id>_<drawer>.png`` layout): one class per (alphabet, character),
    strokes high. A file present twice with the same bytes (the Greek and Latin alphabets are in both
    background "small" sets) is read once; the same name with other bytes is refused."""
    root = Path(path)
    if not root.exists():
        raise ParameterError(
            f"--omniglot: {str(root)!r} does not exist (expected a folder or .zip with "
            f"<set>/<alphabet>/characterNN/*.png)"
        )
    _check_sums(root)
    seen: dict[tuple[str, str, str], str] = {}
    chars: dict[tuple[str, str], list[tuple[int, str, np.ndarray]]] = {}
    for where, parts, data in _png_entries(root):
        if len(parts) < 3:
            raise ParameterError(f"--omniglot: {where} is not in an <alphabet>/<character>/ folder")
        alphabet, char, fname = parts[-3:]
        digest = hashlib.sha256(data).hexdigest()
        file_key = (alphabet, char, fname)
        if file_key in seen:
            if seen[file_key] != digest:
                raise ParameterError(f"--omniglot: {alphabet}/{char}/{fname} appears twice with different contents")
            continue
        seen[file_key] = digest
        stem = Path(fname).stem
        try:
            drawer = int(stem.rsplit("_", 1)[1])
        except (IndexError, ValueError):
            raise ParameterError(f"--omniglot: {where}: file name is not <id>_<drawer>.png") from None
        chars.setdefault((alphabet, char), []).append((drawer, fname, _decode_png(where, data)))
    if not chars:
        raise ParameterError(
            f"--omniglot: no .png images under {str(root)!r} (expected <set>/<alphabet>/"
            f"characterNN/<id>_<drawer>.png, extracted or in .zip files)"
        )
    images, classes, drawers, names = [], [], [], []
    for c, key in enumerate(sorted(chars)):
        items = sorted(chars[key], key=lambda t: (t[0], t[1]))
        if len({d for d, _, _ in items}) < 2:
            raise ParameterError(
                f"--omniglot: character {key[0]}/{key[1]} has images of fewer than 2 drawers "
                f"(an episode needs a support and a query by different drawers)"
            )
        names.append(f"{key[0]}/{key[1]}")
        for d, fname, px in items:
            try:
                images.append(standardise_image(1.0 - px))  # strokes are dark on white: invert
            except ParameterError:
                raise ParameterError(f"--omniglot: {key[0]}/{key[1]}/{fname} is blank") from None
            classes.append(c)
            drawers.append(d)
    return ImageSet("omniglot", np.array(images), np.array(classes), np.array(drawers), tuple(names))


# -- IDX (FashionMNIST) and scikit-learn's digits ---------------------------------------------------


def _read_idx(path: Path) -> np.ndarray:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as err:
            raise ParameterError(f"--fashion-mnist: {path} is not a readable gzip file ({err})") from None
    if len(raw) < 4 or raw[:2] != b"\x00\x00" or raw[2] != 0x08:
        raise ParameterError(f"--fashion-mnist: {path} is not an IDX file of unsigned bytes")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    size = int(np.prod(dims))
    if len(raw) != 4 + 4 * ndim + size:
        raise ParameterError(
            f"--fashion-mnist: {path} holds {len(raw) - 4 - 4 * ndim} bytes of data, its header "
            f"says {size} (truncated file?)"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def _idx_file(folder: Path, stem: str) -> Path:
    for name in (stem, stem + ".gz"):
        if (folder / name).is_file():
            return folder / name
    raise ParameterError(
        f"--fashion-mnist: {folder} lacks {stem}[.gz] (expected the four IDX files "
        f"{', '.join(IDX_FILES)}; Debian: apt-get install dataset-fashion-mnist)"
    )


def read_idx_set(
    folder: str | Path,
    classes: tuple[int, ...] = FASHION_CLASSES,
    name: str = "fashion_mnist",
    class_names: tuple[str, ...] | None = None,
) -> ImageSet:
    """The test half (t10k) of an IDX image set, images of the ``classes`` only, intensities / 255 (class names:
    FashionMNIST's unless given)."""
    if class_names is None:
        class_names = tuple(FASHION_NAMES[c] for c in classes)
    f = Path(folder)
    if not f.is_dir():
        raise ParameterError(
            f"--fashion-mnist: {str(f)!r} is not a folder (expected the four IDX files {', '.join(IDX_FILES)}; "
            "Debian: apt-get install dataset-fashion-mnist)"
        )
    paths = {stem: _idx_file(f, stem) for stem in IDX_FILES}
    X = _read_idx(paths["t10k-images-idx3-ubyte"])
    y = _read_idx(paths["t10k-labels-idx1-ubyte"])
    if X.ndim != 3 or y.ndim != 1 or len(X) != len(y):
        raise ParameterError(f"--fashion-mnist: t10k images {X.shape} and labels {y.shape} do not match")
    keep = np.flatnonzero(np.isin(y, classes))
    if any(np.sum(y == c) < 2 for c in classes):
        raise ParameterError(f"--fashion-mnist: fewer than 2 test images of a class in {classes}")
    images = np.array([standardise_image(X[i] / 255.0) for i in keep])
    cls = np.array([classes.index(int(v)) for v in y[keep]])
    return ImageSet(name, images, cls, np.arange(len(keep)), class_names)


def read_fashion_mnist(folder: str | Path = DEFAULT_FASHION_MNIST, ways: int = 2) -> ImageSet:
    """FashionMNIST T-shirt/top (0) against trouser (1), or its classes 0..ways−1, from a folder with the four
    IDX files."""
    return read_idx_set(folder, FASHION_CLASSES if ways == 2 else tuple(range(ways)))


def read_digits(classes: tuple[int, ...] = DIGIT_CLASSES) -> ImageSet:
    """Handwritten digits ``classes`` from scikit-learn's bundled ``load_digits`` (8 × 8, intensities 0..16),
    the stand-in for MNIST (which cannot be installed on this project's machines)."""
    try:
        from sklearn.datasets import load_digits
    except ModuleNotFoundError:
        raise ParameterError('the digits set needs scikit-learn: pip install "dotattn[images]"') from None
    d = load_digits()
    keep = np.flatnonzero(np.isin(d.target, classes))
    images = np.array([standardise_image(d.images[i] / 16.0) for i in keep])
    cls = np.array([classes.index(int(v)) for v in d.target[keep]])
    return ImageSet("digits", images, cls, np.arange(len(keep)), tuple(f"digit {c}" for c in classes))


# -- split, episodes, tokens ------------------------------------------------------------------------


@dataclass(frozen=True)
class CharacterSplit:
    """Classes (characters) of the training, validation and test parts, sorted, and the seed."""

    train: tuple[int, ...]
    validation: tuple[int, ...]
    test: tuple[int, ...]
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "train": list(self.train),
            "validation": list(self.validation),
            "test": list(self.test),
        }


MIN_CLASSES = 2
"""Each part of the split needs at least two characters (an episode has two classes)."""


def split_characters(n_classes: int, fractions: tuple[float, float] = (0.6, 0.2), seed: int = 0) -> CharacterSplit:
    """Characters shuffled by ``seed`` and cut into train / validation / test (fractions of the training
    and validation parts; the test part takes the rest). Never by drawer: every image of a character is
    in one part."""
    n = check_int("number of characters", n_classes, 0)
    ft = check_number("train fraction", fractions[0], 0.0, True, 1.0, "in (0, 1)", high_open=True)
    fv = check_number("validation fraction", fractions[1], 0.0, True, 1.0, "in (0, 1)", high_open=True)
    if ft + fv >= 1.0:
        raise ParameterError(f"train + validation fractions must be < 1, got {ft + fv:g}")
    a = int(round(ft * n))
    b = a + int(round(fv * n))
    if min(a, b - a, n - b) < MIN_CLASSES:
        raise ParameterError(
            f"too few characters for the split: {n} give {a} / {b - a} / {n - b} (train / "
            f"validation / test); each part needs at least {MIN_CLASSES}"
        )
    perm = np.random.default_rng(np.random.SeedSequence([seed, 0x5F17])).permutation(n)
    return CharacterSplit(
        tuple(sorted(int(i) for i in perm[:a])),
        tuple(sorted(int(i) for i in perm[a:b])),
        tuple(sorted(int(i) for i in perm[b:])),
        seed,
    )


@dataclass(frozen=True)
class Episodes:
    """Image indices (n, ways + 1) (support 1, …, support N, query) into an :class:`ImageSet` and labels (n,):
    ±1 for two ways, the position 0..N−1 of the query's class among the supports for N ≥ 3 ways."""

    index: np.ndarray
    y: np.ndarray

    def __len__(self) -> int:
        return len(self.y)

    @property
    def ways(self) -> int:
        return int(self.index.shape[1]) - 1

    @property
    def targets(self) -> np.ndarray:
        """What the network fits: the labels ±1 (n,) for two ways, one-hot (n, N) for N ≥ 3 ways."""
        if self.ways == 2:
            return self.y
        return np.eye(self.ways)[self.y.astype(int)]


def make_episodes(
    images: ImageSet, classes: tuple[int, ...] | np.ndarray, n: int, rng: np.random.Generator, ways: int = 2
) -> Episodes:
    """``n`` episodes over the given classes: labels balanced (⌈n/2⌉ of +1, shuffled); for each, two
    different classes a (the query's) and b, a support of a and a query of a by different drawers, a
    support of b; the support of a is support 1 when y = +1. ``ways`` ≥ 3: :func:`make_ways_episodes`."""
    n = check_int("episodes", n, 1)
    ways = check_int("ways", ways, 2, MAX_WAYS)
    cls = np.asarray(classes)
    if ways > 2:
        return make_ways_episodes(images, cls, n, rng, ways)
    by = {int(c): np.flatnonzero(images.classes == c) for c in cls}
    if len(cls) < 2:
        raise ParameterError("episodes need at least 2 classes")
    y = np.where(np.arange(n) < (n + 1) // 2, 1.0, -1.0)
    rng.shuffle(y)
    index = np.empty((n, 3), dtype=np.int64)
    for i in range(n):
        a, b = rng.choice(cls, 2, replace=False)
        ia = by[int(a)]
        s = int(rng.choice(ia))
        others = ia[images.drawers[ia] != images.drawers[s]]
        if len(others) == 0:
            raise ParameterError(f"class {images.class_names[int(a)]!r} has one drawer only: no query possible")
        q = int(rng.choice(others))
        sb = int(rng.choice(by[int(b)]))
        index[i] = (s, sb, q) if y[i] > 0 else (sb, s, q)
    return Episodes(index, y)


def make_ways_episodes(images: ImageSet, cls: np.ndarray, n: int, rng: np.random.Generator, ways: int) -> Episodes:
    """``n`` episodes of ``ways`` ≥ 3 classes: the position j of the query's class balanced over 0..N−1
    (shuffled); for each, N different classes in random order, one support of each, and a query of the
    class at position j by another drawer than its support."""
    if len(cls) < ways:
        raise ParameterError(f"ways must be at most the number of classes ({len(cls)}), got {ways}")
    by = {int(c): np.flatnonzero(images.classes == c) for c in cls}
    y = np.arange(n) % ways
    rng.shuffle(y)
    index = np.empty((n, ways + 1), dtype=np.int64)
    for i in range(n):
        chosen = rng.choice(cls, ways, replace=False)
        supports = [int(rng.choice(by[int(c)])) for c in chosen]
        j = int(y[i])
        ia = by[int(chosen[j])]
        others = ia[images.drawers[ia] != images.drawers[supports[j]]]
        if len(others) == 0:
            raise ParameterError(f"class {images.class_names[int(chosen[j])]!r} has one drawer only: no query possible")
        index[i] = (*supports, int(rng.choice(others)))
    return Episodes(index, y.astype(float))


def episode_tokens(images: ImageSet, episodes: Episodes) -> np.ndarray:
    """The token matrices x (n, N0, T) of the episodes (columns: support 1's 16 patches, support 2's, …,
    the query's; rows: 64 pixels, 16 position one-hots, ways + 1 role one-hots, the one-hots of height
    :data:`EMBEDDING_SCALE`; N0 = 83 and T = 48 for two ways)."""
    n = len(episodes)
    ways = episodes.ways
    x = np.zeros((n, token_dim(ways), episode_length(ways)))
    g = IMAGE_SIZE // PATCH
    pix = PATCH * PATCH
    for r in range(ways + 1):
        im = images.images[episodes.index[:, r]]
        patches = im.reshape(n, g, PATCH, g, PATCH).transpose(0, 1, 3, 2, 4).reshape(n, N_PATCHES, pix)
        cols = slice(r * N_PATCHES, (r + 1) * N_PATCHES)
        x[:, :pix, cols] = patches.transpose(0, 2, 1)
        x[:, pix : pix + N_PATCHES, cols] = EMBEDDING_SCALE * np.eye(N_PATCHES)[None]
        x[:, pix + N_PATCHES + r, cols] = EMBEDDING_SCALE
    return x
