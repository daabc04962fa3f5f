"""Checks of user text before it reaches the model or the database, as HTTP refusals.

The checks are duilian/inputs.py's (the command line makes the same); here each refusal is an
HTTP 422 whose message says, in Chinese and in English, what is wrong.
"""

from __future__ import annotations

from fastapi import HTTPException, status

from duilian import inputs
from duilian.inputs import InputError


def refuse(zh: str, en: str) -> HTTPException:
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail=f"{zh} / {en}")


def refused(error: InputError) -> HTTPException:
    return refuse(error.zh, error.en)


def clean_line(raw: str, max_chars: int, name: tuple[str, str] = ("上联", "The upper line")) -> str:
    """The line normalised as the training data was (data.normalize: spaces, compatibility
    forms, full-width marks, simplified characters), or a 422 saying what is wrong."""
    try:
        return inputs.clean_line(raw, max_chars, name)
    except InputError as exc:
        raise refused(exc) from exc


def clean_couplet(upper: str, lower: str, max_chars: int) -> tuple[str, str]:
    """Both lines cleaned as :func:`clean_line` does, and of one length, or a 422."""
    try:
        return inputs.clean_couplet(upper, lower, max_chars)
    except InputError as exc:
        raise refused(exc) from exc
