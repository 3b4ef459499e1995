"""Execution environments: where tools read files and run commands."""

from .base import DirEntry, ExecResult, ExecutionEnvironment, GrepOptions, OutputCallback

__all__ = ["DirEntry", "ExecResult", "ExecutionEnvironment", "GrepOptions", "OutputCallback"]
