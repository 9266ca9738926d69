// Package sandbox runs a command inside an isolation boundary that sees only the
// grants it is given: a chain of process wrappers, the built-in one being bubblewrap.
//
// The package builds on Linux only (bubblewrap, memfd, cgroups); on other
// systems it is empty.
//
// # The wrapper chain
//
// A Launch describes one command: program, arguments, working directory,
// environment, the subject's grants (Mounts) and standard streams. A Runner applies
// its Wrappers to it in registration order; each Wrapper receives the launch as the
// previous one left it and returns the launch to hand to the next one (usually a
// new program that runs the old one, as bubblewrap does). The last launch is started
// with os/exec. The Result names every wrapper that handled the run: this is the
// visibility contract, so a user or an agent can always tell which execution
// boundary ran a command.
//
// A Wrapper that also implements Sandbox (has a Probe method) is an isolation
// boundary. Run probes every Sandbox in the chain before running anything. If a
// probe fails, or the chain has no Sandbox at all, Run refuses with an error
// matching ErrUnavailable (and errors.ErrUnsupported, code not_supported) unless
// Runner.AllowUnsandboxed is set; then the Sandbox wrappers are left out, the other
// wrappers still apply, the Result says Sandboxed=false, and the audit trail gets a
// "sandbox_probe" event recording that the run went ahead without isolation.
// Every run, refused or not, is recorded as one "run" event (see Runner.Run).
//
// # The bubblewrap sandbox
//
// Bubblewrap (bwrap ≥ 0.8) runs the command
//
//   - in new user, mount, pid, network, ipc, uts and cgroup namespaces
//     (--unshare-all --unshare-user), as uid/gid 1000 (configurable, never 0)
//     inside its own user namespace, with no capabilities and with further user namespaces disabled. As root
//     without a user namespace, a sandboxed process could remount / read-write;
//     inside one it cannot touch the read-only binds, which are locked by the kernel;
//   - with no network: only a loopback interface of its own;
//   - with --die-with-parent and --new-session (no terminal injection through the
//     caller's tty);
//   - with a cleared environment plus a minimal one (PATH, HOME=/tmp, LANG=C.UTF-8,
//     TERM when the host has it) and what the Launch passes;
//   - on a new root (a private tmpfs, gone with the run) holding /usr and /etc
//     read-only (/bin, /lib, /lib64, /sbin,
//     /lib32, /libx32 as the host has them: symlinks re-created, directories
//     bound read-only), a fresh /proc, a minimal /dev and an empty tmpfs /tmp;
//   - with the writable grants bound read-write and every other grant read-only,
//     at their Target. A grant given as an open descriptor (Mount.File, e.g. an
//     O_PATH directory fd) is passed to bwrap as an extra file and bound with
//     --bind-fd / --ro-bind-fd, which bind /proc/self/fd/N: no host path is
//     resolved again, and bwrap closes the descriptor before running the command,
//     so the command never holds it.
//
// Optionally (BubblewrapOptions.GoRoot) the Go toolchain is bound read-only at its
// host path and its bin directory put first in PATH, with GOTOOLCHAIN=local, so
// `go build` works inside on modules whose dependencies need no download; with
// BubblewrapOptions.GoModCache the host's module cache is bound read-only too
// (GOPROXY=off), so dependencies the host has downloaded resolve. Default sets
// both from the host's `go env`. The build cache is never shared (the sandbox
// could poison it for the host): each run starts with an empty one in /tmp.
//
// What it guarantees: the command cannot write outside its writable grants and /tmp
// (a tmpfs that disappears with the run), cannot reach any network, not even the
// host's loopback, does not inherit the caller's environment or descriptors, and
// dies with the caller (and with ctx: Run kills the whole process group).
//
// Descriptors: Go opens every file close-on-exec, but a descriptor the host
// process itself inherited (from a shell or a supervisor) is not, and neither
// os/exec nor bubblewrap would close it. Run therefore marks every descriptor of
// the process above 2 close-on-exec before it starts a command (a process-wide
// change: a host program that hands descriptors to its children implicitly, rather
// than through exec.Cmd.ExtraFiles, loses that). Launch.ExtraFiles are still
// passed.
//
// What it does not guarantee: confidentiality of what /usr and /etc hold. The
// caller is usually root, and bwrap maps the sandbox uid onto the caller's uid, so
// to the host kernel the command owns root's files (without any capability). The
// wrapper therefore hides every entry of /etc that an ordinary user could not read
// (shadow, private keys: files become unreadable, directories empty) at each run,
// but /usr is bound as it is. CPU time and syscall filtering (seccomp) are not
// limited. Mount targets may not nest or overlap each other or the system binds:
// Wrap refuses such a launch; inside a writable grant, Mount.ReadOnly names
// entries bound read-only over themselves (a write there fails with EROFS).
//
// # Limits
//
// Every run is bounded (BubblewrapOptions; defaults: DefaultMaxProcs = 1024
// processes and threads, or 128 per CPU when more; half of the host's RAM
// (DefaultMemoryLimit); DefaultTmpSize = 1 GiB of /tmp; a negative value lifts
// a limit):
//
//   - /tmp is a tmpfs of TmpSize bytes (bwrap --size): a write past it fails
//     with ENOSPC;
//   - processes and memory are bounded by a cgroup made for the run, when one
//     can be made here: cgroup v2 beside the caller's cgroup when the pids and
//     memory controllers are enabled there (the caller's cgroup.controllers
//     lists them) and the caller may create cgroups in its parent (root, or a
//     delegated subtree), else cgroup v1 when the caller may create cgroups in
//     the pids and memory hierarchies (root usually may). A fork past MaxProcs fails with EAGAIN; a sandbox past
//     MaxMemory (its processes, its /tmp and page cache together, no swap) has a
//     process killed by the OOM killer. bwrap is started by a /bin/sh launcher
//     that moves itself into the cgroup and execs bwrap, so every process of the
//     run is born inside; the cgroup is removed when the run ends (what is left
//     in it is killed first);
//   - otherwise rlimits, set by the same launcher: RLIMIT_NPROC (which the
//     kernel does not apply to a sandbox whose uid maps to root on the host: a
//     root caller then has no process limit) and RLIMIT_DATA (per process, not
//     for the sandbox as a whole).
//
// BubblewrapWrapper.Limits reports the limits and the mechanism in use; capfs run
// prints them.
//
// # Host paths in /proc/self/mountinfo
//
// A bind mount's entry in mountinfo names, as its root, the bound directory's
// path within its filesystem: a command inside can read where on the host each
// grant comes from. The system binds show /usr and /etc (and its masks, as
// /null of devtmpfs), which the mount points show anyway. The Go root and
// module cache, when not under /usr, are bound at GoRootTarget and
// GoModCacheTarget, and PATH and GOMODCACHE name those; their entries, as a
// cache's (CacheDir) and a grant's, show the Source's path within its
// filesystem, whether given by path or by descriptor (Mount.File changes how
// the source is resolved, not what mountinfo prints): a caller that must not
// reveal its paths gives sources that are, or lie in, a filesystem of their
// own (as materialize's private checkouts on a tmpfs are: see
// materialize.Options.Private; capfs run serves its caches, the module cache
// and the toolchain through a FUSE mount of its own), whose entry then shows
// "/" or the path within it.
//
// bwrap's own argument list, which the sandbox reads as /proc/1/cmdline,
// holds only "--args FD" and the command: the options, which name host
// directories, come through a sealed memory file. A bwrap binary of the
// user's own (under the home directory, or outside /usr, /bin and /sbin and
// owned by a caller other than root) runs from a sealed copy in memory
// (argv[0] "bwrap", or under the limits' launcher its descriptor
// /proc/self/fd/N), so /proc/1/exe and /proc/1/maps show "/memfd:bwrap"
// rather than its path; where memory files cannot be executed, its path
// shows there.
//
// Files the command creates in a writable grant belong, on the host, to the
// caller's uid (root, when capfs runs as root), and the command may set their
// setuid and setgid bits (the sandbox's own view mounts them nosuid; the host's does
// not). A writable grant must therefore be a directory no other user can reach,
// such as materialize's 0700 checkouts (whose sync-back strips those bits), never a
// shared host directory.
//
// Unsandboxed runs (AllowUnsandboxed) have none of these properties: the command
// runs as the caller, on the host filesystem, with the minimal environment plus the
// Launch's; its working directory is mapped to the host through the grant holding
// it (a descriptor grant through /proc/self/fd/N). It still runs in a session of
// its own, killed as a whole when ctx ends.
package sandbox
