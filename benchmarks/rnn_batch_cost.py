"""CPU cost of one GTF training batch of ``plrnn`` and ``alrnn`` (issue 13, round 9).

Builds the training strategy as ``GTFBackend._fit`` does, on Lorenz-63 (dsr_lorenz.py's clean
record, data seed 1, 9,000 training samples), and times ``train_step`` over epochs of
``--batches`` batches: CPU ms per batch (``time.process_time``, torch on one thread), median of
``--repeats`` epochs after one warm-up epoch. ``--profile`` adds a cProfile breakdown of one
epoch (cumulative seconds by function). Settings: the backend defaults, or ``--recipe
reference`` (the AL-RNN reference code's Lorenz recipe: alpha 1, forcing every 16 steps,
16 windows of 200 steps, noise 0.05).

    python benchmarks/rnn_batch_cost.py --models plrnn,alrnn [--recipe reference] [--profile]

One JSON line per model on stdout (``-o FILE`` also appends them to FILE).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import time

import numpy as np

from dsr_lorenz import training_record
from dynid.models.rnn.alrnn import ALRNNParams
from dynid.models.rnn.backend import GTFParams
from dynid.models.rnn.gtf import GTFSettings, GTFTraining, Series
from dynid.models.rnn.plrnn import PLRNNParams
from dynid.training import TrainingSession

RECIPES = {
    "defaults": {},
    "reference": {"alpha": 1.0, "forcing_interval": 16, "batch": 16, "sequence": 200,
                  "noise": 0.05},
}


def strategy(model: str, recipe: str, batches: int) -> GTFTraining:
    """A fresh GTF training of ``model`` (seed 0) on the standardised clean Lorenz record."""
    import torch

    from dynid.models.rnn.cells import ALRNN, ShallowPLRNN

    params: GTFParams = (ALRNNParams if model == "alrnn" else PLRNNParams)(**RECIPES[recipe])
    x = training_record(1, 0.0, 0)
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    train = Series.of([(x[:9000], x[:9000], np.zeros((9000, 0)))], torch.device("cpu"))
    latent = 20 if model == "alrnn" else 3
    session = TrainingSession(None, 0)
    cell = (ALRNN(latent, params.pwl, 0, session.torch_generator) if model == "alrnn"
            else ShallowPLRNN(latent, params.hidden, 0, session.torch_generator))
    settings = GTFSettings(
        alpha=params.alpha, interval=params.forcing_interval, batch=params.batch,
        batches=batches, sequence=params.sequence, warmup=params.warmup if latent > 3 else 0,
        epochs=params.epochs, lr=params.lr, lr_end=params.lr_end,
        regularisation=params.regularisation, noise=params.noise,
        geometry_every=params.geometry_every)
    return GTFTraining(cell, train, None, settings, session)


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="plrnn,alrnn")
    parser.add_argument("--recipe", default="defaults", choices=sorted(RECIPES))
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("-o", "--output", help="append the JSON lines to this file")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for model in args.models.split(","):
        training = strategy(model, args.recipe, args.batches)
        training.train_step(1)  # warm-up
        per_batch = []
        for epoch in range(2, 2 + args.repeats):
            cpu = time.process_time()
            training.train_step(epoch)
            per_batch.append(1e3 * (time.process_time() - cpu) / args.batches)
        line = json.dumps({"model": model, "recipe": args.recipe, "torch": torch.__version__,
                           "cpu_ms_per_batch": [round(v, 2) for v in per_batch],
                           "median_cpu_ms_per_batch": round(statistics.median(per_batch), 2),
                           "load_average": os.getloadavg(), "alpha": training.alpha})
        print(line, flush=True)
        if args.output:
            with open(args.output, "a") as out:
                out.write(line + "\n")
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            training.train_step(2 + args.repeats)
            profile.disable()
            pstats.Stats(profile).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
