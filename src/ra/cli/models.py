"""``ra models``: which models ra knows, and which ones the configured server offers.

Two sources, printed one after the other. ra's catalogue (``ra.llm.catalog``) is what ra knows
without asking anyone: context window, prices, capabilities, and which model is each provider's
default. The server's own list (``GET /models``) is what the configured provider would actually
serve: the only source for a llama.cpp, vLLM or Ollama server, whose models the catalogue cannot
know. It is asked only when a provider is configured (flags, environment or config file, exactly
as a run resolves it), and each listed model says whether the catalogue has a price for it: a
model without one is unpriced in the summary and in budgets until ``[prices."MODEL"]`` sets one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any, NoReturn

from .errors import ExitCode, RunError, UsageError, describe_error, exit_code_for

__all__ = ["run_models"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"ra models: {message}")


def _parser() -> argparse.ArgumentParser:
    from .config import PROVIDERS

    p = _Parser(
        prog="ra models",
        description="List ra's model catalogue and the models the configured provider serves.",
    )
    p.add_argument("--provider", choices=PROVIDERS, help="only this provider (and ask its server)")
    p.add_argument("--base-url", metavar="URL", help="ask this OpenAI-compatible server what it serves")
    p.add_argument("--json", action="store_true", help="one JSON object: {catalogue, served}")
    return p


def run_models(argv: list[str]) -> int:
    """``ra models [--provider P] [--base-url URL] [--json]``; returns the exit code.

    The catalogue is always listed. A server that cannot be reached (connection refused, no answer
    in time) is a warning naming its models URL, exit 0: the catalogue is a complete answer, and
    a configured local server that is not running is an ordinary state. A server that answers
    with a refusal (a rejected key, an unknown endpoint) or a provider without a key is an error
    after the catalogue (exit 3): that is a setup to fix."""
    args = _parser().parse_args(argv)
    catalogue = _catalogue(args.provider)
    served: dict[str, Any] | None = None
    failure: BaseException | None = None
    settings = None
    try:
        settings = _settings(args)
    except Exception as exc:  # e.g. --provider openai without a key: said after the catalogue
        failure = exc
    if settings is not None:
        try:
            served = asyncio.run(_served(settings))
        except Exception as exc:  # printed as one line by the caller, after the catalogue
            failure = exc
    warning = None
    if failure is not None and settings is not None and _unreachable(failure):
        warning = f"could not list the models at {_models_url(settings)}: {describe_error(failure, settings)}"
        failure = None
    if args.json:
        record: dict[str, Any] = {"catalogue": catalogue, "served": served}
        if failure is not None:
            record["error"] = describe_error(failure, settings)
        if warning is not None:
            record["warning"] = warning
        sys.stdout.write(json.dumps(record) + "\n")
    else:
        sys.stdout.write(_catalogue_text(catalogue))
        if served is not None:
            sys.stdout.write(_served_text(served))
        elif settings is None and failure is None and not args.provider:
            sys.stdout.write("\nno provider is configured: only the catalogue is listed (see `ra --help`)\n")
    sys.stdout.flush()
    if warning is not None:
        sys.stderr.write(f"ra: warning: {warning}\n")
        sys.stderr.flush()
    if failure is not None:
        if settings is not None:  # the message names the provider and its URL, as a run's does
            raise RunError(describe_error(failure, settings), exit_code_for(failure)) from failure
        raise failure
    return 0


def _unreachable(error: BaseException) -> bool:
    """The server did not answer at all (as opposed to answering with a refusal)."""
    from ra.llm.errors import NetworkError, RequestTimeoutError

    return isinstance(error, NetworkError | RequestTimeoutError)


def _models_url(settings: Any) -> str:
    from .providers import build_adapter, models_url

    try:
        return models_url(settings.provider, build_adapter(settings))
    except Exception:
        return settings.base_url or settings.provider


def _settings(args: argparse.Namespace) -> Any:
    """The provider a run would use, or None when nothing is configured and none was asked for
    (then only the catalogue is listed). Asked for but not usable: the run's own error."""
    from .config import Flags, ProviderSetupError, resolve

    asked = bool(args.provider or args.base_url)
    try:
        return resolve(Flags(provider=args.provider, base_url=args.base_url), os.environ)
    except ProviderSetupError:
        if asked:
            raise
        return None


