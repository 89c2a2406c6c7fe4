"""The attention-paths network with learned queries and keys, trained by gradient descent on image
episodes (torch, the ``erm`` extra; docs/attention_paths.md, "One-shot images").

Forward pass (the network of :func:`dotattn.paths.network.network_output`, with Ω learned):
x¹ = V⁰x/√N0; x^{ℓ+1} = (H N)^{-1/2} Σ_h m_{ℓh} V^{(ℓ)h} x^ℓ Ω^{(ℓ)h}(x); f = a·x^{L+1} r/√N, r the token
mean; Ω^{(ℓ)h}_{st} = softmax over keys s of (W_K^{(ℓ)h} x_s)·(W_Q^{(ℓ)h} x_t)/√G from the **bare**
input x (so the theory's key-query matrix is W = W_Kᵀ W_Q/√G). ``m`` is the head mask (1 = kept);
pruning sets a head's m to 0 and those of the kept heads of its layer to √(H/kept) (:func:`prune_mask`). Loss: mean squared error on ±1 labels; Adam; fresh training episodes every epoch;
the weights of the epoch with the best validation accuracy are kept (early stopping with patience).
With M = ``outputs`` > 1 (N-way episodes) the readout a is M × N, the loss the mean squared error over the
M one-hot targets and the accuracy that of the argmax.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dotattn.core.validation import ParameterError, check_int, check_number

__all__ = [
    "GDConfig",
    "GDResult",
    "AttentionNetwork",
    "train_network",
    "predict_network",
    "prune_mask",
    "key_query_matrices",
    "CHECKPOINT_NAME",
    "correct",
]

CHECKPOINT_NAME = "gd_checkpoint.pt"


@dataclass(frozen=True)
class GDConfig:
    """Width N, layers × heads, query/key dimension G, Adam learning rate, batch, episodes per epoch,
    epochs at most, patience (epochs without a better validation accuracy), seed.

    The defaults give 100 Adam steps per epoch and stop only after 1000 steps without a better validation
    accuracy: on Omniglot the network first sits on a plateau (output ≈ 0, loss ≈ 1) for about 200 steps
    (about 1000 with unit-height one-hots in the tokens), and a patience shorter than that stops it there
    with a validation accuracy that is noise (docs/attention_paths.md, "One-shot images")."""

    N: int = 32
    layers: int = 2
    heads: int = 4
    qk_dim: int = 16
    lr: float = 3e-3
    batch: int = 64
    epoch_episodes: int = 6400
    max_epochs: int = 60
    patience: int = 10
    seed: int = 0
    outputs: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "N", check_int("gd-width (N of the trained network)", self.N, 2, 1024))
        object.__setattr__(self, "layers", check_int("layers", self.layers, 1, 4))
        object.__setattr__(self, "heads", check_int("heads", self.heads, 2, 8))
        object.__setattr__(self, "qk_dim", check_int("qk-dim (G)", self.qk_dim, 1, 256))
        object.__setattr__(self, "lr", check_number("lr", self.lr, 0.0, True, 1.0, "in (0, 1]"))
        object.__setattr__(self, "batch", check_int("batch", self.batch, 1, 4096))
        object.__setattr__(self, "epoch_episodes", check_int("epoch-episodes", self.epoch_episodes, 1, 10**6))
        object.__setattr__(self, "max_epochs", check_int("max-epochs", self.max_epochs, 1, 10**4))
        object.__setattr__(self, "patience", check_int("patience", self.patience, 1, 10**4))
        object.__setattr__(
            self, "seed", check_int("seed of the network (--train-seed, default --seed)", self.seed, 0, 2**32 - 1)
        )
        object.__setattr__(self, "outputs", check_int("outputs (M)", self.outputs, 1, 64))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.outputs == 1:  # one output: the record of every earlier run, unchanged
            del d["outputs"]
        return d


def AttentionNetwork(config: GDConfig, N0: int):  # noqa: N802 (a class factory: torch is imported lazily)
    """A torch module of the network (weights float32, initialised from ``config.seed``): V⁰, V^{(ℓ)h},
    a ~ N(0, 1) (the prior of the theory, σ² = 1); W_Q ~ N(0, 1/N0) and W_K = W_Q at the start (so the
    first attention is a similarity of tokens, not noise; they are trained separately)."""
    import torch  # lazily: the theory never needs torch

    class _Net(torch.nn.Module):
        mask: torch.Tensor  # the head mask, a registered buffer (Module.__getattr__ is typed Tensor | Module)

        def __init__(self) -> None:
            super().__init__()
            g = torch.Generator().manual_seed(config.seed)
            c = config
            rn = lambda *s: torch.randn(*s, generator=g, dtype=torch.float32)  # noqa: E731
            self.V0 = torch.nn.Parameter(rn(c.N, N0))
            self.V = torch.nn.Parameter(rn(c.layers, c.heads, c.N, c.N))
            self.a = torch.nn.Parameter(rn(c.N) if c.outputs == 1 else rn(c.outputs, c.N))
            wq = rn(c.layers, c.heads, c.qk_dim, N0) / math.sqrt(N0)
            self.WQ = torch.nn.Parameter(wq.clone())
            self.WK = torch.nn.Parameter(wq.clone())
            self.register_buffer("mask", torch.ones(c.layers, c.heads))

        def omegas(self, x):
            q = torch.einsum("lhgi,pit->plhgt", self.WQ, x)
            k = torch.einsum("lhgi,pis->plhgs", self.WK, x)
            return torch.softmax(torch.einsum("plhgs,plhgt->plhst", k, q) / math.sqrt(config.qk_dim), dim=3)

        def forward(self, x):
            om = self.omegas(x)
            h = torch.einsum("ni,pit->pnt", self.V0, x) / math.sqrt(x.shape[1])
            c = config
            for l in range(c.layers):
                hv = torch.einsum("hnm,pmt->phnt", self.V[l], h)
                h = torch.einsum("phnt,phts,h->pns", hv, om[:, l], self.mask[l]) / math.sqrt(c.heads * c.N)
            a = self.a if self.a.ndim == 1 else self.a.T  # (P,), or (P, M) for M outputs
            return h.mean(2) @ a / math.sqrt(c.N)

    return _Net()


def key_query_matrices(weights: dict[str, np.ndarray]) -> list[list[np.ndarray]]:
    """W^{(ℓ)h} = W_K^{(ℓ)h ᵀ} W_Q^{(ℓ)h} / √G (N0 × N0) per layer and head, for the theory's attention."""
    WQ, WK = np.asarray(weights["WQ"], float), np.asarray(weights["WK"], float)
    G = WQ.shape[2]
    return [[WK[l, h].T @ WQ[l, h] / math.sqrt(G) for h in range(WQ.shape[1])] for l in range(WQ.shape[0])]


