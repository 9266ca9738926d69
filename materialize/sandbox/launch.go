//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/capfs/capfs/vfs"
)

// hostDir maps an unsandboxed launch's working directory to the host through the
// mount holding it.
func hostDir(l *Launch) (string, error) {
	d := l.Dir
	if d == "" {
		for _, m := range l.Mounts {
			if m.Writable {
				d = m.Target
				break
			}
		}
		if d == "" {
			return "", nil // the caller's own working directory
		}
	}
	var best *Mount
	for i := range l.Mounts {
		m := &l.Mounts[i]
		if within(d, m.Target) && (best == nil || len(m.Target) > len(best.Target)) {
			best = m
		}
	}
	if best == nil {
		return "", &vfs.Error{Code: vfs.CodeNotFound, Op: "run", Path: d, Err: errors.New("working directory is in no grant (unsandboxed run)")}
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(d, best.Target), "/")
	base := best.Source
	if best.File != nil {
		// Resolved by the child through its own descriptor table (a copy of ours).
		base = "/proc/self/fd/" + strconv.Itoa(int(best.File.Fd()))
	}
	if rel == "" {
		return base, nil
	}
	return filepath.Join(base, filepath.FromSlash(rel)), nil
}

// within reports whether p is t or below it (both absolute and clean).
func within(p, t string) bool {
	if t == "/" {
		return true
	}
	return p == t || strings.HasPrefix(p, t+"/")
}

// validateLaunch checks what every wrapper relies on.
func validateLaunch(l *Launch) error {
	if l.Path == "" {
		return invalidLaunch("", "empty program path")
	}
	if strings.IndexByte(l.Path, 0) >= 0 {
		return invalidLaunch("", "NUL in program path")
	}
	for _, a := range l.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return invalidLaunch(l.Path, "NUL in an argument")
		}
	}
	for _, e := range l.Env {
		k, _, ok := strings.Cut(e, "=")
		if !ok || k == "" || strings.IndexByte(e, 0) >= 0 {
			return invalidLaunch(l.Path, fmt.Sprintf("environment entry %q is not KEY=value", cut(e, 64)))
		}
	}
	if l.Dir != "" && !cleanAbs(l.Dir) {
		return invalidLaunch(l.Dir, "working directory is not an absolute clean path")
	}
	for _, m := range l.Mounts {
		if why := mountProblem(m); why != "" {
			return invalidLaunch(m.Target, why)
		}
	}
	return nil
}

// invalidLaunch is validateLaunch's error about p.
func invalidLaunch(p, why string) error {
	return &vfs.Error{Code: vfs.CodeInvalidPath, Op: "run", Path: p, Err: errors.New(why)}
}

// mountProblem says what is wrong with m ("" if nothing): its target must
// be absolute and clean below /, its source (without a File) an absolute
// host path, and its read-only paths clean relative paths in a writable
// mount.
func mountProblem(m Mount) string {
	if !cleanAbs(m.Target) || m.Target == "/" {
		return "mount target is not an absolute clean path below /"
	}
	if m.File == nil && (m.Source == "" || !filepath.IsAbs(m.Source)) {
		return "mount source is not an absolute host path"
	}
	if len(m.ReadOnly) > 0 && !m.Writable {
		return "read-only paths inside a read-only mount"
	}
	for _, p := range m.ReadOnly {
		if !cleanRelative(p) {
			return "a read-only path inside the mount is not a clean relative path"
		}
	}
	return ""
}

// cleanRelative reports whether p is a clean relative path below ".".
func cleanRelative(p string) bool {
	return !(p == "" || p == "." || p[0] == '/' || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") || strings.IndexByte(p, 0) >= 0)
}

func cleanAbs(p string) bool {
	return p != "" && p[0] == '/' && path.Clean(p) == p && strings.IndexByte(p, 0) < 0
}

// MinimalEnv returns the environment every run starts from: PATH (the standard
// directories), HOME=/tmp, LANG=C.UTF-8, and TERM when the caller has it.
func MinimalEnv() []string {
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/tmp",
		"LANG=C.UTF-8",
	}
	if t, ok := os.LookupEnv("TERM"); ok && t != "" {
		env = append(env, "TERM="+t)
	}
	return env
}

// mergeEnv returns base with add applied: an entry of add replaces base's entry of
// the same key, in place; new keys are appended in add's order. The last entry of a
// key wins.
func mergeEnv(base, add []string) []string {
	out := append([]string(nil), base...)
	idx := make(map[string]int, len(out))
	for i, e := range out {
		k, _, _ := strings.Cut(e, "=")
		idx[k] = i
	}
	for _, e := range add {
		k, _, _ := strings.Cut(e, "=")
		if i, ok := idx[k]; ok {
			out[i] = e
			continue
		}
		idx[k] = len(out)
		out = append(out, e)
	}
	return out
}

func envValue(env []string, key string) string {
	v := ""
	for _, e := range env {
		if k, val, ok := strings.Cut(e, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// lookPath finds an executable regular file named file in the directories of
// pathList.
func lookPath(file, pathList string) (string, error) {
	for _, d := range filepath.SplitList(pathList) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, file)
		fi, err := os.Stat(p)
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// commandLine renders a command for the audit trail: shell-quoted where needed,
// cut at 512 bytes.
func commandLine(prog string, args []string) string {
	var b strings.Builder
	for i, a := range append([]string{prog}, args...) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(shellQuote(a))
		if b.Len() > 512 {
			break
		}
	}
	return cut(b.String(), 512)
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, "'", `'\''`), "\x00", `\0`) + "'"
}

// cut shortens s to at most n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
