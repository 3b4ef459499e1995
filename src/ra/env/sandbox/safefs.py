"""File changes that cannot be redirected by a symlink swapped in after the boundary check.

The sandbox's file tools run in ra's process, outside the sandbox, while sandboxed commands may
still run in the background. Checking a resolved path and then writing to it by name leaves a
window: a command that replaces a checked directory (or the file itself) with a symlink between
the check and the write sends the write wherever the link points. So here every change happens
relative to directory descriptors opened one component at a time with ``O_NOFOLLOW``, along the
already-resolved real path (which by construction holds no symlink): a symlink that appears on
the way fails the walk, and the final step (create with ``O_EXCL | O_NOFOLLOW``, ``rename``,
``unlink``) never follows a link either. What a name means cannot change under the descriptor.

The behaviour matches :class:`~ra.env.local.LocalExecutionEnvironment`'s file writes (atomic
replace keeping mode and owner; in place for a file with other hard links; FIFOs refused;
parents created) and its error types and messages.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat

from ..local import _not_regular, fill_in_place, fill_like

__all__ = ["delete", "move", "write"]

_DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _changed(shown: str) -> PermissionError:
    return PermissionError(f"{shown}: a symlink appeared on the path while it was being changed; refused")


def _open_dir(real_dir: str, shown: str, *, create: bool) -> int:
    """A descriptor for ``real_dir`` reached without following any symlink (creating missing
    directories when ``create``)."""
    fd = os.open("/", _DIR_FLAGS)
    try:
        for part in real_dir.split("/"):
            if not part:
                continue
            try:
                nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise FileNotFoundError(f"File not found: {shown}") from None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                nfd = _reopen(part, fd, shown)
            except NotADirectoryError:
                raise _not_a_directory(part, fd, shown, create) from None
            except PermissionError:
                raise PermissionError(f"Permission denied: {shown}") from None
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def _reopen(part: str, fd: int, shown: str) -> int:
    try:
        return os.open(part, _DIR_FLAGS, dir_fd=fd)
    except NotADirectoryError:
        raise _not_a_directory(part, fd, shown, True) from None


def _not_a_directory(part: str, fd: int, shown: str, create: bool) -> OSError:
    try:
        mode = os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode
    except OSError:
        mode = 0
    if stat.S_ISLNK(mode):
        return _changed(shown)
    if create:
        return NotADirectoryError(f"Cannot create {shown}: a parent path is an existing file")
    return FileNotFoundError(f"File not found (a parent is not a directory): {shown}")


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def write(real: str, shown: str, data: bytes) -> None:
    """Create or replace the regular file at ``real`` (a resolved path: no symlink in it)."""
    parent, name = os.path.split(real)
    dfd = _open_dir(parent, shown, create=True)
    try:
        st = _lstat(name, dfd)
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise _changed(shown)
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(f"Is a directory, cannot write a file there: {shown}")
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise _not_regular(shown, st.st_mode)
        if st is None:
            _write_new(name, dfd, shown, data)
            return
        if not os.access(name, os.W_OK, dir_fd=dfd, follow_symlinks=False):
            raise PermissionError(f"Permission denied: {shown}")
        euid = os.geteuid()
        if st.st_nlink > 1 or (st.st_uid != euid and euid != 0) or not os.access(".", os.W_OK, dir_fd=dfd):
            _write_in_place(name, dfd, shown, data)
        else:
            _replace(name, dfd, shown, data, st)
    finally:
        os.close(dfd)


def _write_new(name: str, dfd: int, shown: str, data: bytes) -> None:
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=dfd)
    except FileExistsError:  # it appeared since the check: written in place, never through a link
        _write_in_place(name, dfd, shown, data)
        return
    except PermissionError:
        raise PermissionError(f"Permission denied: {shown}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dfd)
        raise


def _write_in_place(name: str, dfd: int, shown: str, data: bytes) -> None:
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(name, flags, 0o666, dir_fd=dfd)
    except PermissionError:
        raise PermissionError(f"Permission denied: {shown}") from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise _not_regular(shown, stat.S_IFIFO) from None
        if exc.errno == errno.ELOOP:
            raise _changed(shown) from None
        raise
    fill_in_place(fd, shown, data)


def _replace(name: str, dfd: int, shown: str, data: bytes, st: os.stat_result) -> None:
    short = name.encode("utf-8", "surrogateescape")[:100].decode("utf-8", "ignore")
    temp = f".{short}.{secrets.token_hex(4)}.ra-tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
    except PermissionError:
        raise PermissionError(f"Permission denied: {shown}") from None
    try:
        fill_like(fd, data, st)
        os.replace(temp, name, src_dir_fd=dfd, dst_dir_fd=dfd)  # replaces whatever is there, never follows it
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dfd)
        raise


def delete(real: str, shown: str) -> None:
    """Remove the file or symlink at ``real`` (its directory resolved; the last part is unlinked)."""
    parent, name = os.path.split(real)
    dfd = _open_dir(parent, shown, create=False)
    try:
        st = _lstat(name, dfd)
        if st is None:
            raise FileNotFoundError(f"File not found: {shown}")
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(f"Is a directory, not a file: {shown}")
        try:
            os.unlink(name, dir_fd=dfd)
        except FileNotFoundError:
            raise FileNotFoundError(f"File not found: {shown}") from None
        except PermissionError:
            raise PermissionError(f"Permission denied: {shown}") from None
    finally:
        os.close(dfd)


def move(src: str, dst: str, shown_src: str, shown_dst: str) -> None:
    """Rename ``src`` to ``dst`` (replacing a file there), creating the destination's parents.
    Across file systems a file or a symlink is copied and the source removed; a directory is not
    moved across file systems (an OSError says so) rather than copied through unchecked paths."""
    sparent, sname = os.path.split(src)
    dparent, dname = os.path.split(dst)
    sfd = _open_dir(sparent, shown_src, create=False)
    try:
        sst = _lstat(sname, sfd)
        if sst is None:
            raise FileNotFoundError(f"File not found: {shown_src}")
        dfd = _open_dir(dparent, shown_dst, create=True)
        try:
            dst_st = _lstat(dname, dfd)
            if dst_st is not None and stat.S_ISDIR(dst_st.st_mode):
                raise IsADirectoryError(f"Destination is an existing directory: {shown_dst}")
            try:
                os.replace(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)
            except PermissionError:
                raise PermissionError(f"Permission denied moving {shown_src} to {shown_dst}") from None
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
                _copy_across(sname, sfd, dname, dfd, sst, shown_src, shown_dst)
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)


def _copy_across(
    sname: str, sfd: int, dname: str, dfd: int, sst: os.stat_result, shown_src: str, shown_dst: str
) -> None:
    temp = f".{dname[:100]}.{secrets.token_hex(4)}.ra-tmp"
    if stat.S_ISLNK(sst.st_mode):
        os.symlink(os.readlink(sname, dir_fd=sfd), temp, dir_fd=dfd)
    elif stat.S_ISREG(sst.st_mode):
        src_fd = os.open(sname, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=sfd)
        try:
            out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
            try:
                while chunk := os.read(src_fd, 1 << 20):
                    os.write(out, chunk)
                os.fchmod(out, stat.S_IMODE(sst.st_mode))
            finally:
                os.close(out)
        finally:
            os.close(src_fd)
    else:
        raise OSError(
            errno.EXDEV, f"cannot move {shown_src} to {shown_dst} across file systems in the sandbox (not a file)"
        )
    try:
        os.replace(temp, dname, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dfd)
        raise
    os.unlink(sname, dir_fd=sfd)
