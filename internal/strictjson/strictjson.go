// Package strictjson checks what encoding/json lets through in a document that
// came from outside: a key repeated in one object, which encoding/json resolves
// silently (the last one wins), so two readers of one file can disagree on what
// it says.
package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// maxDepth bounds the nesting CheckDuplicateKeys follows.
const maxDepth = 64

// CheckDuplicateKeys reports the first key that appears twice in one object of
// the JSON document data, anywhere in it, or an error for a document nested
// deeper than 64 levels. It does not otherwise validate data: decode it as
// usual before or after.
func CheckDuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return walk(dec, 0)
}

// walk reads one value from dec, checking the keys of every object in it.
func walk(dec *json.Decoder, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	tok, err := dec.Token()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := k.(string)
			if seen[key] {
				return fmt.Errorf("key %q appears twice in one object", key)
			}
			seen[key] = true
			if err := walk(dec, depth+1); err != nil {
				return err
			}
		}
	case '[':
		for dec.More() {
			if err := walk(dec, depth+1); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}
