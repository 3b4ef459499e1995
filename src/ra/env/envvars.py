"""Which environment variables a command started by the agent gets (coding-agent-loop-spec 4.2).

A model that can run ``env`` can read, and then repeat, every secret in the parent process. The
default therefore inherits the environment *minus* anything named like a credential; stricter
policies start from a small allow-list of variables that tools need to work at all, or from nothing.
Variables the host passes explicitly (``extra_env``, per-call ``env_vars``) are never filtered: the
host chose to hand them over.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import StrEnum

from ra.llm.redaction import SECRET_PATTERNS, is_secret_name

__all__ = [
    "CORE_ENV_PREFIXES",
    "CORE_ENV_VARS",
    "SECRET_PATTERNS",
    "EnvPolicy",
    "build_environment",
    "is_core_name",
    "is_secret_name",
    "parse_policy",
]


class EnvPolicy(StrEnum):
    """How much of the parent environment a command inherits."""

    #: Everything, except secret-looking names when secret filtering is on (the default).
    INHERIT_ALL = "inherit_all"
    #: Only the core allow-list (PATH, HOME, locale, language tool paths, ...).
    CORE_ONLY = "core_only"
    #: Nothing: the command starts with a clean environment (bash still sets PWD, SHLVL, _).
    NONE = "none"


# SECRET_PATTERNS (the credential-looking names filtered out of commands) and is_secret_name live
# in ra.llm.redaction: the same names are redacted from error text.

#: Variables a shell, a compiler or a package manager needs to behave as it does for the user.
CORE_ENV_VARS: frozenset[str] = frozenset(
    {
        # system
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TERM",
        "COLORTERM",
        "TMPDIR",
        "TMP",
        "TEMP",
        "TZ",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "XDG_RUNTIME_DIR",
        # Go
        "GOPATH",
        "GOROOT",
        "GOBIN",
        "GOCACHE",
        "GOMODCACHE",
        "GOFLAGS",
        "GOPROXY",
        # Rust
        "CARGO_HOME",
        "RUSTUP_HOME",
        "RUSTUP_TOOLCHAIN",
        # JavaScript
        "NVM_DIR",
        "NVM_BIN",
        "NODE_PATH",
        "PNPM_HOME",
        "VOLTA_HOME",
        "BUN_INSTALL",
        "DENO_DIR",
        # Python
        "PYENV_ROOT",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "CONDA_DEFAULT_ENV",
        "PYTHONPATH",
        "PYTHONHOME",
        "UV_CACHE_DIR",
        "PIP_INDEX_URL",
        # JVM, .NET, Ruby, others
        "JAVA_HOME",
        "GRADLE_USER_HOME",
        "MAVEN_HOME",
        "M2_HOME",
        "SDKMAN_DIR",
        "DOTNET_ROOT",
        "RBENV_ROOT",
        "GEM_HOME",
        "GEM_PATH",
        "ASDF_DIR",
        "ASDF_DATA_DIR",
        "ANDROID_HOME",
        "ANDROID_SDK_ROOT",
        # TLS trust stores: without them HTTPS fails behind corporate proxies
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
    }
)

#: Name prefixes that are always core (locale categories).
CORE_ENV_PREFIXES: tuple[str, ...] = ("LC_",)


def is_core_name(name: str) -> bool:
    return name in CORE_ENV_VARS or name.startswith(CORE_ENV_PREFIXES)


def build_environment(
    policy: EnvPolicy | str = EnvPolicy.INHERIT_ALL,
    *,
    exclude_secrets: bool = True,
    base: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment for one command.

    ``base`` is the parent environment (``os.environ`` when omitted); ``extra`` is laid on top
    unfiltered. Core variables are never dropped by the secret filter.
    """
    policy = parse_policy(policy)
    source = os.environ if base is None else base
    if policy is EnvPolicy.NONE:
        env: dict[str, str] = {}
    elif policy is EnvPolicy.CORE_ONLY:
        env = {k: v for k, v in source.items() if is_core_name(k)}
    else:
        env = {k: v for k, v in source.items() if is_core_name(k) or not (exclude_secrets and is_secret_name(k))}
    if extra:
        for key, value in extra.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError(f"environment variables must be str -> str, got {key!r}: {value!r}")
            if not key or "=" in key or "\0" in key or "\0" in value:
                raise ValueError(f"invalid environment variable name or value: {key!r}")
            env[key] = value
    return env


def parse_policy(value: EnvPolicy | str) -> EnvPolicy:
    """``value`` as an ``EnvPolicy``, with an error that lists the valid names."""
    try:
        return EnvPolicy(value)
    except ValueError:
        choices = ", ".join(repr(p.value) for p in EnvPolicy)
        raise ValueError(f"unknown env_policy {value!r}; expected one of {choices}")
