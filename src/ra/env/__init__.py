"""Execution environments: where tools read files and run commands."""

from .base import DirEntry, ExecResult, ExecutionEnvironment, GrepOptions, OutputCallback
from .envvars import EnvPolicy
from .local import LocalExecutionEnvironment
from .wrappers import (
    ChildExecutionEnvironment,
    DelegatingExecutionEnvironment,
    EnvCallRecord,
    LoggingExecutionEnvironment,
    ReadOnlyExecutionEnvironment,
    ScopedExecutionEnvironment,
)

__all__ = [
    "ChildExecutionEnvironment",
    "DelegatingExecutionEnvironment",
    "DirEntry",
    "EnvCallRecord",
    "EnvPolicy",
    "ExecResult",
    "ExecutionEnvironment",
    "GrepOptions",
    "LocalExecutionEnvironment",
    "LoggingExecutionEnvironment",
    "OutputCallback",
    "ReadOnlyExecutionEnvironment",
    "ScopedExecutionEnvironment",
]
