package dir_test

import (
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
)

// TestLinkInPlaceOfProtectedDir: for every default persistence pattern that
// protects a directory's contents ("**/NAME/**", NAME maybe with a
// wildcard), a link named as that directory, to a directory of the guest's
// own, is refused: a tool on the host that reads NAME/ follows the link. Before
// "**/.lefthook*" and "**/.aider*" were added, links named .lefthook and
// .aider were allowed ("a*/**" does not match "a").
func TestLinkInPlaceOfProtectedDir(t *testing.T) {
	d, _ := dir.New(memory.New(), dir.WithPolicy(policy.Defaults()))
	if err := d.MkdirAll(bg, "scripts/pre-commit"); err != nil {
		t.Fatal(err)
	}
	for _, pat := range policy.DefaultPersistencePatterns() {
		rest, ok := strings.CutPrefix(pat, "**/")
		name, dirPat := strings.CutSuffix(rest, "/**")
		if !ok || !dirPat || strings.ContainsAny(name, "{[?") || strings.Contains(name, "**") {
			continue
		}
		link := strings.ReplaceAll(name, "*", "")
		if strings.Contains(link, "/") {
			continue // a nested place (".git/hooks"): its parent's own rules apply
		}
		if err := d.Symlink(bg, "scripts", link); err == nil {
			t.Errorf("a link named %s (protected by %s) to a directory of the guest's was allowed", link, pat)
			_ = d.Remove(bg, link)
		}
	}
}
