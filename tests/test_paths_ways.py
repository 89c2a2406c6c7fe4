"""N-way one-shot episodes (`dotattn paths images --ways N`, docs/attention_paths.md §16) on small synthetic
images: episodes, labels and tokens, the trained network with M outputs against the theory's network, the
theory's pruning with M outputs, and the command end to end with its refusals. No data files."""

import itertools
import json
import math

import numpy as np
import pytest
from clitools import run

torch = pytest.importorskip("torch")

from test_paths_images import SMALL, make_idx, make_omniglot  # noqa: E402

from dotattn.core.validation import ParameterError  # noqa: E402
from dotattn.paths import images as im  # noqa: E402
from dotattn.paths.analysis import evaluate, prune_heads  # noqa: E402
from dotattn.paths.data import PathData  # noqa: E402
from dotattn.paths.images_gd import GDConfig, correct, key_query_matrices, predict_network, prune_mask  # noqa: E402
from dotattn.paths.network import (  # noqa: E402
    FactoredKernels,
    OutputKernels,
    attention,
    network_output,
    path_inputs,
    path_kernel_diagonal,
)
from dotattn.paths.theory import PathsModel, kernel, output_labels  # noqa: E402


def test_ways_episodes_labels_drawers_and_tokens(tmp_path):
    """3-way episodes: the query's position balanced over 0..2, three different classes, the query of the class
    at its label's position by another drawer than that support; tokens of 4 roles (N0 = 84, T = 64), one-hot
    targets, and the argmax accuracy."""
    s = im.read_omniglot(make_omniglot(tmp_path / "o", chars=4))
    ep = im.make_episodes(s, np.arange(s.n_classes), 40, np.random.default_rng(0), ways=3)
    assert ep.ways == 3 and ep.index.shape == (40, 4)
    assert sorted(np.bincount(ep.y.astype(int)).tolist()) == [13, 13, 14]
    c, d = s.classes[ep.index], s.drawers[ep.index]
    assert all(len(set(row[:3])) == 3 for row in c)
    j = ep.y.astype(int)
    assert np.all(c[np.arange(40), j] == c[:, 3]) and np.all(d[np.arange(40), j] != d[:, 3])
    assert np.array_equal(ep.targets, np.eye(3)[j])
    x = im.episode_tokens(s, ep)
    assert x.shape == (40, im.token_dim(3), im.episode_length(3)) == (40, 84, 64)
    # token 48 + 5 is the query's patch 5: its role one-hot is the fourth
    assert np.array_equal(x[0, 80:, 53], [0, 0, 0, 8]) and np.array_equal(x[0, 64:80, 53], 8 * np.eye(16)[5])
    assert im.roles(3) == ("support 1", "support 2", "support 3", "query")
    f = np.eye(3)[(j + 1) % 3]
    f[:5] = ep.targets[:5]  # right on the first five only
    assert correct(f, ep.targets).sum() == 5
    with pytest.raises(ParameterError, match="ways"):
        im.make_episodes(s, np.arange(2), 5, np.random.default_rng(0), ways=3)
    with pytest.raises(ParameterError, match="ways"):
        im.make_episodes(s, np.arange(s.n_classes), 5, np.random.default_rng(0), ways=11)


def test_trained_network_with_outputs_equals_the_theory_network():
    """The torch network with M = 3 outputs (a: 3 x N) against network_output with the same weights and the
    theory's key-query matrices (float32 forward pass: 1e-4)."""
    cfg = GDConfig(N=6, qk_dim=3, seed=2, outputs=3)
    from dotattn.paths.images_gd import AttentionNetwork

    x = np.random.default_rng(0).standard_normal((5, 11, 7))
    net = AttentionNetwork(cfg, 11)
    w = {k: v.detach().numpy().astype(float) for k, v in net.named_parameters()}
    assert w["a"].shape == (3, 6)
    om = [np.stack([attention(x, W) for W in layer]) for layer in key_query_matrices(w)]
    ref = network_output(x, om, w["V0"], [w["V"][0], w["V"][1]], w["a"], readout="mean")
    assert ref.shape == (5, 3)
    assert np.allclose(predict_network(w, cfg, x), ref, rtol=1e-4, atol=1e-5)
    assert "outputs" not in GDConfig().to_dict() and cfg.to_dict()["outputs"] == 3


