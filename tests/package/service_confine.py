#!/usr/bin/python3
"""service_confine.py UNIT -- COMMAND...: runs COMMAND under the system-call
filter that the systemd UNIT's SystemCallFilter=, SystemCallErrorNumber= and
MemoryDenyWriteExecute= lines describe, as systemd 252 builds it, without
systemd: what the tools an agent starts (bash, python3, node, bubblewrap)
meet when agentloop runs as that service.

- The allow list is the union of the non-`~` lines' names and groups, the
  `~` lines' names are removed from it (systemd.exec(5)); groups resolve
  through `systemd-analyze syscall-filter`. A call outside it fails with
  SystemCallErrorNumber's errno, or kills the process (SIGSYS) without one.
- MemoryDenyWriteExecute=yes becomes prctl(PR_SET_MDWE,
  PR_MDWE_REFUSE_EXEC_GAIN): the kernel's form of the same rule (no mapping
  both writable and executable, no mapping made executable later).

Needs Debian's python3-seccomp (libseccomp's binding), hence /usr/bin/python3.
Exits 125 when the filter cannot be set up."""

import ctypes
import errno
import os
import subprocess
import sys

import seccomp

PR_SET_MDWE = 65
PR_MDWE_REFUSE_EXEC_GAIN = 1


def syscall_groups():
    """{"@name": [member, ...]} from systemd-analyze (members may be groups)."""
    out = subprocess.run(["systemd-analyze", "syscall-filter"], capture_output=True,
                         text=True, check=True).stdout
    groups, current = {}, None
    for line in out.splitlines():
        item = line.strip()
        if not item or item.startswith("#"):
            continue
        if not line[0].isspace() and item.startswith("@"):
            current = groups.setdefault(item, [])
        elif current is not None:
            current.append(item.split()[0])
    return groups


def resolve(names, groups, seen=None):
    seen = set() if seen is None else seen
    out = set()
    for n in names:
        if n.startswith("@"):
            if n in seen:
                continue
            seen.add(n)
            if n not in groups:
                raise ValueError("unknown system call group " + n)
            out |= resolve(groups[n], groups, seen)
        else:
            out.add(n)
    return out


def unit_settings(path):
    """(allow lines, deny lines, errno name or None, MDWE on) of [Service]."""
    allow, deny, err, mdwe = [], [], None, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            key, sep, value = line.strip().partition("=")
            if not sep:
                continue
            if key == "SystemCallFilter":
                if value.startswith("~"):
                    deny.extend(value[1:].split())
                else:
                    allow.extend(value.split())
            elif key == "SystemCallErrorNumber":
                err = value.strip()
            elif key == "MemoryDenyWriteExecute":
                mdwe = value.strip() in ("yes", "true", "1", "on")
    return allow, deny, err, mdwe


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit("usage: service_confine.py UNIT -- COMMAND...")
    allow, deny, err, mdwe = unit_settings(sys.argv[1])
    try:
        if allow:
            groups = syscall_groups()
            names = resolve(allow, groups) - resolve(deny, groups)
            action = seccomp.ERRNO(getattr(errno, err)) if err else seccomp.KILL_PROCESS
            f = seccomp.SyscallFilter(defaction=action)
            for name in sorted(names):
                try:
                    f.add_rule(seccomp.ALLOW, name)
                except (RuntimeError, ValueError):
                    pass  # a name this libseccomp or architecture lacks
            f.load()
        if mdwe:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_SET_MDWE)")
    except (OSError, ValueError, RuntimeError, subprocess.CalledProcessError) as e:
        print("service_confine: %s" % e, file=sys.stderr)
        sys.exit(125)
    os.execvp(sys.argv[3], sys.argv[3:])


if __name__ == "__main__":
    main()
