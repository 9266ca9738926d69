package termsafe

import (
	"reflect"
	"unicode/utf8"
)

// JSON cannot carry bytes that are not UTF-8: encoding/json writes U+FFFD for
// each, so two names that differ in one would read the same. A JSON result
// writes such a string in Escape's form instead ("caf\xe9"), the form the text
// results print; UTF-8 strings are written as they are. A name never holds a
// backslash (vfs.ValidName), so an escaped name never equals another name.

// ForJSON returns s when it is UTF-8, else Escape(s).
func ForJSON(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return Escape(s)
}

// ForJSONValue returns v with every string JSON would write that is not UTF-8
// made ForJSON (exported struct fields, elements, map keys and values, through
// pointers and interfaces; []byte is left alone), or v itself when it holds
// none. v is not changed: what differs is copied.
func ForJSONValue(v any) any {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || !hasRaw(rv, 0) {
		return v
	}
	return forJSON(rv, 0).Interface()
}

// maxDepth bounds the walk of a value (results are a few levels deep; a
// cyclic one is cut there).
const maxDepth = 32

// hasRaw reports whether v holds a string that is not UTF-8 where JSON
// writes it.
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
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return false // bytes: base64
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

// forJSON is a copy of v with its strings made ForJSON.
func forJSON(v reflect.Value, depth int) reflect.Value {
	if !hasRaw(v, depth) {
		return v
	}
	switch v.Kind() {
	case reflect.String:
		return reflect.ValueOf(Escape(v.String())).Convert(v.Type())
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(forJSON(v.Elem(), depth+1))
		return p
	case reflect.Interface:
		out := reflect.New(v.Type()).Elem()
		out.Set(forJSON(v.Elem(), depth+1))
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				out.Field(i).Set(forJSON(v.Field(i), depth+1))
			}
		}
		return out
	case reflect.Slice:
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(forJSON(v.Index(i), depth+1))
		}
		return out
	case reflect.Array:
		out := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			out.Index(i).Set(forJSON(v.Index(i), depth+1))
		}
		return out
	case reflect.Map:
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(forJSON(it.Key(), depth+1), forJSON(it.Value(), depth+1))
		}
		return out
	}
	return v
}
