package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/capfs/capfs/internal/termsafe"
	"github.com/capfs/capfs/vfs"
)

// Exit codes. A sandboxed run exits with the command's own status instead of
// exitOK/exitFailed, except when the run could not start or its changes could not
// be synced back.
const (
	exitOK       = 0 // success
	exitFailed   = 1 // an operation failed (or grep/glob found nothing)
	exitUsage    = 2 // bad flags, arguments, mount specs or configuration
	exitSyncBack = 3 // run: some of the sandbox's changes were refused or conflicted and are not applied (none are, unless --on-reject apply-rest); the summary lists them and the checkout holding them is kept
)

// cliError is an error with the exit code it maps to. quiet suppresses the message
// (grep's "no match").
type cliError struct {
	code  int
	err   error
	quiet bool
}

func (e *cliError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *cliError) Unwrap() error { return e.err }

// usageErrorf reports a usage problem (exit 2).
func usageErrorf(format string, args ...any) error {
	return &cliError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// usageError marks err as a usage problem (exit 2).
func usageError(err error) error {
	if err == nil {
		return nil
	}
	return &cliError{code: exitUsage, err: err}
}

// failed marks err as an operation failure (exit 1) unless it already carries a code.
func failed(err error) error {
	if err == nil {
		return nil
	}
	var ce *cliError
	if errors.As(err, &ce) {
		return err
	}
	return &cliError{code: exitFailed, err: err}
}

// exitStatus ends the process with code and no message.
func exitStatus(code int) error {
	return &cliError{code: code, quiet: true}
}

// exitCodeOf maps an error returned by the command tree to the process exit code.
// Errors that carry no code come from cobra itself (unknown command, a bad flag or
// argument count): usage errors.
func exitCodeOf(err error) int {
	if err == nil {
		return exitOK
	}
	var ce *cliError
	if errors.As(err, &ce) {
		return ce.code
	}
	return exitUsage
}

// reportError writes err to w as "capfs: <op> <guest path>: <message> (<code>)"
// for capfs errors, or "capfs: <message>" for others. It writes nothing for quiet
// errors.
func reportError(w io.Writer, err error) {
	if err == nil {
		return
	}
	var ce *cliError
	if errors.As(err, &ce) && ce.quiet && ce.err == nil {
		return
	}
	fmt.Fprintln(w, "capfs: "+showError(err))
}

// formatError renders err in the CLI's one-line form (without the "capfs: " prefix).
func formatError(err error) string {
	var ve *vfs.Error
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var b strings.Builder
	// A prefix added by the CLI (fmt.Errorf("...: %w", vfsErr)) is kept.
	if outer := err.Error(); outer != ve.Error() && strings.HasSuffix(outer, ve.Error()) {
		b.WriteString(strings.TrimSuffix(outer, ve.Error()))
	}
	head := opText(ve.Op)
	if ve.Path != "" {
		if head != "" {
			head += " "
		}
		head += displayPath(ve.Path)
	}
	if ve.Dest != "" {
		head += " -> " + displayPath(ve.Dest)
	}
	if head != "" {
		b.WriteString(head)
		b.WriteString(": ")
	}
	b.WriteString(messageOf(ve))
	b.WriteString(" (")
	b.WriteString(string(ve.Code))
	b.WriteString(")")
	if h := hintFor(ve); h != "" {
		b.WriteString("; ")
		b.WriteString(h)
	}
	var he *hintError
	if errors.As(err, &he) {
		b.WriteString("; ")
		b.WriteString(he.hint)
	}
	return b.String()
}

// opNames turns the operation names capfs errors carry (the Dir method or
// backend call that failed) into what the user asked for.
var opNames = map[string]string{
	"OpenFile": "open", "Open": "open", "ReadFile": "read", "File.Read": "read",
	"Handle.Read": "read", "Handle.ReadDir": "list", "Handle.Seek": "seek",
	"Handle.Stat": "stat", "Handle.Write": "write", "File.Write": "write",
	"ReadDir": "list", "List": "list", "readdir": "list", "Stat": "stat",
	"Lstat": "stat", "Exists": "stat", "Readlink": "read link", "readlink": "read link",
	"WriteFile": "write", "Append": "append to", "CreateFile": "create",
	"CreateDir": "create directory", "MkdirAll": "create directory", "mkdir": "create directory",
	"OpenDir": "open directory", "Sub": "open directory", "sub": "open directory",
	"Remove": "remove", "RemoveAll": "remove", "Move": "move", "rename": "move",
	"Copy": "copy", "Symlink": "create symlink", "symlink": "create symlink",
	"Link": "link", "Chmod": "chmod", "Chtimes": "set times of", "Walk": "walk",
	"Glob": "glob", "Check": "check", "syncback": "sync back", "writetree": "write tree",
}

// opText is the user-facing name of an error's operation: a known method name is
// translated, any other CamelCase or dotted Go name is spelled out in lower case
// ("ReadAt" -> "read at"), and lower-case names are kept.
func opText(op string) string {
	if t, ok := opNames[op]; ok {
		return t
	}
	if op == "" || op[0] < 'A' || op[0] > 'Z' {
		return op
	}
	if i := strings.LastIndexByte(op, '.'); i >= 0 {
		op = op[i+1:]
	}
	var b strings.Builder
	for i, r := range op {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte(' ')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// hintFor says what to do about an error, where there is something to say.
func hintFor(e *vfs.Error) string {
	switch e.Code {
	case vfs.CodePermission:
		if strings.Contains(e.Message(), "secret") {
			return "to let capfs read it, pass --allow-secret GLOB (or --allow-test-fixtures for test data)"
		}
		return "the policy refuses this; see --policy"
	case vfs.CodeReadOnly:
		return "the mount or capability is read-only (see capfs mounts)"
	case vfs.CodeOutside:
		return "paths are namespace paths (see capfs mounts), and none leaves the namespace"
	case vfs.CodeTooLarge:
		return "the file is over the read limit"
	case vfs.CodeRevoked, vfs.CodeClosed:
		return "the session ended; run the command again"
	}
	return ""
}

// show escapes guest-controlled text (names, paths, messages that quote them)
// for the terminal: control characters, bidi overrides and invalid UTF-8 are
// shown as Go/JSON escapes and backslashes doubled (see internal/termsafe). Every
// line the CLI prints that holds a guest name goes through it exactly once.
func show(s string) string { return termsafe.Escape(s) }

// showPath is displayPath, escaped for the terminal.
func showPath(p string) string { return show(displayPath(p)) }

// showError is formatError, escaped for the terminal.
func showError(err error) string { return show(formatError(err)) }

// showGuest is joinGuest, escaped for the terminal.
func showGuest(p vfs.Path, rel string) string { return show(joinGuest(p, rel)) }

// displayPath shows a guest path; the namespace root is "/". It does not escape
// (see showPath).
func displayPath(p string) string {
	if p == "." || p == "" {
		return "/"
	}
	return p
}

// messageOf is the human part of a capfs error: its message, its cause, or a
// description of its code.
func messageOf(e *vfs.Error) string {
	if m := e.Message(); m != "" {
		return m
	}
	if e.Err != nil {
		var inner *vfs.Error
		if errors.As(e.Err, &inner) && inner != e {
			return messageOf(inner)
		}
		return e.Err.Error()
	}
	if d, ok := codeText[e.Code]; ok {
		return d
	}
	return strings.ReplaceAll(string(e.Code), "_", " ")
}

var codeText = map[vfs.Code]string{
	vfs.CodeOutside:      "path leaves the namespace",
	vfs.CodeInvalidPath:  "invalid path",
	vfs.CodePermission:   "permission denied",
	vfs.CodeReadOnly:     "read-only",
	vfs.CodeRevoked:      "capability revoked",
	vfs.CodeNotFound:     "no such file or directory",
	vfs.CodeExists:       "already exists",
	vfs.CodeNotDir:       "not a directory",
	vfs.CodeIsDir:        "is a directory",
	vfs.CodeNotEmpty:     "directory not empty",
	vfs.CodeTooLarge:     "file too large",
	vfs.CodeQuota:        "quota exceeded",
	vfs.CodeTooManyLinks: "too many levels of symbolic links",
	vfs.CodeNotRegular:   "not a regular file",
	vfs.CodeCrossMount:   "crosses mounts",
	vfs.CodeConflict:     "conflict",
	vfs.CodeClosed:       "closed",
	vfs.CodeNotSupported: "not supported",
	vfs.CodeIO:           "input/output error",
	vfs.CodeCanceled:     "canceled",
}

// hintError is an error with a hint that needs the session to give (which
// mount holds a path), printed after the error's own (see formatError).
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() }
func (e *hintError) Unwrap() error { return e.err }

// withMountHint adds to a not_found error whose path lies under no mount the
// hint that namespace paths start with a mount: the mount that holds that
// path, if one does ("project/main.go"), else the mounts.
func withMountHint(ctx context.Context, s *session, err error) error {
	var ve *vfs.Error
	if !errors.As(err, &ve) || ve.Code != vfs.CodeNotFound || ve.Path == "" {
		return err
	}
	p, perr := vfs.ParseGuest(ve.Path)
	if perr != nil || p.IsRoot() {
		return err
	}
	if _, _, ok := s.mountAt(p); ok {
		return err
	}
	var names []string
	for _, m := range s.Mounts {
		q := m.Path.Join(p)
		if ok, _ := s.Root.Exists(ctx, q.String()); ok {
			return &hintError{err: err, hint: "paths start with a mount: " + q.String()}
		}
		names = append(names, displayPath(m.Path.String()))
	}
	if len(names) == 0 {
		return err
	}
	return &hintError{err: err, hint: "paths start with a mount: " + strings.Join(names, ", ") + " (capfs mounts)"}
}

// showMessage is showError without the operation, for a line whose prefix
// names it already ("capfs: run: sandbox unavailable: ...", not "run: run:").
func showMessage(err error) string {
	var ve *vfs.Error
	if errors.As(err, &ve) && ve.Path == "" && err.Error() == ve.Error() {
		c := *ve
		c.Op = ""
		return show(formatError(&c))
	}
	return showError(err)
}

// sandboxHint says what to do when no sandbox can work here: install
// bubblewrap when it is missing, else let it create user namespaces; or run
// without isolation.
func sandboxHint() string {
	const unsandboxed = "or run with --allow-unsandboxed (no isolation; audited as such)"
	if _, err := exec.LookPath("bwrap"); err != nil {
		return "install bubblewrap (apt-get install bubblewrap, dnf install bubblewrap) " + unsandboxed
	}
	return "bubblewrap is installed but cannot create its namespaces here: allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0) " + unsandboxed
}

// errMessage is an error's message and code without the operation (the path is
// printed by the caller): "no such file or directory (not_found)".
func errMessage(err error) string {
	var ve *vfs.Error
	if errors.As(err, &ve) {
		return messageOf(ve) + " (" + string(ve.Code) + ")"
	}
	return err.Error()
}
