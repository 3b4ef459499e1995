"""Reading a shell command line the way the shell will, for permission rules.

A rule such as ``Bash(git status:*)`` is about what runs. The same words can run something else
once the shell has read the line: ``GIT_CONFIG_COUNT=1 ... git status`` changes git's config,
``git status > f`` writes a file, ``sudo rm`` and ``env X=1 rm`` run ``rm``. So a line is split
into its simple commands, and each one keeps apart

* its leading variable assignments (``FOO=1``),
* its words (quotes removed, as the shell removes them),
* its redirections (``>f``, ``2>&1``), and whether one of them writes a file,
* whether its command word is something only the shell can work out (``$X``, ``{rm,-rf,x}``,
  ``*``): then no rule can say what it runs.

:func:`read_commands` does that; :func:`deny_views` lists what a deny or ask rule looks at (the
command with and without assignments and redirections, and under wrappers like ``sudo``,
``env``, ``nohup``, ``bash -c``). A line that cannot be read (unbalanced quotes) is None.

This reads text; it is not a sandbox: ``python -c``, ``find -delete`` or a script reach the same
effects with other words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["SimpleCommand", "deny_views", "hides_commands", "read_commands"]

#: Operators that end a simple command.
_SEPARATORS = ("&&", "||", ";;&", ";;", ";&", "|&", "|", ";", "&", "(", ")")
#: Redirection operators, longest first.
_REDIRECTS = ("&>>", "<<<", "<<-", "&>", "<<", ">>", ">|", ">&", "<&", "<>", ">", "<")
_OPERATORS = tuple(sorted((*_SEPARATORS, *_REDIRECTS), key=len, reverse=True))
_OPERATOR_START = frozenset("&|;()<>")
#: Redirections that open a file for writing (``>&`` / ``<&`` only when the target is not an fd).
_WRITING = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
#: Words that open or close a compound command: the command is what follows them.
_KEYWORDS = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "time"})
#: Files a redirection may write without writing anything.
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One simple command of a line (see the module docstring)."""

    assignments: tuple[str, ...]
    words: tuple[str, ...]
    redirects: tuple[str, ...]
    #: An output redirection to a file (``>``, ``>>``, ``2>``, ``&>``, ``>|``, ``<>``), but not
    #: a copy of a descriptor (``2>&1``) or ``/dev/null``.
    writes: bool
    #: The command word holds an expansion, a glob or braces: what runs is only known at run time.
    unreadable: bool

    @property
    def text(self) -> str:
        """The words, joined by one space: what allow rules without assignments or redirections match."""
        return " ".join(self.words)

    @property
    def full(self) -> str:
        """Assignments, words and redirections: what a rule that names them matches."""
        return " ".join((*self.assignments, *self.words, *self.redirects))


@dataclass(slots=True)
class _Word:
    text: str
    raw: str
    #: Unquoted ``$``, ``*``, ``?``, ``[``, ``{``: the shell changes this word before it runs.
    special: bool


