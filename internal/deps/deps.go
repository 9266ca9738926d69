// Package deps pins the module's third-party dependencies in go.mod while the
// packages that use them are written in parallel. It has no code.
package deps

import (
	_ "github.com/bmatcuk/doublestar/v4"
	_ "github.com/go-git/go-billy/v5/memfs"
	_ "github.com/spf13/afero"
)
