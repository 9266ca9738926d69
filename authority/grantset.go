package authority

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"

	"github.com/capfs/capfs/internal/strictjson"
)

// GrantSet is the JSON document a host hands a sandbox wrapper (capfs run
// --grants FILE). It holds the grant records of one subject, as the authority
// serializes them. It names roots, never host paths. The wrapper resolves each
// root name through its own configuration. It must bind each grant's Path
// within it, read-only unless Writable, and nothing else.
type GrantSet struct {
	Version int     `json:"version"`
	Subject Subject `json:"subject"`
	Grants  []Grant `json:"grants"`
}

// GrantSetFor returns, as a [GrantSet], the active grants of subject s whose
// roots may be bound into a sandbox. A secret root never may.
func (a *Authority) GrantSetFor(s Subject) GrantSet {
	set := GrantSet{Version: 1, Subject: s, Grants: []Grant{}}
	for _, g := range a.SubjectGrants(s) {
		if spec, ok := specs[g.Kind]; ok && !spec.Sandbox {
			continue
		}
		set.Grants = append(set.Grants, g)
	}
	return set
}

// MaxGrantSetBytes bounds a grant set document ParseGrantSet reads.
const MaxGrantSetBytes = 4 << 20

// ParseGrantSet decodes and validates a [GrantSet] strictly.
// These are errors wrapping [fs.ErrInvalid]:
//   - a document over [MaxGrantSetBytes];
//   - unknown fields or trailing data;
//   - an unknown version, access or status;
//   - a grant of another subject, an ended grant, or one over a secret root.
func ParseGrantSet(data []byte) (GrantSet, error) {
	var set GrantSet
	if len(data) > MaxGrantSetBytes {
		return GrantSet{}, invalid("grant set: %d bytes, more than %d", len(data), MaxGrantSetBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&set); err != nil {
		return GrantSet{}, invalid("grant set: %v", err)
	}
	// More does not report a closing bracket; anything but space is refused.
	if len(bytes.Trim(data[dec.InputOffset():], " \t\r\n")) != 0 {
		return GrantSet{}, invalid("grant set: data after the document")
	}
	// A repeated key would be read as its last value here and perhaps as its
	// first by another tool: refused.
	if err := strictjson.CheckDuplicateKeys(data); err != nil {
		return GrantSet{}, invalid("grant set: %v", err)
	}
	if set.Version != 1 {
		return GrantSet{}, invalid("grant set version %d", set.Version)
	}
	if err := set.Subject.Validate(); err != nil {
		return GrantSet{}, err
	}
	for _, g := range set.Grants {
		if g.Subject != set.Subject {
			return GrantSet{}, invalid("grant %s belongs to %s, not %s", g.ID, g.Subject, set.Subject)
		}
		if g.Status != Active {
			return GrantSet{}, invalid("grant %s is %s", g.ID, g.Status)
		}
		if g.Kind == KindSecret {
			return GrantSet{}, fmt.Errorf("authority: grant %s is over a secret root, never bound into a sandbox: %w", g.ID, fs.ErrInvalid)
		}
		for _, x := range g.Access {
			if !x.Valid() {
				return GrantSet{}, invalid("grant %s: unknown access %q", g.ID, x)
			}
		}
	}
	return set, nil
}
