package strictjson

import (
	"strings"
	"testing"
)

func TestCheckDuplicateKeys(t *testing.T) {
	ok := []string{`{}`, `[]`, `1`, `{"a":1,"b":{"a":2},"c":[{"a":1},{"a":2}]}`, `{"a":[1,[2,{"b":3}]]}`}
	for _, s := range ok {
		if err := CheckDuplicateKeys([]byte(s)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	bad := []string{`{"a":1,"a":2}`, `{"x":{"id":"g1","id":"g2"}}`, `[{"a":1},{"b":1,"b":2}]`,
		strings.Repeat("[", 100) + strings.Repeat("]", 100)}
	for _, s := range bad {
		if err := CheckDuplicateKeys([]byte(s)); err == nil {
			t.Errorf("%.40s: no error", s)
		}
	}
}

func FuzzCheckDuplicateKeys(f *testing.F) {
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(`{"a":[1,{"b":2}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = CheckDuplicateKeys(data) // never panics, never loops
	})
}