def _tokens(line: str) -> list[_Word | str] | None:
    """Words and operators (operators as plain strings; a redirection's fd number is folded into
    its operator, ``2>``). None when quotes are unbalanced."""
    out: list[_Word | str] = []
    text: list[str] = []
    raw_start = -1
    special = False
    started = False
    i, n = 0, len(line)

    def finish(end: int) -> None:
        nonlocal text, special, started, raw_start
        if started:
            out.append(_Word("".join(text), line[raw_start:end], special))
        text, special, started, raw_start = [], False, False, -1

    #: Here-documents opened on the current line (``<<EOF``): (index of the delimiter word in
    #: ``out``, strip leading tabs). Their bodies start after the line's newline.
    heredocs: list[tuple[int, bool]] = []
    while i < n:
        c = line[i]
        if c in " \t":
            finish(i)
            i += 1
            continue
        if c == "\n":
            finish(i)
            out.append(";")
            i += 1
            if heredocs:
                i = _skip_heredocs(line, i, [(out[k], tabs) for k, tabs in heredocs])
                if i < 0:
                    return None
                heredocs = []
            continue
        if c == "#" and not started:
            # A comment, to the end of the line: what follows ``#`` is not read by the shell,
            # so its quotes do not pair with anything after the newline.
            end = line.find("\n", i)
            i = n if end < 0 else end
            continue
        if c in _OPERATOR_START:
            op = next(o for o in _OPERATORS if line.startswith(o, i))
            if op in _REDIRECTS and started and text and "".join(text).isdigit() and line[raw_start:i].isdigit():
                fd = "".join(text)
                text, special, started, raw_start = [], False, False, -1
                out.append(fd + op)
            else:
                finish(i)
                out.append(op)
            if op in ("<<", "<<-"):
                heredocs.append((len(out), op == "<<-"))  # the next token: the delimiter word
            i += len(op)
            continue
        if not started:
            started, raw_start = True, i
        if c == "\\":
            if i + 1 < n and line[i + 1] == "\n":
                i += 2  # a line continuation
                continue
            if i + 1 < n:
                text.append(line[i + 1])
            i += 2
            continue
        if c == "'":
            end = line.find("'", i + 1)
            if end < 0:
                return None
            text.append(line[i + 1 : end])
            i = end + 1
            continue
        if c == "$" and i + 1 < n and line[i + 1] == "'":  # ANSI-C quoting: decoded only by the shell
            j = i + 2
            while j < n and line[j] != "'":
                j += 2 if line[j] == "\\" else 1
            if j >= n:
                return None
            text.append(line[i : j + 1])
            special = True
            i = j + 1
            continue
        if c == '"':
            j = i + 1
            while j < n and line[j] != '"':
                ch = line[j]
                if ch == "\\" and j + 1 < n:
                    nxt = line[j + 1]
                    if nxt == "\n":
                        j += 2
                        continue
                    if nxt in '$`"\\':
                        text.append(nxt)
                        j += 2
                        continue
                if ch in "$`":
                    special = True
                text.append(ch)
                j += 1
            if j >= n:
                return None
            i = j + 1
            continue
        if c == "`":
            finish(i)
            out.append(";")  # what a substitution runs is read as a command of its own
            i += 1
            continue
        if c in "$*?[{~" and not (c == "~" and text):
            special = special or c != "~"
        text.append(c)
        i += 1
    finish(n)
    if heredocs and any(k >= len(out) or not isinstance(out[k], _Word) for k, _ in heredocs):
        return None  # ``cat <<`` with no delimiter: the shell refuses it
    return out


def _skip_heredocs(line: str, i: int, delimiters: list[tuple[_Word | str, bool]]) -> int:
    """Where the line goes on after the bodies of its here-documents, which start at ``i``: each
    body runs to a line that is exactly its delimiter (quotes removed; leading tabs stripped for
    ``<<-``), or to the end, as the shell reads it. A body is data, not commands (a substitution
    in it is still seen: the caller's whole-line check finds ``$(`` and backticks). -1 when
    the shell might read it differently: a missing delimiter word, or a body line ending in a
    backslash (an unquoted here-document joins such lines before it looks for the delimiter)."""
    n = len(line)
    for word, tabs in delimiters:
        if not isinstance(word, _Word):
            return -1
        while i < n:
            end = line.find("\n", i)
            end = n if end < 0 else end
            body_line = line[i:end]
            i = end + 1
            if tabs:
                body_line = body_line.lstrip("\t")
            if body_line == word.text:
                break
            if body_line.endswith("\\"):
                return -1
    return min(i, n)


@lru_cache(maxsize=512)
def read_commands(line: str) -> tuple[SimpleCommand, ...] | None:
    """The simple commands of ``line``; None when it cannot be read. Cached: agents run the same
    commands again and again."""
    tokens = _tokens(line)
    if tokens is None:
        return None
    commands: list[SimpleCommand] = []
    assignments: list[str] = []
    words: list[str] = []
    redirects: list[str] = []
    writes = unreadable = False
    first_special = False
    after_time = False
    i = 0

    def close() -> None:
        nonlocal assignments, words, redirects, writes, unreadable, first_special, after_time
        after_time = False
        if words or assignments or redirects:
            commands.append(
                SimpleCommand(tuple(assignments), tuple(words), tuple(redirects), writes, unreadable or first_special)
            )
        assignments, words, redirects, writes, unreadable, first_special = [], [], [], False, False, False

    while i < len(tokens):
        token = tokens[i]
        if isinstance(token, str):
            op = token.lstrip("0123456789")
            if op in _REDIRECTS:
                target = tokens[i + 1] if i + 1 < len(tokens) else None
                if not isinstance(target, _Word):
                    return None  # ``ls >`` or ``ls > ;``: the shell refuses it, and so does a rule
                dup = (op in (">&", "<&") and (target.text.isdigit() or target.text == "-")) or (
                    target.text in _HARMLESS_TARGETS and not target.special
                )
                if not dup and (op in _WRITING or op == ">&"):
                    writes = True
                if target.special and not dup:
                    unreadable = True  # ``> $F``: which file is written is known at run time only
                redirects.append(token + target.text)
                i += 2
                continue
            close()
            i += 1
            continue
        if token.raw == "{" and len(words) == 2 and words[0] in ("function", "coproc"):
            # ``function f { rm x; }``, ``coproc NAME { rm x; }``: the body's commands are
            # commands of their own.
            close()
            i += 1
            continue
        if not words and _ASSIGNMENT.match(token.raw):
            assignments.append(token.text)
        elif not words and not assignments and not redirects and token.raw in _KEYWORDS:
            after_time = token.raw == "time"
        elif after_time and not words and not assignments and token.raw in ("-p", "--"):
            pass  # ``time -p rm x``: an option of the ``time`` keyword, not the command
        else:
            if not words:
                first_special = token.special
            words.append(token.text)
            after_time = False
        i += 1
    close()
    return tuple(commands)


