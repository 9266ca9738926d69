// Package deps pins a dependency in go.mod while the package using it is written.
package deps

import _ "github.com/go-git/go-git/v5"
