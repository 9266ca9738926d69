package jsonfile_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/jsonfile"
	"github.com/capfs/capfs/vfs"
)

var bg = context.Background()

type jsonConf struct {
	Name  string            `json:"name"`
	Count int               `json:"count"`
	Tags  map[string]string `json:"tags,omitempty"`
}

func TestJSONRoundTripStable(t *testing.T) {
	d, _ := dir.New(memory.New())
	v := jsonConf{Name: "a<b", Count: 3, Tags: map[string]string{"z": "1", "a": "2"}}
	if err := jsonfile.Write(bg, d, "conf.json", v, jsonfile.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	b, _ := d.ReadFile(bg, "conf.json")
	want := "{\n  \"name\": \"a<b\",\n  \"count\": 3,\n  \"tags\": {\n    \"a\": \"2\",\n    \"z\": \"1\"\n  }\n}\n"
	if string(b) != want {
		t.Fatalf("written %q", b)
	}
	var got jsonConf
	if err := jsonfile.Read(bg, d, "conf.json", &got, jsonfile.ReadOptions{Strict: true}); err != nil || got.Name != v.Name || got.Tags["z"] != "1" {
		t.Fatalf("read %+v %v", got, err)
	}
	names, _ := d.List(bg, ".")
	if len(names) != 1 {
		t.Fatalf("temporary file left: %v", names)
	}
}

func TestJSONRefusals(t *testing.T) {
	d, _ := dir.New(memory.New())
	cases := map[string]struct {
		body   string
		opts   jsonfile.ReadOptions
		code   vfs.Code
		isJSON bool
	}{
		"unknown field strict": {`{"name":"x","extra":1}`, jsonfile.ReadOptions{Strict: true}, vfs.CodeIO, true},
		"trailing data":        {`{"name":"x"} {"name":"y"}`, jsonfile.ReadOptions{}, vfs.CodeIO, true},
		"trailing garbage":     {`{"name":"x"}garbage`, jsonfile.ReadOptions{}, vfs.CodeIO, true},
		"truncated":            {`{"name":"x"`, jsonfile.ReadOptions{}, vfs.CodeIO, true},
		"wrong type":           {`{"count":"three"}`, jsonfile.ReadOptions{}, vfs.CodeIO, true},
		"too large":            {`{"name":"` + strings.Repeat("x", 100) + `"}`, jsonfile.ReadOptions{MaxBytes: 50}, vfs.CodeTooLarge, false},
	}
	for name, c := range cases {
		d.WriteFile(bg, "f.json", []byte(c.body), 0o644)
		var v jsonConf
		err := jsonfile.Read(bg, d, "f.json", &v, c.opts)
		if vfs.CodeOf(err) != c.code || errors.Is(err, jsonfile.ErrInvalid) != c.isJSON {
			t.Errorf("%s: %v", name, err)
		}
	}
	var v jsonConf
	d.WriteFile(bg, "ok.json", []byte(`{"name":"x","extra":1}`+"\n\n"), 0o644)
	if err := jsonfile.Read(bg, d, "ok.json", &v, jsonfile.ReadOptions{}); err != nil || v.Name != "x" {
		t.Fatalf("lenient read: %v", err)
	}
	// A value that cannot be encoded changes nothing.
	d.WriteFile(bg, "keep.json", []byte(`{}`), 0o644)
	if err := jsonfile.Write(bg, d, "keep.json", map[string]any{"f": func() {}}, jsonfile.WriteOptions{}); !errors.Is(err, jsonfile.ErrInvalid) {
		t.Fatalf("unencodable: %v", err)
	}
	if err := jsonfile.Write(bg, d, "keep.json", strings.Repeat("x", 100), jsonfile.WriteOptions{MaxBytes: 10}); vfs.CodeOf(err) != vfs.CodeTooLarge {
		t.Fatalf("too large: %v", err)
	}
	if b, _ := d.ReadFile(bg, "keep.json"); string(b) != "{}" {
		t.Fatalf("keep.json = %q", b)
	}
	if err := jsonfile.Write(bg, d.ReadOnly(), "x.json", 1, jsonfile.WriteOptions{}); vfs.CodeOf(err) != vfs.CodeReadOnly {
		t.Fatalf("read-only: %v", err)
	}
}