def test_prune_heads_with_outputs_equals_the_masked_network():
    """With M = 2 outputs the pruned predictor is the one whose test path inputs are those of the masked
    network (the extended paths (π, m) carry the weight of π), and no pruning is the unpruned predictor."""
    rng = np.random.default_rng(0)
    P, Pt, N0, T, M = 12, 9, 7, 5, 2
    x, xt = rng.standard_normal((P, N0, T)), rng.standard_normal((Pt, N0, T))
    Ws = [[rng.standard_normal((N0, N0)) / N0 for _ in range(2)] for _ in range(2)]
    om = lambda z: [np.stack([attention(z, W) for W in layer]) for layer in Ws]  # noqa: E731
    xi, xit = path_inputs(x, om(x), "mean"), path_inputs(xt, om(xt), "mean")
    Y, Yt = np.eye(M)[rng.integers(0, M, P)], np.eye(M)[rng.integers(0, M, Pt)]
    keys = tuple(itertools.product(range(2), range(2)))
    data = PathData(
        head_names=(("a", "b"),) * 2,
        path_keys=keys,
        path_names=tuple(map(str, keys)),
        C_train=FactoredKernels(xi, xi),
        y_train=Y,
        C_cross=FactoredKernels(xit, xi),
        C_diag=path_kernel_diagonal(xit),
        y_test=Yt,
    )
    model = PathsModel(N=5, temperature=0.1, heads=(2, 2), outputs=M)
    A = rng.standard_normal((4 * M, 4 * M))
    U = A @ A.T
    pruned = [(0, 1)]
    m = prune_mask(2, 2, pruned)
    w = np.array([m[0, k[0]] * m[1, k[1]] for k in keys])
    c = model.kernel_scale
    K = kernel(U, OutputKernels(data.C_train, M), c) + 0.1 * np.eye(M * P)
    cross = OutputKernels(FactoredKernels(xit * w[:, None, None], xi), M)
    mean = (kernel(U, cross, c) @ np.linalg.solve(K, output_labels(Y, M))).reshape(M, Pt).T
    ev = prune_heads(U, data, model, pruned)
    assert ev.accuracy == np.mean(np.argmax(mean, 1) == np.argmax(Yt, 1))
    assert math.isclose(ev.loss, np.mean((mean - Yt) ** 2), rel_tol=1e-10)
    none, full = prune_heads(U, data, model, []), evaluate(U, data, model)
    assert none.accuracy == full.accuracy and math.isclose(none.loss, full.loss, rel_tol=1e-10)


@pytest.fixture(scope="module")
def sets3(tmp_path_factory):
    pytest.importorskip("sklearn")
    root = tmp_path_factory.mktemp("imgdata3")
    # 16 characters: 10 / 3 / 3 for training / validation / test, enough for 3-way episodes
    return make_omniglot(root / "omni", alphabets=2, chars=8, zipped=True), make_idx(root / "fm")


def test_command_three_ways_end_to_end(sets3, tmp_path):
    """`paths images --ways 3` on synthetic images: a study whose network and theory have 3 outputs (U over
    16 paths x 3 outputs), argmax accuracies in [0, 1] for the trained network, the theory and the GP, and a
    folder that verifies (--strict)."""
    omni, fm = sets3
    out = tmp_path / "out"
    r = run(
        *[
            "paths",
            "images",
            "--omniglot",
            str(omni),
            "--fashion-mnist",
            str(fm),
            *SMALL,
            "--ways",
            "3",
            "--out",
            str(out),
        ]
    )
    assert r.returncode == 0, r.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["ways"] == 3 and s["outputs"] == 3 and s["tokens"]["N0"] == 84 and s["tokens"]["T"] == 64
    assert s["gd"]["config"]["outputs"] == 3 and len(s["paths"]) == 16
    assert np.asarray(s["U_smallest_N"]).shape == (48, 48)
    for key in ("gp", "10", "1000"):
        for part in ("test", "fashion_mnist", "digits"):
            if "test" in s["per_N"][key]:
                assert 0 <= s["per_N"][key][part]["accuracy"] <= 1
    assert all(0 <= s["gd"][p]["accuracy"] <= 1 for p in ("validation", "test", "fashion_mnist", "digits"))
    assert len(s["heads"]) == 8
    v = run(*["verify", "--strict", str(out)])
    assert v.returncode == 0 and "paths-images" in v.stdout, v.stderr


@pytest.mark.parametrize(
    "ways, words",
    [("11", ["ways", "[2, 10]"]), ("1", ["ways", "[2, 10]"]), ("4", ["ways", "at most the 3"])],
)
def test_command_refuses_impossible_ways(sets3, tmp_path, ways, words):
    """Too many or too few ways: one line naming --ways, exit 2, no folder (4 ways: the split has 3 validation
    characters)."""
    omni, fm = sets3
    out = tmp_path / "never"
    r = run(
        *[
            "paths",
            "images",
            "--omniglot",
            str(omni),
            "--fashion-mnist",
            str(fm),
            *SMALL,
            "--ways",
            ways,
            "--out",
            str(out),
        ]
    )
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and all(w in lines[0] for w in words), r.stderr
    assert not out.exists()
