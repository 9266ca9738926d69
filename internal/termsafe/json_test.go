package termsafe

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestForJSON: a string that is not UTF-8 is written escaped, so two that
// differ in such a byte stay apart in JSON (encoding/json alone writes both as
// U+FFFD); UTF-8 strings, controls included, are left to JSON.
func TestForJSON(t *testing.T) {
	for in, want := range map[string]string{
		"plain": "plain", "a\nb": "a\nb", "\u202e": "\u202e", "caf\xe9": `caf\xe9`, "\xff\n": `\xff\n`,
	} {
		if got := ForJSON(in); got != want {
			t.Errorf("ForJSON(%q) = %q, want %q", in, got, want)
		}
	}
	if a, b := ForJSON("caf\xe9"), ForJSON("caf\xe8"); a == b {
		t.Error("two names are one")
	}
}

type entry struct {
	Name   string   `json:"name"`
	Target *string  `json:"target,omitempty"`
	Tags   []string `json:"tags"`
	Data   []byte   `json:"data"`
	hidden string
}

type out struct {
	Path    string            `json:"path"`
	Entries []entry           `json:"entries"`
	Meta    map[string]any    `json:"meta"`
	ByName  map[string]string `json:"by_name"`
	Arr     [2]string         `json:"arr"`
}

// TestForJSONValue: every string JSON writes is made ForJSON, through
// structs, pointers, slices, arrays, maps and interfaces; the value given is
// not changed, and one with nothing to escape is returned as it is.
func TestForJSONValue(t *testing.T) {
	tgt := "t\xfe"
	v := &out{
		Path:    "d\xff",
		Entries: []entry{{Name: "caf\xe9", Target: &tgt, Tags: []string{"ok", "x\x80"}, Data: []byte{0xff}, hidden: "h\xff"}, {Name: "plain"}},
		Meta:    map[string]any{"k\xc3": []any{"v\xe9", 1}},
		ByName:  map[string]string{"a": "b\xff"},
		Arr:     [2]string{"\xe9", "é"},
	}
	got, err := json.Marshal(ForJSONValue(v))
	if err != nil {
		t.Fatal(err)
	}
	s := string(got)
	if strings.Contains(s, `\ufffd`) {
		t.Errorf("U+FFFD in %s", s)
	}
	for _, w := range []string{`"path":"d\\xff"`, `"name":"caf\\xe9"`, `"target":"t\\xfe"`, `"tags":["ok","x\\x80"]`,
		`"data":"/w=="`, `"k\\xc3":["v\\xe9",1]`, `"a":"b\\xff"`, `"arr":["\\xe9","é"]`, `"name":"plain"`} {
		if !strings.Contains(s, w) {
			t.Errorf("%s\nlacks %s", s, w)
		}
	}
	if v.Path != "d\xff" || v.Entries[0].Name != "caf\xe9" || tgt != "t\xfe" || v.Entries[0].Tags[1] != "x\x80" || v.Arr[0] != "\xe9" {
		t.Error("ForJSONValue changed its argument")
	}
	plain := &out{Path: "p", Entries: []entry{{Name: "é"}}}
	if ForJSONValue(plain) != any(plain) {
		t.Error("a value with nothing to escape was copied")
	}
	if ForJSONValue(nil) != nil {
		t.Error("nil")
	}
}
