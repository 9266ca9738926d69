package authority

import (
	"encoding/json"
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/memory"
)

// grantSetJSON is a valid grant set document of one workspace grant.
func grantSetJSON(t testing.TB) []byte {
	a := New()
	if err := a.RegisterRoot(RootDescriptor{Kind: KindWorkspace, ID: "w"}, memory.New()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Grant(ctx, GrantRequest{Subject: agent, Root: "workspace:w", Access: []Access{List, Read}, Reason: "r", Source: SourceCore}); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(a.GrantSetFor(agent))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseGrantSetBounds: a grant set file is one JSON document of at most
// MaxGrantSetBytes: a closing bracket after it (which json.Decoder.More
// does not report) or a larger file is refused. Both were accepted before
// (8a35f16).
func TestParseGrantSetBounds(t *testing.T) {
	b := grantSetJSON(t)
	if _, err := ParseGrantSet(b); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat(" ", MaxGrantSetBytes)
	for name, bad := range map[string]string{
		"trailing brace":   string(b) + "}",
		"trailing bracket": string(b) + "\n]",
		"too large":        string(b) + pad,
		// encoding/json keeps the last of a repeated key; another reader may
		// keep the first.
		"repeated key": strings.Replace(string(b), `"status":"active"`, `"status":"revoked","status":"active"`, 1),
	} {
		if _, err := ParseGrantSet([]byte(bad)); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("%s: accepted (%v)", name, err)
		}
	}
}

// FuzzParseGrantSet parses arbitrary bytes (seeded with a valid document and
// hostile variants): what it accepts is one valid JSON document within the
// size bound, of version 1, whose grants all belong to its subject, are
// active and not over a secret root, and which encodes and parses back to
// the same set.
func FuzzParseGrantSet(f *testing.F) {
	b := grantSetJSON(f)
	s := string(b)
	for _, seed := range []string{
		s, s + "}", s + "]", s + "{}", "{}", "null", `{"version":1}`,
		strings.Replace(s, `"version":1`, `"version":1,"version":2`, 1),
		strings.Replace(s, `"status":"active"`, `"status":"revoked"`, 1),
		strings.Replace(s, `"root_kind":"workspace"`, `"root_kind":"secret"`, 1),
		strings.Replace(s, `"grants":[`, `"grants":[`+strings.Repeat(`[`, 1000), 1),
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := ParseGrantSet(data)
		if err != nil {
			if !errors.Is(err, fs.ErrInvalid) {
				t.Fatalf("refused without fs.ErrInvalid: %v", err)
			}
			return
		}
		if !json.Valid(data) || len(data) > MaxGrantSetBytes || set.Version != 1 {
			t.Fatalf("accepted %q", data)
		}
		for _, g := range set.Grants {
			if g.Subject != set.Subject || g.Status != Active || g.Kind == KindSecret {
				t.Fatalf("accepted grant %+v of %q", g, data)
			}
		}
		enc, err := json.Marshal(set)
		if err != nil {
			t.Fatalf("accepted %q but cannot encode it: %v", data, err)
		}
		back, err := ParseGrantSet(enc)
		if err != nil || !reflect.DeepEqual(back, set) {
			t.Fatalf("%q does not round-trip: %v", data, err)
		}
	})
}
