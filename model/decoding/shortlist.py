"""The shortlist: per request, the tokens the output layer scores (the proposer's top
tokens among those the rules allow, plus required characters and EOS)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import Tensor

from data.vocab import PAD_ID
from model.decoding.vocab_tables import NEG_INF


@dataclass(frozen=True)
class Shortlist:
    """Per request, the tokens the output layer scores: ids (N, M) (PAD where a request has
    fewer) and their rows of the output layer, transposed, weight (N, d, M). Log-probabilities
    are normalised over the shortlist: the mass left out (the tokens no position's proposer
    ranked high) is taken as nothing."""

    ids: Tensor
    weight: Tensor

    @classmethod
    def build(cls, ids: list[list[int]], head: Tensor) -> Shortlist:
        """From lists of ids and the output layer's weight (V, d)."""
        return cls.from_rows([torch.tensor(row, dtype=torch.long) for row in ids], head.t())

    @classmethod
    def from_rows(cls, rows: list[Tensor], head_t: Tensor) -> Shortlist:
        """From each request's ids (M_n,) and the output layer's weight, transposed (d, V)
        (contiguous: its columns are gathered)."""
        width = max(len(row) for row in rows)
        padded = torch.full((len(rows), width), PAD_ID, dtype=torch.long)  # (N, M)
        for n, row in enumerate(rows):
            padded[n, : len(row)] = row
        d = head_t.size(0)
        weight = head_t.index_select(1, padded.flatten()).view(d, len(rows), width).transpose(0, 1)
        return cls(padded, weight.contiguous())

    @functools.cached_property
    def listed(self) -> tuple[Tensor, Tensor]:
        """The output layer's listed rows for a step that scores them itself
        (``step_log_probs``): weight (N, d, M), and bias (N, 1, M), -inf at the padding."""
        bias = torch.zeros(self.ids.shape).masked_fill_(self.ids == PAD_ID, NEG_INF)[:, None]
        return self.weight, bias

    def log_probs(self, states: Tensor) -> Tensor:
        """states (B, d) of B = N*width rows -> log-probabilities (B, M) of the listed
        tokens, -inf at the padding."""
        n, _, m = self.weight.shape
        width = states.size(0) // n
        logits = torch.bmm(states.float().view(n, width, -1), self.weight)  # (N, width, M)
        logits.masked_fill_((self.ids == PAD_ID)[:, None], NEG_INF)
        return logits.log_softmax(-1).view(n * width, m)

    def pick(self, scores: Tensor) -> Tensor:
        """scores (B, V) of B = N*width rows -> their listed columns (B, M)."""
        n, m = self.ids.shape
        return self.gather(scores.view(n, -1, scores.size(1))).view(-1, m)

    def gather(self, table: Tensor) -> Tensor:
        """Rows of each request over the vocabulary, (N, R, V), e.g. the rule table (N, L+1, V)
        -> their listed columns (N, R, M) (-inf at the padding: PAD is never a token)."""
        n, m = self.ids.shape
        return table.gather(2, self.ids[:, None].expand(n, table.size(1), m))

    def token_ids(self, columns: Tensor) -> Tensor:
        """columns (N, X) of each request's list -> the token ids there (N, X)."""
        return self.ids.gather(1, columns)

    def columns(self, size: int) -> Tensor:
        """(N, V): each token's column in its request's list, -1 off the list."""
        n, m = self.ids.shape
        col = torch.full((n, size), -1, dtype=torch.long)
        col.scatter_(1, self.ids, torch.arange(m).expand(n, m))
        col[:, PAD_ID] = -1  # (the padding of shorter lists)
        return col
