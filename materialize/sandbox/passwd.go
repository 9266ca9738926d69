//go:build linux

package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// SandboxUser is the name of the sandbox's own account and group: what `id`,
// `whoami` and `ls -l` show for the sandbox's uid and gid inside.
const SandboxUser = "capfs"

// systemIDs is where the host's ordinary accounts begin: the sandbox's
// /etc/passwd and /etc/group keep the host's system accounts (below it, and
// nobody) and leave out the others, whose names are the host's users.
const systemIDs = 1000

// nobodyID is the overflow uid and gid (nobody, nogroup), kept.
const nobodyID = 65534

// accountFiles are the sandbox's /etc/passwd and /etc/group, each a sealed
// file for bwrap's --ro-bind-data. The zero value binds nothing.
type accountFiles struct {
	files   []*os.File
	targets []string
}

// sandboxAccounts makes the sandbox's /etc/passwd and /etc/group from the
// host's, so that inside the sandbox uid and gid are SandboxUser rather than
// whichever host account holds the same number (see sandboxPasswd and
// sandboxGroup). Where the host has no regular /etc/passwd or /etc/group it
// binds nothing for that file.
func sandboxAccounts(uid, gid int) (*accountFiles, error) {
	a := &accountFiles{}
	for _, f := range []struct {
		target string
		make   func([]byte, int, int) []byte
	}{{"/etc/passwd", sandboxPasswd}, {"/etc/group", sandboxGroup}} {
		fi, err := os.Lstat(f.target)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		host, err := os.ReadFile(f.target)
		if err != nil {
			continue
		}
		file, err := SealedFile("capfs-"+strings.TrimPrefix(f.target, "/etc/"), bytes.NewReader(f.make(host, uid, gid)), false)
		if err != nil {
			a.Close()
			return nil, err
		}
		a.files = append(a.files, file)
		a.targets = append(a.targets, f.target)
	}
	return a, nil
}

// bind appends to bwrap's arguments a the binds of the files over their
// targets, each file passed as the next of extra (descriptor 3 + its index).
func (a *accountFiles) bind(args []string, extra []*os.File) ([]string, []*os.File) {
	for i, f := range a.files {
		extra = append(extra, f)
		args = append(args, "--ro-bind-data", strconv.Itoa(2+len(extra)), a.targets[i])
	}
	return args, extra
}

// Close closes the files.
func (a *accountFiles) Close() {
	for _, f := range a.files {
		f.Close()
	}
	a.files = nil
}

// sandboxPasswd is host (an /etc/passwd) with only its system accounts (uid
// below 1000, and nobody), in their order, and the sandbox's account
// appended: SandboxUser at uid and gid, home /tmp (the sandbox's HOME), shell
// /bin/sh. An account at uid, or named SandboxUser, is left out.
func sandboxPasswd(host []byte, uid, gid int) []byte {
	var b bytes.Buffer
	for _, line := range strings.Split(string(host), "\n") {
		f := strings.Split(line, ":")
		if len(f) != 7 || f[0] == SandboxUser || !systemID(f[2], uid) {
			continue
		}
		b.WriteString(line + "\n")
	}
	fmt.Fprintf(&b, "%s:x:%d:%d:capfs sandbox:/tmp:/bin/sh\n", SandboxUser, uid, gid)
	return b.Bytes()
}

// sandboxGroup is host (an /etc/group) with only its system groups (gid
// below 1000, and nogroup), in their order and without members (names of
// host users), and the sandbox's group appended: SandboxUser at gid. A group
// at gid, or named SandboxUser, is left out.
func sandboxGroup(host []byte, _, gid int) []byte {
	var b bytes.Buffer
	for _, line := range strings.Split(string(host), "\n") {
		f := strings.Split(line, ":")
		if len(f) != 4 || f[0] == SandboxUser || !systemID(f[2], gid) {
			continue
		}
		b.WriteString(strings.Join(f[:3], ":") + ":\n")
	}
	fmt.Fprintf(&b, "%s:x:%d:\n", SandboxUser, gid)
	return b.Bytes()
}

// systemID reports whether the id field s names a system account (below
// 1000, or nobody) other than own, the sandbox's.
func systemID(s string, own int) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 0 && n != own && (n < systemIDs || n == nobodyID)
}
