"""Claude Code's command-line protocol, so that programs written for the Claude Agent SDK drive ``ra``.

``ClaudeAgentOptions(cli_path="ra")`` makes the SDK start ``ra --output-format stream-json
--verbose --input-format stream-json ...`` in place of ``claude``; these modules make ``ra``
answer as ``claude`` does (``docs/claude-sdk.md``):

* :mod:`.flags`: Claude's flags that ``ra`` lacked (accepted; the ignored ones warned about once);
* :mod:`.channel`: JSON lines on stdin and stdout, control requests in both directions, bounded;
* :mod:`.serve`: the session loop and the SDK's requests (initialize, interrupt, modes, model);
* :mod:`.hooks`, :mod:`.permission`, :mod:`.sdk_mcp`: the host program's hook callbacks,
  ``can_use_tool`` and in-process MCP servers as ra's hooks, permission callback and tool source;
* :mod:`.wire`: ra's SDK messages in the exact shape the SDK's parser reads.
"""
