"""Plan mode, as the model is told it: the system prompt's section while ``permission_mode`` is
``plan``. The tools that change things are not offered then (:func:`~ra.agent.permissions.rules.read_only_tools`)
and are denied if called anyway (:mod:`ra.agent.permissions.check`); this tells the model why,
and what its answer should be."""

from __future__ import annotations

__all__ = ["PLAN_MODE_SECTION"]

PLAN_MODE_SECTION = """# Plan mode

You are in plan mode: this session may look but not touch. Tools that edit files, run commands \
or start agents are not available, and any such call is refused. Use the reading and searching \
tools to understand the code and the task.

Your final answer is the plan itself, written for whoever carries it out: the goal, the files \
and functions to change and how, the order of the steps, how to check the result (tests or \
commands to run), and the risks or open questions. Do not claim that anything has been changed."""