def prune_mask(layers: int, heads: int, pruned: list[tuple[int, int]]) -> np.ndarray:
    """Head mask (layers, heads): 0 for each pruned (layer, head) (0-based), √(H / kept) for the kept heads
    of a layer that lost some (the head sum rescaled as in ``analysis.prune_head``), 1 elsewhere."""
    m = np.ones((layers, heads))
    for l, h in pruned:
        m[l, h] = 0.0
    for l in range(layers):
        kept = int(np.sum(m[l] > 0))
        if kept == 0:
            raise ParameterError(f"pruning would remove every head of layer {l + 1}")
        if kept < heads:
            m[l][m[l] > 0] = math.sqrt(heads / kept)
    return m


def correct(f: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Which episodes an output gets right: sign(f) = y for one output (y ±1), argmax f = argmax y for M
    outputs (y one-hot (P, M))."""
    f, y = np.asarray(f), np.asarray(y)
    if f.ndim == 2:
        return np.argmax(f, axis=1) == np.argmax(y, axis=1)
    return np.sign(f) == y


def _state_arrays(net) -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().numpy().astype(np.float64) for k, v in net.named_parameters()}


def predict_network(
    weights: dict[str, np.ndarray], config: GDConfig, x: np.ndarray, mask: np.ndarray | None = None, batch: int = 500
) -> np.ndarray:
    """Outputs f (P,) (M outputs: (P, M)) of the network with ``weights`` on token matrices x (P, N0, T), head
    ``mask``."""
    import torch  # lazily: the theory never needs torch

    net = AttentionNetwork(config, x.shape[1])
    with torch.no_grad():
        for k, p in net.named_parameters():
            p.copy_(torch.as_tensor(weights[k], dtype=torch.float32))
        if mask is not None:
            net.mask.copy_(torch.as_tensor(mask, dtype=torch.float32))
        out = [net(torch.as_tensor(x[i : i + batch], dtype=torch.float32)).numpy() for i in range(0, len(x), batch)]
    return np.concatenate(out).astype(float)


@dataclass(frozen=True)
class GDResult:
    """Trained weights (float64 arrays), the epoch kept, its validation accuracy, the history
    (epoch, training loss and accuracy on the epoch's episodes as they were trained on, validation
    accuracy, seconds), status and wall time."""

    weights: dict[str, np.ndarray]
    best_epoch: int
    best_validation_accuracy: float
    history: tuple[dict[str, float], ...]
    status: str
    seconds: float


def _read_checkpoint(path: Path) -> dict[str, Any] | None:
    """The training state in ``path``, or None: none there, or unreadable (cut short, not a checkpoint),
    which one line on stderr says (:func:`dotattn.core.io.cache_notice`) before training starts afresh."""
    from dotattn.core.io import cache_notice

    if not path.is_file():
        return None
    import torch

    try:
        state = torch.load(path, weights_only=False)
        if not isinstance(state, dict):
            raise ValueError("not a dict of training state")
        return state
    except Exception as err:  # a corrupt pickle raises any of many types (EOFError, UnpicklingError, OSError, ...)
        cache_notice(path, f"unreadable ({type(err).__name__}; cut short or not a training checkpoint)")
        return None


def train_network(
    config: GDConfig,
    sample_epoch: Callable[[int], tuple[np.ndarray, np.ndarray]],
    x_val: np.ndarray,
    y_val: np.ndarray,
    checkpoint: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> GDResult:
    """Adam on the mean-squared error, batches of fresh episodes ``sample_epoch(epoch)`` (x, y) each epoch,
    validation accuracy after each epoch; stops after ``patience`` epochs without improvement (status
    ``converged``) or at ``max_epochs`` (``not_converged``); a non-finite loss stops it (``diverged``).
    With ``checkpoint``, the state after every epoch is written there atomically and a run with the same
    config resumes from it."""
    import torch  # lazily: the theory never needs torch

    from dotattn.core.status import CONVERGED, DIVERGED, NOT_CONVERGED

    t0 = time.perf_counter()
    net = AttentionNetwork(config, x_val.shape[1])
    opt = torch.optim.Adam(net.parameters(), lr=config.lr)
    history: list[dict[str, float]] = []
    best = (-1.0, -1, _state_arrays(net))
    start, bad, prior_seconds = 0, 0, 0.0
    state = _read_checkpoint(checkpoint) if checkpoint is not None else None
    if state is not None:
        if state.get("config") == config.to_dict():
            net.load_state_dict(state["net"])
            opt.load_state_dict(state["opt"])
            history, start, bad = list(state["history"]), int(state["epoch"]) + 1, int(state["bad"])
            best = (float(state["best_acc"]), int(state["best_epoch"]), state["best_weights"])
            prior_seconds = float(state["seconds"])
            if progress:
                progress(f"gd: resumed from {checkpoint} after epoch {start - 1}")
    xv = torch.as_tensor(x_val, dtype=torch.float32)
    yv = np.asarray(y_val)
    status = NOT_CONVERGED
    for epoch in range(start, config.max_epochs):
        if bad >= config.patience:
            status = CONVERGED
            break
        x, y = sample_epoch(epoch)
        xt, yt = torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y, dtype=torch.float32)
        perm = torch.randperm(len(yt), generator=torch.Generator().manual_seed(config.seed * 100_003 + epoch))
        losses, n_right = [], 0
        for i in range(0, len(yt), config.batch):
            idx = perm[i : i + config.batch]
            f = net(xt[idx])
            loss = ((f - yt[idx]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
            n_right += int(correct(f.detach().numpy(), yt[idx].numpy()).sum())
        train_loss = float(np.mean(losses))
        if not np.isfinite(train_loss):
            status = DIVERGED
            break
        with torch.no_grad():
            acc = float(np.mean(correct(net(xv).numpy(), yv)))
        seconds = prior_seconds + time.perf_counter() - t0
        history.append(
            {
                "epoch": epoch,
                "train_loss": train_loss,
                "train_accuracy": n_right / len(yt),
                "validation_accuracy": acc,
                "seconds": seconds,
            }
        )
        if acc > best[0]:
            best, bad = (acc, epoch, _state_arrays(net)), 0
        else:
            bad += 1
        if progress:
            progress(
                f"gd: epoch {epoch:3d} loss {train_loss:.4f} training accuracy {n_right / len(yt):.3f} "
                f"validation accuracy {acc:.3f} "
                f"(best {best[0]:.3f} at {best[1]}) {seconds:.0f} s"
            )
        if checkpoint is not None:
            import io as _io

            from dotattn.core.io import atomic_write_bytes

            buf = _io.BytesIO()
            torch.save(
                {
                    "config": config.to_dict(),
                    "net": net.state_dict(),
                    "opt": opt.state_dict(),
                    "history": history,
                    "epoch": epoch,
                    "bad": bad,
                    "best_acc": best[0],
                    "best_epoch": best[1],
                    "best_weights": best[2],
                    "seconds": seconds,
                },
                buf,
            )
            atomic_write_bytes(checkpoint, buf.getvalue())
    else:
        status = CONVERGED if bad >= config.patience else NOT_CONVERGED
    return GDResult(
        weights=best[2],
        best_epoch=best[1],
        best_validation_accuracy=best[0],
        history=tuple(history),
        status=status,
        seconds=prior_seconds + time.perf_counter() - t0,
    )
