"""dynid's ``koopman`` beside PyDMD's (kernel) EDMD on the slow-manifold system of
tests/test_koopman.py (x' = mu x, y' = lambda (y - x^2), mu = -0.05, lambda = -1, noise-free,
several trajectories, dt 0.1): fit seconds and the relative errors of mu, 2 mu and lambda among
the continuous-time eigenvalues (1:1 matched).

Pairs: dynid poly (degree 2) vs PyDMD EDMD with the polynomial kernel (x.y + 1)^2, whose
feature space is the same monomials; dynid kernel (Nystrom) vs PyDMD EDMD with the Gaussian
(rbf) kernel of the same width. PyDMD gets the states standardised as dynid's dictionaries see
them (an affine change, so the same spectrum), which makes the two Gaussian kernels identical.
PyDMD forms the N x N Gram matrix of all snapshot pairs; its full rank (svd_rank=-1) takes
minutes at N = 1200 on 2 cores, so it gets the rank dynid chose.

Rows without a PyDMD counterpart (PyDMD has no learned basis; pykoopman pins an old torch):
dynid's trained bases, ``learned`` (nested-LoRA singular functions) and ``autoencoder``, fitted
once each (seed 0) with the settings in ``TRAINED``, on the data of
tests/test_koopman_learned.py (many short trajectories: see there why).

    python benchmarks/koopman_vs_pydmd.py [--trials 6] [--repeats 3] [-o results/koopman.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
from timing import interleaved, summarize

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the ground truth the tests use

from test_koopman import DT, TARGETS, matched_relative_errors, trajectories  # noqa: E402
from test_koopman_learned import SLOW_MANIFOLD_TRAINED, learned_data  # noqa: E402

from dynid.data.dataset import Dataset  # noqa: E402
from dynid.models.operator.koopman import Koopman, KoopmanParams  # noqa: E402


def dynid_fit(data: Dataset, basis: str, **settings: int | float) -> Koopman:
    return Koopman(KoopmanParams(basis=basis, **settings)).fit(data, seed=0)  # type: ignore[arg-type]


def pydmd_fit(
    data: Dataset, model: Koopman, metric: str, params: dict[str, float], rank: int
) -> object:
    """PyDMD's EDMD on the snapshot pairs of every trial, standardised as ``model`` does."""
    from pydmd import EDMD

    z = [(trial.x - model.center_) / model.scale_ for trial in data.trials]
    x = np.vstack([zi[:-1] for zi in z]).T  # (d, N) pairs within trials
    y = np.vstack([zi[1:] for zi in z]).T
    return EDMD(svd_rank=rank, kernel_metric=metric, kernel_params=params).fit(x, y)


def errors(continuous: np.ndarray) -> list[float]:
    return [float(e) for e in matched_relative_errors(continuous, TARGETS)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("-o", "--output", default=str(HERE / "results" / "koopman_vs_pydmd.json"))
    args = parser.parse_args()
    import pydmd

    data = trajectories(args.trials)
    results: dict[str, object] = {"trials": args.trials, "pairs": args.trials * 200}
    for basis, metric in (("poly", "poly"), ("kernel", "rbf")):
        model = dynid_fit(data, basis)
        if basis == "poly":
            kernel_params = {"degree": 2, "gamma": 1.0, "coef0": 1.0}
        else:
            kernel_params = {"gamma": 1.0 / (2 * model.dictionary_.width**2)}
        rank = int(model.metrics_["rank"])
        seconds = interleaved(
            {
                "dynid": lambda: dynid_fit(data, basis),
                "pydmd": lambda: pydmd_fit(data, model, metric, kernel_params, rank),
            },
            repeats=args.repeats,
            warmup=0,
        )
        reference = pydmd_fit(data, model, metric, kernel_params, rank)
        results[basis] = {
            "rank": rank,
            "pydmd_kernel": {"metric": metric, **kernel_params},
            "dynid": {"fit": summarize(seconds["dynid"]),
                      "errors_mu_2mu_lambda": errors(model.continuous_eigenvalues_)},
            "pydmd": {"fit": summarize(seconds["pydmd"]),
                      "errors_mu_2mu_lambda": errors(np.log(reference.eigs.astype(complex)) / DT)},
        }
        for side in ("dynid", "pydmd"):
            row = results[basis][side]  # type: ignore[index]
            print(f"{basis:<6} {side:<6} rank {rank:3d}  fit {row['fit']['median_s']:8.3f} s "
                  f"(median of {args.repeats})  relative errors mu, 2mu, lambda "
                  + ", ".join(f"{e:.1e}" for e in row["errors_mu_2mu_lambda"]))
    data = learned_data()
    for basis, settings in SLOW_MANIFOLD_TRAINED.items():
        started = time.perf_counter()
        model = dynid_fit(data, basis, **settings)
        seconds = time.perf_counter() - started
        row = {"settings": settings, "epochs": model.metrics_["epochs"], "fit_s": seconds,
               "errors_mu_2mu_lambda": errors(model.continuous_eigenvalues_)}
        results[basis] = {"dynid": row}
        print(f"{basis:<11} dynid  rank {len(model.continuous_eigenvalues_):3d}  fit "
              f"{seconds:8.3f} s (once)  relative errors mu, 2mu, lambda "
              + ", ".join(f"{e:.1e}" for e in row["errors_mu_2mu_lambda"]))
    results.update(pydmd_version=getattr(pydmd, "__version__", "unknown"),
                   machine=platform.platform(), python=platform.python_version())
    Path(args.output).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
