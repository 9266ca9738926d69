package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// CodeInvalidArgument is the stable code (in _meta under MetaCode) of a tool
// call whose arguments are wrong: a missing or unknown argument, a value of
// the wrong type, or one out of range (a negative offset, a malformed
// pattern). It is never a path error: the path named in the call, if any,
// was not looked at.
const CodeInvalidArgument = "invalid_argument"

// argError is an argument error: what is wrong, said so that a model can fix
// its call (the argument, what it takes, what it was given), never in Go's
// terms.
type argError struct {
	msg string
}

func (e *argError) Error() string { return e.msg }

func argErrorf(format string, args ...any) error { return &argError{msg: fmt.Sprintf(format, args...)} }

// fieldInfo is one argument of a tool's input struct.
type fieldInfo struct {
	name     string
	index    int
	required bool
	desc     string
}

func fieldsOf(t reflect.Type) []fieldInfo {
	var out []fieldInfo
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "" || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		out = append(out, fieldInfo{name: name, index: i, required: !strings.Contains(opts, "omitempty"), desc: f.Tag.Get("jsonschema")})
	}
	return out
}

// decodeArgs fills dst (a pointer to a tool's input struct) from the call's
// arguments, checking each against the struct: required arguments are
// present, no argument is unknown, and each value has the JSON type the field
// takes (string, integer, boolean, array of those, or array of objects).
func decodeArgs(raw json.RawMessage, dst any) error {
	v := reflect.ValueOf(dst).Elem()
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if raw[0] != '{' {
		return argErrorf("arguments must be a JSON object of named arguments, got %s", jsonKind(raw))
	}
	return decodeObject(raw, v, "")
}

func decodeObject(raw json.RawMessage, v reflect.Value, prefix string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return argErrorf("%s must be a JSON object", orArgs(prefix))
	}
	fields := fieldsOf(v.Type())
	names := make([]string, 0, len(fields))
	for _, f := range fields {
		names = append(names, f.name)
	}
	var unknown []string
	for k := range m {
		if !slices.Contains(names, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return argErrorf("unknown argument %s%q; %s takes: %s", prefix, unknown[0], orTool(prefix), strings.Join(names, ", "))
	}
	for _, f := range fields {
		val, ok := m[f.name]
		if !ok || string(bytes.TrimSpace(val)) == "null" {
			if f.required {
				return argErrorf("missing required argument %s%q (%s)", prefix, f.name, f.desc)
			}
			continue
		}
		if err := decodeValue(val, v.Field(f.index), prefix+f.name); err != nil {
			return err
		}
		if pathArgs[f.name] {
			unescapePaths(v.Field(f.index))
		}
	}
	return nil
}

// unescapePaths reads the path argument in field (a string or strings) as
// pathArg does.
func unescapePaths(field reflect.Value) {
	switch field.Kind() {
	case reflect.String:
		field.SetString(pathArg(field.String()))
	case reflect.Slice:
		for i := range field.Len() {
			unescapePaths(field.Index(i))
		}
	}
}

func orArgs(prefix string) string {
	if prefix == "" {
		return "arguments"
	}
	return strings.TrimSuffix(prefix, ".")
}

func orTool(prefix string) string {
	if prefix == "" {
		return "this tool"
	}
	return strings.TrimSuffix(prefix, ".")
}

// decodeValue decodes one argument into field, with a message naming the
// argument, the type it takes and the value given when the JSON type differs.
func decodeValue(raw json.RawMessage, field reflect.Value, name string) error {
	raw = bytes.TrimSpace(raw)
	t := field.Type()
	if t.Kind() == reflect.Pointer {
		p := reflect.New(t.Elem())
		if err := decodeValue(raw, p.Elem(), name); err != nil {
			return err
		}
		field.Set(p)
		return nil
	}
	wrong := func(want string) error {
		return argErrorf("argument %q must be %s, got %s", name, want, jsonKind(raw))
	}
	switch t.Kind() {
	case reflect.String:
		var s string
		if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return wrong("a string")
		}
		field.SetString(s)
	case reflect.Bool:
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			return wrong("true or false")
		}
		field.SetBool(b)
	case reflect.Int, reflect.Int64:
		i, ok := decodeInt(raw)
		if !ok {
			return wrong("an integer")
		}
		field.SetInt(i)
	case reflect.Slice:
		var items []json.RawMessage
		if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
			return wrong("an array")
		}
		return decodeItems(items, field, name)
	default:
		return fmt.Errorf("mcpserver: argument %q has an unsupported Go kind %s", name, t.Kind())
	}
	return nil
}

// decodeInt decodes a JSON number (not a string) that is an integer.
func decodeInt(raw json.RawMessage) (int64, bool) {
	var n json.Number
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if raw[0] == '"' || d.Decode(&n) != nil {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

// decodeItems decodes the items of array argument name into the slice field,
// each named name[i]: an object into a struct, a value otherwise.
func decodeItems(items []json.RawMessage, field reflect.Value, name string) error {
	t := field.Type()
	s := reflect.MakeSlice(t, len(items), len(items))
	for i, item := range items {
		elem := fmt.Sprintf("%s[%d]", name, i)
		if t.Elem().Kind() != reflect.Struct {
			if err := decodeValue(item, s.Index(i), elem); err != nil {
				return err
			}
			continue
		}
		if bytes.TrimSpace(item)[0] != '{' {
			return argErrorf("argument %q must be an object, got %s", elem, jsonKind(item))
		}
		if err := decodeObject(item, s.Index(i), elem+"."); err != nil {
			return err
		}
	}
	field.Set(s)
	return nil
}

// jsonKind describes a JSON value for an error message: its type and, for a
// short scalar, the value.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	show := func(kind string) string {
		if len(raw) <= 40 {
			return kind + " " + string(raw)
		}
		return kind
	}
	switch c := raw[0]; {
	case c == '"':
		return show("the string")
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == 't' || c == 'f':
		return show("the boolean")
	case c == 'n':
		return "null"
	default:
		var f float64
		if json.Unmarshal(raw, &f) == nil && f != float64(int64(f)) {
			return show("the non-integer number")
		}
		return show("the number")
	}
}
