package mcpserver

import (
	"strings"

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
