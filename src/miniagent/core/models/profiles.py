"""Which aids for weak models each embedded model gets, decided by measurement.

An aid helps one model and hurts another: the strict tool selection keeps SmolLM2-135M from
calling a tool for a question no tool is about, and hid the tools a 0.5B model would have
used well; a worked example keeps SmolLM2 in format, and a 0.5B model copied it literally.
So the aids are chosen per model family and size, read from the GGUF file's header
(:mod:`miniagent.core.models.gguf`), from the figures of ``benchmarks/small_tasks.py`` and the
bundled eval (see the README's table). A model not in the table gets the aids of the nearest
measured size: :data:`TINY_AIDS` under :data:`TINY_PARAMETERS`, none from
:data:`SMALL_PARAMETERS` up; a file whose header says nothing is judged by its size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from miniagent.core.models.base import ALL_AIDS
from miniagent.core.models.gguf import GGUFInfo

__all__ = ["PROFILES", "SMALL_PARAMETERS", "TINY_AIDS", "TINY_PARAMETERS", "Profile",
           "aids_for", "aids_for_served", "is_tiny"]

TINY_PARAMETERS = 300e6
"""Below this many parameters a model is for trying the loop, not for real work."""

SMALL_PARAMETERS = 1e9
"""From this many parameters up a model gets no aid unless measured otherwise."""

SMALL_FILE_BYTES = 1_000_000_000
"""A file whose header names no size: below this it is taken for a small model."""


@dataclass(frozen=True, kw_only=True)
class Profile:
    """The aids measured to help one family of models up to a size."""

    family: str
    max_parameters: float
    aids: tuple[str, ...]


TINY_AIDS = tuple(name for name in ALL_AIDS if name not in ("restate_question",
                                                            "ground_figures"))
"""The aids measured on SmolLM2-135M (every one but the restated question and the grounded
figures, which came later and were measured on the 1.5B only): a model under
:data:`TINY_PARAMETERS` gets these."""

PROFILES: tuple[Profile, ...] = (
    # the bundled eval: 22% with every aid, 9% without
    Profile(family="smollm2", max_parameters=SMALL_PARAMETERS, aids=TINY_AIDS),
    # benchmarks/small_tasks.py: 3/10 with every aid (strict selection hid the tools, the
    # worked example was copied), 5/10 with none (it loops), 8/10 with these two
    Profile(family="qwen2.5-coder", max_parameters=SMALL_PARAMETERS,
            aids=("tool_selection", "answer_after_results")),
    # the 1.5B, bundled eval (react): without aids it called file tools for country facts and
    # trivia, and went on converting figures it had; strict selection alone offers each
    # question its matching tools, the restated question stops the wandering (README table);
    # grounded figures: 37/45 -> 39/45 (several-call 10 -> 12 of 15: "27 - 14" with Berlin's
    # figure never fetched is refused, the model fetches it), no task lost to it
    Profile(family="qwen2.5-coder", max_parameters=2e9,
            aids=("strict_selection", "restate_question", "ground_figures")),
    # larger ones: unmeasured, none
    Profile(family="qwen2.5-coder", max_parameters=float("inf"), aids=()),
)


def aids_for(info: GGUFInfo, size_bytes: int) -> tuple[str, ...]:
    """The aids a model needs: its family's measured profile for its size, else by size."""
    parameters = info.parameters
    if not parameters:
        return TINY_AIDS if size_bytes < SMALL_FILE_BYTES else ()
    for profile in PROFILES:
        if info.family == profile.family and parameters <= profile.max_parameters:
            return profile.aids
    return TINY_AIDS if parameters < TINY_PARAMETERS else (
        ("tool_selection", "answer_after_results") if parameters < SMALL_PARAMETERS else ())


def aids_for_served(name: str, parameters: float = 0.0) -> tuple[str, ...] | None:
    """The aids of a model a server knows by ``name`` (``qwen2.5-coder:0.5b`` in Ollama,
    ``Qwen/Qwen2.5-Coder-0.5B-Instruct`` in vLLM, ``qwen2.5-coder-0.5b.gguf`` in llama.cpp's
    server) and, where the server says it, its ``parameters``: the profile the same model
    has embedded. None when neither tells the model's size.

    Example:
        >>> aids_for_served("qwen2.5-coder:0.5b")
        ('tool_selection', 'answer_after_results')
        >>> aids_for_served("Qwen/Qwen2.5-Coder-1.5B-Instruct"), aids_for_served("gpt-4o")
        (('strict_selection', 'restate_question', 'ground_figures'), None)
    """
    plain = name.rsplit("/", 1)[-1].lower().replace(":", "-").removesuffix(".gguf")
    plain = re.sub(r"[-.](q\d\w*|iq\d\w*|f16|bf16|fp16|f32)$", "", plain)  # a quantization
    info = GGUFInfo(name=plain)
    if parameters > 0:
        info = GGUFInfo(name=plain, basename=info.family, size_label=f"{parameters / 1e6:.0f}M")
    if not info.parameters:
        return None
    return aids_for(info, 0)


def is_tiny(info: GGUFInfo, size_bytes: int) -> bool:
    """Whether a model is a tiny one, for trying the loop rather than for real work."""
    if info.parameters:
        return info.parameters < TINY_PARAMETERS
    return size_bytes < SMALL_FILE_BYTES // 4
