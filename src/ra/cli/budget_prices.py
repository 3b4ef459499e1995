"""A budget the command cannot price is refused before anything runs.

``--max-budget-usd`` (or ``max_budget_usd`` in the config file) is only kept if every model the
run may call has a price: the model, each ``--fallback-model``, and the model of each named agent
that has its own. Prices come from ``[prices."MODEL"]`` in the config file, ra's catalogue, or
the genai-prices package; the ``local`` provider is free. A model with none stops the run with
exit 2 and a message that names it and shows the ``[prices]`` table that would price it (an
explicit zero price is the way to say a model is free). The library refuses the same models at
its first call (:mod:`ra.agent.controls.budget`); checking here makes the refusal come before the
task starts and speak in the command's terms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import ExitCode, RunError

if TYPE_CHECKING:
    from .config import Settings

__all__ = ["check_budget_prices", "refusal", "unpriced_models"]


def unpriced_models(settings: Settings, model: str) -> list[tuple[str, str]]:
    """``(role, model)`` of each model the run may call that has no price (empty without a budget)."""
    policy = settings.policy
    if policy is None or policy.max_budget_usd is None:
        return []
    wanted: list[tuple[str, str]] = [("model", model)]
    wanted += [("fallback model", name) for name in policy.fallback_models]
    for name, agent in sorted(policy.agents.items()):
        if agent.model and not agent.inherits_model:
            wanted.append((f"model of agent {name!r}", agent.model))
    return _unpriced(settings, wanted)


def refusal(settings: Settings, wanted: list[tuple[str, str]]) -> str | None:
    """Why a budget cannot be kept on the ``(role, model)`` pairs wanted, with the ``[prices]``
    tables that would price them; None when they are priced or no budget is set."""
    policy = settings.policy
    if policy is None or policy.max_budget_usd is None:
        return None
    missing = _unpriced(settings, wanted)
    if not missing:
        return None
    what = ", ".join(f"the {role} {name!r}" for role, name in missing)
    tables = " ".join(f'[prices."{name}"] input = 1.25 output = 10.0' for _, name in missing)
    where = settings.config_file or "the config file (RA_CONFIG, or config.toml in the user config directory)"
    return (
        f"the budget of ${policy.max_budget_usd:g} (--max-budget-usd) cannot be kept: no price is known for "
        f"{what} ({settings.provider}). Set one in {where}, in USD per million tokens, one key a line: "
        f"{tables} (your provider's prices; input = 0 and output = 0 make a model free)"
    )


def check_budget_prices(settings: Settings, model: str) -> None:
    """Raise a usage error (exit 2) when a budget is set and a model of the run has no price."""
    message = refusal(settings, unpriced_models(settings, model))
    if message is not None:
        raise RunError(message, ExitCode.USAGE)


def _unpriced(settings: Settings, wanted: list[tuple[str, str]]) -> list[tuple[str, str]]:
    from ra.llm.pricing import find_price

    overrides = settings.policy.prices if settings.policy is not None else {}
    missing: list[tuple[str, str]] = []
    for role, name in wanted:
        price, _ = find_price(name, provider=settings.provider or None, overrides=overrides)
        if price is None and all(name != seen for _, seen in missing):
            missing.append((role, name))
    return missing