# -- what deny and ask rules look at --------------------------------------------------------------

#: Commands that run the rest of their words as a command: name -> options that take a value.
_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "--user", "--group"}),
    "doas": frozenset({"-u", "-C"}),
    "env": frozenset({"-u", "-C", "-S", "--unset", "--chdir", "--split-string"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "exec": frozenset({"-a"}),
    "nohup": frozenset(),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p", "--class", "--classdata"}),
    "time": frozenset({"-f", "-o", "--format", "--output"}),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "setsid": frozenset(),
    "chroot": frozenset(),
    "xargs": frozenset({"-I", "-n", "-P", "-d", "-L", "-s", "-a", "-E", "-e", "-i", "-l"}),
    "watch": frozenset({"-n", "-d", "--interval"}),
    "unbuffer": frozenset(),
    "strace": frozenset({"-e", "-o", "-p", "-s", "-u"}),
    "ltrace": frozenset({"-e", "-o", "-p", "-s", "-u"}),
    "flock": frozenset({"-w", "-E", "--timeout"}),
    "busybox": frozenset(),
    "coproc": frozenset(),
    "runuser": frozenset({"-u", "-g", "-G", "--user", "--group", "--supp-group"}),
    "pkexec": frozenset({"--user"}),
    "fakeroot": frozenset({"-l", "-s", "-i", "--lib", "--faked"}),
    "taskset": frozenset(),
    "chrt": frozenset({"-T", "-P", "-D"}),
    "numactl": frozenset({"-C", "-N", "-m", "-p", "-i", "--physcpubind", "--cpunodebind", "--membind", "--preferred"}),
    "systemd-run": frozenset(
        {"-p", "-u", "-E", "-M", "--unit", "--property", "--setenv", "--uid", "--gid", "--machine", "--slice"}
    ),
    "parallel": frozenset({"-j", "-S", "--jobs", "--sshlogin"}),
    "caffeinate": frozenset({"-t", "-w"}),
    "arch": frozenset(),
    "proxychains": frozenset({"-f"}),
    "proxychains4": frozenset({"-f"}),
}
#: Wrappers whose first word after the options is not the command (the duration, the lock file...).
_WRAPPER_ARGUMENT = frozenset({"timeout", "chroot", "flock", "taskset", "chrt"})
#: Commands whose ``-c`` (``--command``) value is a shell command line.
_DASH_C = frozenset({"su", "runuser", "script", "flatpak-spawn"})
#: How many wrappers (``sudo env nice ...``) and how many nested command strings (``bash -c``,
#: ``eval``) deny rules read through; a command past either is one they cannot tell about.
_MAX_WRAPPERS = 16
_MAX_DEPTH = 4
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash"})
#: Programs that run code given to them (a script, ``-c``/``-e``) rather than doing one thing.
_INTERPRETERS = frozenset(
    {
        "python", "python2", "python3", "pypy", "pypy3", "node", "nodejs", "deno", "bun", "perl", "ruby",
        "php", "lua", "luajit", "tclsh", "wish", "Rscript", "osascript", "pwsh", "powershell", "awk",
        "gawk", "mawk", "nawk", "sed", "gsed", "expect", "vim", "nvim", "vi", "ex", "emacs", "gdb", "lldb",
        "npx", "uvx", "bunx", "pnpx", "julia", "scala", "groovy", "java", "jshell",
    }
)  # fmt: skip


#: Second words that make a program run what follows them (``uv run``, ``npx --yes``'s kin).
_RUNNER_VERBS = frozenset({"run", "exec", "x", "dlx", "tool", "shell", "eval", "debug", "run-script", "script"})
_RUNS_WHAT_FOLLOWS = frozenset(
    {*_SHELLS, "fish", "csh", "tcsh", *_DASH_C, *_WRAPPERS, "eval", "exec", "source", ".", "trap", "alias", "find",
     "ssh", "sshpass", "su", "nsenter", "unshare", "bwrap", "firejail", *_INTERPRETERS}
)  # fmt: skip


def runs_what_follows(words: Sequence[str]) -> bool:
    """Whether the first two of ``words`` start a command whose rest is a program to run rather
    than arguments of one tool, so that a rule naming only those two words allows anything: a
    shell, an interpreter or editor that runs scripts, a wrapper (``sudo``, ``env``, ``xargs``,
    ``timeout``...), ``eval`` and its kin, ``find`` (``-exec``), ``ssh``; a runner's verb (``uv run``,
    ``npm exec``, ``docker exec``, ``kubectl exec``, ``poetry run``, ``go run``); ``git`` with an
    option of its own (``git -c core.fsmonitor=...``)."""
    if not words:
        return False
    name = words[0].rsplit("/", 1)[-1]
    if name in _RUNS_WHAT_FOLLOWS:
        return True
    second = words[1] if len(words) > 1 else ""
    return second in _RUNNER_VERBS or (name == "git" and second.startswith("-"))


def deny_views(command: SimpleCommand, depth: int = 0) -> list[str]:
    """Every reading of ``command`` a deny or ask rule is matched against: the words, the whole
    command with assignments and redirections, the command word without its directory
    (``/bin/rm``), the command a wrapper runs (``sudo -u x rm``, ``env X=1 rm``, ``timeout 5 rm``),
    the commands of ``bash -c '...'`` / ``eval ...`` / ``find -exec ...`` / ``env -S '...'`` /
    ``trap '...'`` / ``alias x='...'``, and a brace list in the command word spelled out
    (``{rm,-rf,x}``)."""
    return list(_walk(command, depth)[0])


def hides_commands(command: SimpleCommand) -> bool:
    """Whether ``command`` runs commands ra cannot see on the line: a shell that reads them from
    its standard input (``echo 'rm -rf /' | bash``, ``bash <<< '...'``, ``sh -s``), also under a
    wrapper or inside ``bash -c``. A deny or ask rule cannot tell whether it names them."""
    return _walk(command, 0)[1]


@lru_cache(maxsize=1024)
def _walk(command: SimpleCommand, depth: int) -> tuple[tuple[str, ...], bool]:
    views = [command.text, command.full]
    hidden = False
    words = list(command.words)
    seen = 0
    while words and seen < _MAX_WRAPPERS:
        seen += 1
        first = words[0]
        if first.startswith("{") and first.endswith("}") and "," in first:
            words = [*first[1:-1].split(","), *words[1:]]
            views.append(" ".join(words))
            continue
        name = first.rsplit("/", 1)[-1] if "/" in first else first
        if name != first:
            words = [name, *words[1:]]
            views.append(" ".join(words))
        if depth >= _MAX_DEPTH and (name in _SHELLS or name in _DASH_C or name in ("eval", "trap", "env", "find")):
            # Nested deeper than ra reads (``bash -c "bash -c '...'"`` four times): what runs
            # inside is not seen, so a deny rule cannot tell.
            hidden = True
            break
        if name in _SHELLS:
            script, reads_stdin = _shell_script(words)
            hidden = hidden or reads_stdin
            inner, inner_hidden = _inner(script, depth)
            views.extend(inner)
            hidden = hidden or inner_hidden
            break
        if name in _DASH_C:
            inner, inner_hidden = _inner(_after_flag(words, "-c"), depth)
            views.extend(inner)
            hidden = hidden or inner_hidden
        if name == "eval" or (name == "trap" and len(words) > 2):
            inner, inner_hidden = _inner(words[1] if name == "trap" else " ".join(words[1:]), depth)
            views.extend(inner)
            hidden = hidden or inner_hidden
            break
        if name == "alias" and depth < _MAX_DEPTH:
            for word in words[1:]:
                if "=" in word:
                    views.extend(_inner(word.split("=", 1)[1], depth)[0])
            break
        if name == "find":
            inner, inner_hidden = _find_exec(words, depth)
            views.extend(inner)
            hidden = hidden or inner_hidden
            break
        takes_value = _WRAPPERS.get(name)
        if takes_value is None:
            break
        rest = words[1:]
        while rest:
            word = rest[0]
            if word == "--":
                rest = rest[1:]
                break
            split = _split_string(rest) if name == "env" else None
            if split is not None:
                # ``env -S 'rm -rf /'``: the value is split into the command and its arguments.
                inner, inner_hidden = _inner(split, depth)
                views.extend(inner)
                hidden = hidden or inner_hidden
                rest = []
                break
            if word in takes_value:
                rest = rest[2:]
            elif word.startswith("-") and not word.startswith("--") and len(word) > 2 and f"-{word[-1]}" in takes_value:
                rest = rest[2:]  # ``sudo -iu root``: the cluster's last option takes the next word
            elif (word.startswith("-") and len(word) > 1) or (name == "env" and _ASSIGNMENT.match(word)):
                rest = rest[1:]
            else:
                break
        if name in _WRAPPER_ARGUMENT and rest:
            rest = rest[1:]
        if name == "sudo" or name == "doas":
            while rest and _ASSIGNMENT.match(rest[0]):
                rest = rest[1:]
        words = rest
        if words:
            views.append(" ".join(words))
    if words and seen >= _MAX_WRAPPERS:
        hidden = True  # ``nice nice ... rm``: more wrappers than ra unwraps
    return tuple(dict.fromkeys(views)), hidden


def _split_string(rest: list[str]) -> str | None:
    """For ``env``'s options ``rest``: the command line of ``-S``/``--split-string`` (with the words
    after it), or None when ``rest[0]`` is not that option."""
    word = rest[0]
    if word in ("-S", "--split-string"):
        return " ".join(rest[1:]) or None
    if word.startswith("--split-string="):
        return " ".join([word.split("=", 1)[1], *rest[1:]])
    if word.startswith("-S"):
        return " ".join([word[2:], *rest[1:]])
    return None


def _shell_script(words: list[str]) -> tuple[str | None, bool]:
    """For ``bash ...``: the command string of ``-c`` (the first operand after the options, as
    the shell takes it: ``bash -c -- 'x'``, ``bash -x -c 'x'``), and whether the shell reads
    its commands from standard input instead (no ``-c`` and no script file, or ``-s``)."""
    dash_c = stdin = False
    operand: str | None = None
    i = 1
    while i < len(words):
        word = words[i]
        if word == "--" or word == "-":
            i += 1
            break
        if word in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 2
            continue
        if word.startswith(("-", "+")) and len(word) > 1:
            if not word.startswith("--"):
                dash_c = dash_c or "c" in word[1:]
                stdin = stdin or "s" in word[1:]
            i += 1
            continue
        break
    if i < len(words):
        operand = words[i]
    if dash_c:
        return operand, False
    if any(word in ("--version", "--help") for word in words[1:i]):
        return None, False  # prints and exits: reads no commands
    return None, stdin or operand is None


def _after_flag(words: list[str], flag: str) -> str | None:
    for i, word in enumerate(words[1:], 1):
        if word == "--command" and flag == "-c":
            return words[i + 1] if i + 1 < len(words) else None
        if word.startswith("--command=") and flag == "-c":
            return word.split("=", 1)[1]
        if word == flag or (word.startswith("-") and not word.startswith("--") and flag[1] in word[1:]):
            return words[i + 1] if i + 1 < len(words) else None
    return None


def _inner(line: str | None, depth: int) -> tuple[list[str], bool]:
    if not line:
        return [], False
    commands = read_commands(line)
    if commands is None:
        return [line], True
    views: list[str] = []
    hidden = False
    for command in commands:
        inner, inner_hidden = _walk(command, depth + 1)
        views.extend(inner)
        hidden = hidden or inner_hidden or command.unreadable
    return views, hidden


def _find_exec(words: list[str], depth: int) -> tuple[list[str], bool]:
    views: list[str] = []
    hidden = False
    for i, word in enumerate(words):
        if word in ("-exec", "-execdir", "-ok", "-okdir"):
            rest: list[str] = []
            for w in words[i + 1 :]:
                if w in (";", "+"):
                    break
                rest.append(w)
            if rest:
                inner, inner_hidden = _inner(" ".join(_quote(w) for w in rest), depth)
                views.extend(inner)
                hidden = hidden or inner_hidden
    return views, hidden


def _quote(word: str) -> str:
    import shlex

    return shlex.quote(word)
