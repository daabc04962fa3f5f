"""`make train`: ``python -m model.train``, the training run (model.training.run), then the
release steps (model.release.finish: evaluation, bundle, card, ``--ship``).

The release steps are imported only when they run: they decode (pypinyin) and hash the
sensitive words (pyahocorasick), which the lent GPU machine's image lacks; there the run
trains with ``--no-eval --no-export`` and imports neither (tests/model/training/test_imports.py).
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist

from model.training.config import Dist
from model.training.errors import TrainingDiverged, UsageError
from model.training.omp import set_omp_wait_policy
from model.training.run import parse_args, train


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    d = Dist.from_env()
    if d.world > 1:
        dist.init_process_group("nccl" if torch.cuda.is_available() and args.device != "cpu" else "gloo")
    try:
        trained = train(args, d)
        if trained is not None and not (args.no_eval and args.no_export):
            # optional dependencies (pypinyin, pyahocorasick), not a circle: see the docstring
            from model.release.finish import FinishSpec, finish

            spec = FinishSpec(
                args.preset,
                args.no_eval,
                args.eval_limit,
                args.no_export,
                args.ship,
                no_reranker=args.no_reranker,
            )
            finish(
                spec,
                trained.out,
                trained.folder,
                trained.train.pairs,
                trained.preset,
                trained.proposer_path,
                trained.reverse_path,
            )
        return 0
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except TrainingDiverged as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    finally:
        if d.world > 1 and dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    set_omp_wait_policy("model.train")
    sys.exit(main())
