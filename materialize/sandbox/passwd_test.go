//go:build linux

package sandbox

import (
	"os"
	"strings"
	"testing"
)

// TestSandboxAccountFiles: the sandbox's passwd and group keep the host's
// system accounts, drop its users (and group members), and add capfs.
func TestSandboxAccountFiles(t *testing.T) {
	host := "root:x:0:0:root:/root:/bin/bash\n# a comment\n" +
		"daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n" +
		"alice:x:1000:1000:Alice,,,:/home/alice:/bin/bash\n" +
		"bob:x:1001:1001::/home/bob:/bin/sh\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n" +
		"capfs:x:500:500::/:/bin/sh\n+::::::\n"
	want := "root:x:0:0:root:/root:/bin/bash\n" +
		"daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n" +
		"capfs:x:1000:1000:capfs sandbox:/tmp:/bin/sh\n"
	if got := string(sandboxPasswd([]byte(host), 1000, 1000)); got != want {
		t.Errorf("passwd:\n%s\nwant:\n%s", got, want)
	}
	group := "root:x:0:\nsudo:x:27:alice,bob\nalice:x:1000:\nusers:x:100:alice\nnogroup:x:65534:\n"
	wantGroup := "root:x:0:\nsudo:x:27:\nusers:x:100:\nnogroup:x:65534:\ncapfs:x:1000:\n"
	if got := string(sandboxGroup([]byte(group), 1000, 1000)); got != wantGroup {
		t.Errorf("group:\n%s\nwant:\n%s", got, wantGroup)
	}
	// A sandbox uid below 1000 replaces the system account holding it.
	if got := string(sandboxPasswd([]byte(host), 1, 1)); strings.Contains(got, "daemon") || !strings.HasSuffix(got, "capfs:x:1:1:capfs sandbox:/tmp:/bin/sh\n") {
		t.Errorf("passwd at uid 1:\n%s", got)
	}
}

// TestBwrapOwnAccount: inside the sandbox, id names the sandbox's own account
// and group, not the host account at the same uid, and /etc/passwd names no
// host user.
func TestBwrapOwnAccount(t *testing.T) {
	needBwrap(t)
	_, out, _ := runOut(t, bwrapRunner(BubblewrapOptions{}), sh("id -un; id -gn; echo ~; awk -F: '$3 >= 1000 && $3 != 65534 {print $1}' /etc/passwd"))
	if out != "capfs\ncapfs\n/tmp\ncapfs\n" {
		t.Errorf("inside: %q, want capfs, capfs, /tmp and capfs the only user account", out)
	}
	if _, err := os.Lstat("/etc/passwd"); err != nil {
		t.Skip("no /etc/passwd on this host")
	}
	_, out, _ = runOut(t, bwrapRunner(BubblewrapOptions{ShowPrivateEtc: true}), sh("grep -c '^capfs:' /etc/passwd || true"))
	if strings.TrimSpace(out) != "0" && !hostHasCapfsUser() {
		t.Errorf("ShowPrivateEtc: /etc/passwd is not the host's (%q capfs lines)", out)
	}
}

func hostHasCapfsUser() bool {
	b, _ := os.ReadFile("/etc/passwd")
	return strings.Contains("\n"+string(b), "\ncapfs:")
}
