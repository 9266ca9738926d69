package main

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/term"
)

// colorWanted decides --color: "always", "never", or "auto" (the default): colour
// when w is a terminal, NO_COLOR is unset or empty (https://no-color.org) and TERM
// is not "dumb" in env.
func colorWanted(env environ, mode string, w io.Writer) (bool, error) {
	switch mode {
	case "always":
		return true, nil
	case "never":
		return false, nil
	case "auto", "":
		if env.env("NO_COLOR") != "" || env.env("TERM") == "dumb" {
			return false, nil
		}
		return isTerminal(w), nil
	}
	return false, fmt.Errorf("want auto, always or never")
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// colors wraps text in SGR sequences when on; the zero value prints plain text.
// The defaults are GNU grep's: matches bold red, file names magenta, line
// numbers green, separators cyan.
type colors struct{ on bool }

func grepColors() colors { return colors{on: true} }

func (c colors) wrap(code, s string) string {
	if !c.on || s == "" {
		return s
	}
	return "\x1b[" + code + "m\x1b[K" + s + "\x1b[m\x1b[K"
}

func (c colors) match(s string) string { return c.wrap("01;31", s) }
func (c colors) name(s string) string  { return c.wrap("35", s) }
func (c colors) num(s string) string   { return c.wrap("32", s) }
func (c colors) sep(s string) string   { return c.wrap("36", s) }
func (c colors) dir(s string) string   { return c.wrap("01;34", s) }
func (c colors) link(s string) string  { return c.wrap("01;36", s) }
func (c colors) warn(s string) string  { return c.wrap("01;33", s) }
