"""Learning-rate schedules: the paper's warm-up, and two that end a short run at a rate near 0.

The paper's rate (section 5.3) rises in a line for ``warmup`` steps, then falls as 1/sqrt(step).
A run that stops on time or on a step budget ends with half the peak left; ``time_linear`` and
``cooldown`` bring it down to 0 by the run's end. :func:`learning_rate` picks one as a
:class:`~transformer_lib.config.TrainConfig` says.
"""

from __future__ import annotations

from transformer_lib.config import TrainConfig


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The paper's learning rate at ``step`` (counting from 1): linear warm-up, then 1/sqrt(step)."""
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def time_linear_lr(step: int, seconds: float, budget: float, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The paper's linear warm-up times a line that falls from 1 at the start to 0 at ``budget`` seconds.

    For a run that stops on time (``max_minutes``): the paper's 1/sqrt(step) still has half its peak
    when a 20-minute run ends. The line falls from the first second, so the warm-up ends below the
    paper's peak by the share of the budget it took (a warm-up of 5 of 20 minutes: 0.75 of it).
    """
    return noam_lr(min(step, warmup), d_model, warmup, factor) * max(0.0, 1.0 - seconds / budget)


def cooldown_lr(
    step: int, progress: float, d_model: int, warmup: int, factor: float = 1.0, share: float = 0.2
) -> float:
    """The paper's schedule, times a line that falls from 1 to 0 over the last ``share`` of the run.

    ``progress`` is the share of the run's budget spent (0 to 1): a short run ends at a rate near 0,
    where the paper's 1/sqrt(step) would still be half its peak, without the lower peak of
    :func:`time_linear_lr`, whose line falls from the first second.
    """
    return noam_lr(step, d_model, warmup, factor) * min(1.0, max(0.0, (1.0 - progress) / share))


def learning_rate(config: TrainConfig, step: int, seconds: float, d_model: int) -> float:
    """The rate of optimizer step ``step`` (from 1) after ``seconds`` of training, as ``config.schedule`` sets it."""
    c = config
    if c.schedule == "time_linear":
        return time_linear_lr(step, seconds, 60 * c.max_minutes, d_model, c.warmup, c.lr_factor)
    if c.schedule == "cooldown":  # the budget that ends first: its time or its steps
        spent = [seconds / (60 * c.max_minutes)] if c.max_minutes else []
        spent += [step / c.max_steps] if c.max_steps else []
        return cooldown_lr(step, max(spent), d_model, c.warmup, c.lr_factor, c.cooldown)
    return noam_lr(step, d_model, c.warmup, c.lr_factor)
