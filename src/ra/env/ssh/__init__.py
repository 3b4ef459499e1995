"""SshExecutionEnvironment: the tools' files and commands on another machine, over SSH.

Files go over SFTP, commands over SSH exec channels, search runs remotely (``rg`` when the remote
has it, GNU ``grep`` otherwise). Built on ``asyncssh`` (``pip install 'ra-agent[ssh]'``), imported
only when an environment is made. It keeps the local environment's contract
(:mod:`ra.env.testing` checks it against a real sshd):

* **The host's environment never crosses.** No variable of this process is sent (asyncssh's
  ``SendEnv``/``SetEnv``, also from ``~/.ssh/config``, are turned off). A command starts with
  ``env -i`` and gets the *remote* login environment filtered by the same ``env_policy`` as local
  commands (secret-looking names dropped), plus ``extra_env`` and ``env_vars``, all on its command
  line - sshd's ``AcceptEnv`` would drop variables sent the SSH way.
* **The whole remote tree stops.** sshd runs each command as a session leader, so its process
  group is its session; the command also carries a cookie variable (:mod:`ra.env.proctree`). A
  timeout, ``terminate_all``, ``cleanup`` or a cancelled call runs a small script on the remote
  (a second channel) that freezes the group and every process with the cookie (``/proc``), sends
  SIGTERM, waits the grace, and sends SIGKILL - what the local environment does, over there.
* **A dropped connection is a clear error, never a hang.** Keepalives detect a dead peer; a call in
  flight raises :class:`SshConnectionError`; the next call reconnects and first stops the commands
  the lost connection left running.

What differs from local: output past the cap is kept on the host while the command runs and then
copied to the remote's temporary directory (``full_output_path`` is a remote path, as the file
tools need); SFTP (version 3) gives whole-second modification times, so ``glob`` orders files
changed in the same second by name; the remote needs ``/bin/sh``, ``env``, and ``/proc`` with GNU
or busybox ``grep`` for the process-tree kill (elsewhere only the process group is reached).
"""

from .environment import SshExecutionEnvironment
from .remote import SshConnectionError

__all__ = ["SshConnectionError", "SshExecutionEnvironment"]
