package mcpserver

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// TestEINVALRaceIsConflict: an EINVAL the host returns for a path that passed
// the Dir's checks (a race with a rename or a symlink swap, which a test
// through a subprocess cannot produce on demand) is reported as conflict with
// the hint to retry, not as invalid_path with the path-syntax hint; an
// invalid_path of the Dir's own (a NUL byte) stays invalid_path.
func TestEINVALRaceIsConflict(t *testing.T) {
	race := &vfs.Error{Code: vfs.CodeInvalidPath, Op: "open", Path: "p/a.txt", Err: fmt.Errorf("openat2: %w", syscall.EINVAL)}
	if code, path := errorInfo(race); code != string(vfs.CodeConflict) || path != "p/a.txt" {
		t.Errorf("EINVAL: code %q path %q", code, path)
	}
	if text := errorText(race); !contains(text, "call again") || contains(text, "slash-separated") {
		t.Errorf("EINVAL text: %q", text)
	}
	bad := &vfs.Error{Code: vfs.CodeInvalidPath, Op: "open", Path: "a\x00b", Err: fmt.Errorf("NUL byte in path")}
	if code, _ := errorInfo(bad); code != string(vfs.CodeInvalidPath) {
		t.Errorf("NUL: %q", code)
	}
	if code, path := errorInfo(argErrorf("argument %q is bad", "x")); code != CodeInvalidArgument || path != "" {
		t.Errorf("argument error: %q %q", code, path)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
