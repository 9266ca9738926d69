package mcpserver

import (
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/capfs/capfs/internal/termsafe"
)

// Names that are not UTF-8.
//
// A backend may hold a name that is not UTF-8 (Latin-1 "caf\xe9"), which JSON
// cannot carry: encoding/json writes U+FFFD for each such byte, so two names
// would read the same and neither could be named back. The server therefore
// uses internal/termsafe's escaped form, the one its text results print, on
// both sides of JSON:
//
//   - a path argument (path, paths, source, destination, dest) holding a
//     backslash is read as that form: "caf\\xe9" in JSON names the bytes
//     c a f 0xe9. No name holds a backslash (vfs.ValidName), so no name is
//     lost by it; a path that does not unescape is taken as written (and is
//     then refused as invalid_path, as before);
//   - a string of structuredContent, or the error path in _meta, that is not
//     UTF-8 is written in that form.

// pathArgs are the arguments that hold guest paths.
var pathArgs = map[string]bool{"path": true, "paths": true, "source": true, "destination": true, "dest": true}

// pathArg is the guest path a path argument names (see above).
func pathArg(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	if p, err := termsafe.Unescape(s); err == nil {
		return p
	}
	return s
}

// textOf is s as a JSON result carries it: as it is when UTF-8, else escaped.
func textOf(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return termsafe.Escape(s)
}

// textStrings returns v with every string that is not UTF-8 escaped
// (textOf), or v itself when it holds none. v is not changed.
func textStrings(v any) any {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || !hasRaw(rv, 0) {
		return v
	}
	return escaped(rv, 0).Interface()
}

// maxDepth bounds the walk of a result (results are a few levels deep).
const maxDepth = 16

// hasRaw reports whether v holds a string that is not UTF-8 where JSON
// writes it (exported fields, elements, map keys and values).
func hasRaw(v reflect.Value, depth int) bool {
	if depth > maxDepth {
		return false
	}
	switch v.Kind() {
	case reflect.String:
		return !utf8.ValidString(v.String())
	case reflect.Pointer, reflect.Interface:
		return !v.IsNil() && hasRaw(v.Elem(), depth+1)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() && hasRaw(v.Field(i), depth+1) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return false // []byte: base64
		}
		for i := range v.Len() {
			if hasRaw(v.Index(i), depth+1) {
				return true
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if hasRaw(it.Key(), depth+1) || hasRaw(it.Value(), depth+1) {
				return true
			}
		}
	}
	return false
}

// escaped is a copy of v with its strings made textOf.
func escaped(v reflect.Value, depth int) reflect.Value {
	if depth > maxDepth || !hasRaw(v, depth) {
		return v
	}
	switch v.Kind() {
	case reflect.String:
		return reflect.ValueOf(textOf(v.String())).Convert(v.Type())
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(escaped(v.Elem(), depth+1))
		return p
	case reflect.Interface:
		out := reflect.New(v.Type()).Elem()
		out.Set(escaped(v.Elem(), depth+1))
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				out.Field(i).Set(escaped(v.Field(i), depth+1))
			}
		}
		return out
	case reflect.Slice:
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(escaped(v.Index(i), depth+1))
		}
		return out
	case reflect.Array:
		out := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			out.Index(i).Set(escaped(v.Index(i), depth+1))
		}
		return out
	case reflect.Map:
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(escaped(it.Key(), depth+1), escaped(it.Value(), depth+1))
		}
		return out
	}
	return v
}
