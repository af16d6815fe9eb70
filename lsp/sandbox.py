"""Containment for the processes that run user code: limits, process trees, namespaces.

Used by `lsp.zygote` in two places. The run process calls `contain()` right after it is
forked, before any user code: from then on nothing it does can lift its limits or leave
processes behind. The zygote (which never runs user code) calls `become_subreaper()` once
and `sweep()` after every run, so processes that escaped their run's process group are
still found and killed.

What each measure gives, and its limits (the README's "Sandbox" section says the same):

- Own process group, `PR_SET_PDEATHSIG`: the run dies with the zygote, and everything it
  starts that does not leave the group is killed with one `killpg`.
- `PR_SET_CHILD_SUBREAPER` on the run and on the zygote: a process that leaves the group
  (`setsid`, a double-forking daemon) is re-parented to one of them when its parent exits,
  not to init, so `sweep()` finds it by its parent pid. A process whose parent is still
  alive is found through that parent. Linux only; elsewhere only the group is killed.
- Hard rlimits (`soft == hard`): the address space, and no core files. Lowering a hard limit
  is irreversible without `CAP_SYS_RESOURCE`; a run started as root gives that capability
  up (bounding set and effective/permitted sets) before user code starts. A GPU run caps
  its data segment (`RLIMIT_DATA`: heap and private writable mappings) instead of its
  address space, because the CUDA driver reserves far more address space than it uses
  (`cuInit` fails under an address-space cap); device memory is not counted either way.
- `PR_SET_NO_NEW_PRIVS`: no set-uid or file-capability program the run executes gains
  privileges.
- `strict` (opt-in): new user and network namespaces, so the run has no network at all
  (only a loopback device that is down) and no capability outside its namespace. It needs
  unprivileged user namespaces; where they are off the run fails with a diagnostic instead
  of running unconfined.

Nothing here limits what the run can read, or write with the user's own permissions.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import sys
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

SANDBOXES = ("standard", "strict")  # the modes a run can be confined in; "strict" adds namespaces

_LINUX = sys.platform.startswith("linux")
_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_DROP = 24
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_CAP_SYS_RESOURCE = 24
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_SWEEP_ROUNDS = 200


class SandboxError(Exception):
    """The requested containment could not be set up; the run must not go ahead."""


@dataclass(frozen=True, kw_only=True)
class Containment:
    memory_mb: int = 4096  # memory limit of the run, 0 for none
    strict: bool = False  # also user + network namespaces; fails closed where unavailable
    address_space: bool = True  # memory_mb caps the address space; False: the data segment (GPU runs)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, arg: int) -> None:
    if _libc().prctl(option, arg, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def set_death_signal(signum: int) -> None:
    """Linux: the kernel sends `signum` to this process when its parent exits."""
    if _LINUX:
        with contextlib.suppress(OSError):
            _prctl(_PR_SET_PDEATHSIG, signum)


def become_subreaper() -> bool:
    """Orphaned descendants re-parent to this process instead of init (Linux 3.4+)."""
    if not _LINUX:
        return False
    try:
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    except OSError:
        return False
    return True


def contain(policy: Containment) -> None:
    """Confines the calling (freshly forked, single-threaded) process; see the module docstring."""
    os.setpgid(0, 0)
    set_death_signal(signal.SIGKILL)
    become_subreaper()
    if _LINUX:
        with contextlib.suppress(OSError):
            _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    if policy.strict:
        _enter_namespaces()
    elif os.geteuid() == 0:
        _drop_resource_capability()
    _hard_limits(policy.memory_mb, policy.address_space)


def _hard_limits(memory_mb: int, address_space: bool) -> None:
    import resource

    def clamp(kind: int, value: int) -> None:
        _, hard = resource.getrlimit(kind)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(kind, (value, value))

    clamp(resource.RLIMIT_CORE, 0)
    if memory_mb > 0:
        clamp(resource.RLIMIT_AS if address_space else resource.RLIMIT_DATA, memory_mb * 1024 * 1024)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_resource_capability() -> None:
    """Root: gives up CAP_SYS_RESOURCE for good, so the hard limits below stay hard."""
    if not _LINUX:
        return
    libc = _libc()
    with contextlib.suppress(OSError):
        _prctl(_PR_CAPBSET_DROP, _CAP_SYS_RESOURCE)  # not even an exec'd set-uid program regains it
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise SandboxError(f"capget failed: {os.strerror(ctypes.get_errno())}")
    bit = ~(1 << _CAP_SYS_RESOURCE) & 0xFFFFFFFF
    data[0].effective &= bit
    data[0].permitted &= bit
    data[0].inheritable &= bit
    if libc.capset(ctypes.byref(header), data) != 0:
        raise SandboxError(f"cannot drop CAP_SYS_RESOURCE: {os.strerror(ctypes.get_errno())}")


def _enter_namespaces() -> None:
    """New user + network namespaces; the user keeps its own uid and gid inside."""
    if not _LINUX:
        raise SandboxError("the strict sandbox needs Linux namespaces")
    uid, gid = os.geteuid(), os.getegid()
    if _libc().unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise SandboxError(f"cannot create user and network namespaces: {os.strerror(err)}")
    try:
        with open("/proc/self/setgroups", "w") as handle:
            handle.write("deny")
        with open("/proc/self/uid_map", "w") as handle:
            handle.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as handle:
            handle.write(f"{gid} {gid} 1")
    except OSError as exc:
        raise SandboxError(f"cannot map the user into its namespace: {exc}") from exc


def strict_available() -> str | None:
    """None when `strict` works here, else why not (probed in a throwaway child)."""
    if not _LINUX:
        return "the strict sandbox needs Linux namespaces"
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.close(read_end)
        try:
            _enter_namespaces()
            message = b""
        except SandboxError as exc:
            message = str(exc).encode()
        os.write(write_end, message)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as handle:
        reason = handle.read().decode()
    os.waitpid(pid, 0)
    return reason or None


# ------------------------------------------------------------------ finding and killing


def _proc_stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, pgrp, session) of a process, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    return fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3])


def _all_pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def reap_any() -> list[tuple[int, int]]:
    """Collects every exited child of this process: (pid, wait status) pairs."""
    out = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return out
        except InterruptedError:
            continue
        if pid == 0:
            return out
        out.append((pid, status))


def sweep(protect: Collection[int] = (), reap: Callable[[], object] = reap_any) -> int:
    """Kills this process's children and the members of its process group, except `protect`.

    Repeats until none is left: a killed process's own children re-parent here (this
    process is a subreaper), so each round reaches one level further down. Returns how
    many processes were killed. Without /proc it only kills the process group.
    """
    me, group = os.getpid(), os.getpgid(0)
    if not os.path.isdir("/proc"):
        return 0
    killed: set[int] = set()
    for _ in range(_SWEEP_ROUNDS):
        targets = []
        for pid in _all_pids():
            if pid == me or pid in protect:
                continue
            stat = _proc_stat(pid)
            if stat is None or stat[0] in ("Z", "X"):
                continue
            _, ppid, pgrp, _ = stat
            if ppid == me or (group == me and pgrp == group):  # the group only when we lead it
                targets.append(pid)
        reap()
        if not targets:
            return len(killed)
        for pid in targets:
            _kill(pid)
            killed.add(pid)
        time.sleep(0.005)  # let the killed ones exit, so their children re-parent here
    return len(killed)


def kill_session(sid: int) -> int:
    """Kills every process of session `sid` (the zygote's): the last resort of the parent."""
    count = 0
    for pid in _all_pids():
        stat = _proc_stat(pid)
        if stat is not None and stat[3] == sid and pid != os.getpid():
            _kill(pid)
            count += 1
    return count


def is_alive(pid: int) -> bool:
    stat = _proc_stat(pid) if os.path.isdir("/proc") else None
    if stat is not None:
        return stat[0] not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    return True