def _catalogue(provider: str | None) -> list[dict[str, Any]]:
    from ra.llm.catalog import get_latest_model, list_models

    from .providers import catalogue_family

    family = catalogue_family(provider)
    if provider == "local":
        return []
    rows = []
    defaults = {}
    for info in list_models(family):
        if info.provider not in defaults:
            latest = get_latest_model(info.provider, "tools")
            defaults[info.provider] = latest.id if latest else None
        rows.append(
            {
                "provider": info.provider,
                "id": info.id,
                "default": info.id == defaults[info.provider],
                "context_window": info.context_window,
                "max_output": info.max_output,
                "input_per_million": info.input_cost_per_million,
                "output_per_million": info.output_cost_per_million,
                "cache_read_per_million": info.cache_read_cost_per_million,
                "cache_write_per_million": info.cache_write_cost_per_million,
                "long_context_prices": bool(info.price_tiers),
                "capabilities": [c for c in ("tools", "vision", "reasoning") if info.supports(c)],
                "aliases": list(info.aliases),
            }
        )
    return rows


async def _served(settings: Any) -> dict[str, Any]:
    from .providers import build_adapter, list_served_models, models_url

    if settings.provider == "local":
        from .providers import local_model_name

        return {"provider": "local", "url": None, "models": [_with_price(local_model_name(), local=True)]}
    adapter = build_adapter(settings)  # for its URL and headers; the listing uses its own client
    url = models_url(settings.provider, adapter)
    ids = await list_served_models(settings, adapter)
    if not ids:
        raise RunError(f"{url} lists no models", ExitCode.PROVIDER)
    from .policy import parse_prices

    configured = parse_prices(settings.file.get("prices"), settings.config_file or "config")
    return {
        "provider": settings.provider,
        "url": url,
        "models": [_with_price(model_id, _configured(model_id, configured)) for model_id in ids],
    }


def _configured(model_id: str, configured: dict[str, Any]) -> Any:
    """The configured price a run would use for ``model_id`` (names match as they do in a run:
    without regard to case or to a ``models/`` prefix), or None."""
    from ra.llm.pricing import find_price

    price, source = find_price(model_id, overrides=configured, fallback=False)
    return price if source == "configured" else None


def _with_price(model_id: str, configured: Any = None, *, local: bool = False) -> dict[str, Any]:
    """The model and the price a run would use for it: configured, catalogue, or none (free when
    it runs in process)."""
    from ra.llm.catalog import get_model_info

    info = None if local else get_model_info(model_id)
    price = info.price if info is not None else None
    row: dict[str, Any] = {"id": model_id, "in_catalogue": info is not None, "price_source": "unknown"}
    if local:
        row.update(input_per_million=0.0, output_per_million=0.0, price_source="local")
    elif configured is not None:
        row.update(input_per_million=configured.input, output_per_million=configured.output, price_source="configured")
    elif price is not None:
        row.update(input_per_million=price.input, output_per_million=price.output, price_source="catalogue")
    else:
        row.update(input_per_million=None, output_per_million=None)
    return row


def _tokens(count: int | None) -> str:
    if not count:
        return "-"
    return f"{count // 1_000_000}M" if count >= 1_000_000 and count % 1_000_000 == 0 else f"{count // 1000}k"


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _catalogue_text(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    lines = ["ra's catalogue (prices: USD per million tokens; * = the provider's default)"]
    table = [("PROVIDER", "MODEL", "CONTEXT", "INPUT", "OUTPUT", "CAPABILITIES")]
    for row in rows:
        notes = " ".join(row["capabilities"])
        if row["long_context_prices"]:
            notes += " (higher price past 200k)"
        table.append(
            (
                row["provider"],
                row["id"] + (" *" if row["default"] else ""),
                _tokens(row["context_window"]),
                _money(row["input_per_million"]),
                _money(row["output_per_million"]),
                notes,
            )
        )
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]) - 1)]
    for line in table:
        cells = [cell.ljust(width) for cell, width in zip(line[:-1], widths, strict=False)]
        lines.append("  " + "  ".join(cells) + "  " + line[-1])
    return "\n".join(lines) + "\n"


def _served_text(served: dict[str, Any]) -> str:
    where = f" at {served['url']}" if served["url"] else ""
    from .terminal_text import visible

    # A server names its models: shown with any control characters as symbols, never obeyed.
    models = [{**m, "id": visible(m["id"])} for m in served["models"]]
    lines = [f"\nserved by {served['provider']}{visible(where)}: {len(models)} model(s)"]
    width = max(len(m["id"]) for m in models)
    for model in models:
        source = model["price_source"]
        if source == "local":
            price = "free (runs in process)"
        elif source != "unknown":
            rates = f"{_money(model['input_per_million'])} / {_money(model['output_per_million'])}"
            price = f"{rates} USD per million ({source})"
        else:
            price = f'no price known (set one with [prices."{model["id"]}"] in the config file)'
        lines.append(f"  {model['id'].ljust(width)}  {price}")
    return "\n".join(lines) + "\n"
