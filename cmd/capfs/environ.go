package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/capfs/capfs/internal/mountkind"
)

// environ is what a command reads of the process it runs in: the working
// directory relative host paths are taken from, the environment variables,
// and the power to end the process. main builds it from the process
// ([processEnviron]); the tests build one per command line, so commands run
// side by side in one test process, each in its own directory and
// environment. Every read of the working directory or of an environment
// variable by a command goes through it.
type environ struct {
	// dir is the absolute working directory; "" is the process's.
	dir string
	// getenv returns an environment variable's value ("" when unset); nil
	// is [os.Getenv].
	getenv func(string) string
	// exit ends the process with a status (main: [os.Exit]). It is nil
	// when the command runs inside another program (the tests), which then
	// neither ends nor retunes the process: see [environ.ownsProcess].
	exit func(code int)
}

// processEnviron is the environ of the process itself, for main. A working
// directory that is gone is left "": the commands that need it say so.
func processEnviron() environ {
	wd, _ := os.Getwd()
	return environ{dir: wd, getenv: os.Getenv, exit: os.Exit}
}

// env returns the environment variable k ("" when unset).
func (e environ) env(k string) string {
	if e.getenv == nil {
		return os.Getenv(k)
	}
	return e.getenv(k)
}

// ownsProcess reports whether the command is the process (main): only then
// may it end the process or change process-wide settings.
func (e environ) ownsProcess() bool { return e.exit != nil }

// cwd returns the working directory.
func (e environ) cwd() (string, error) {
	if e.dir == "" {
		return os.Getwd()
	}
	return e.dir, nil
}

// abs returns the host path p taken from the working directory: p itself
// when it is absolute or empty.
func (e environ) abs(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	if e.dir == "" {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	return filepath.Join(e.dir, p)
}

// named returns err with the host path e.abs(name) in its message written
// name, as the user wrote it: a library names the file it was given, and the
// working directory joined to a relative name is not the user's to see
// again. errors.Is and errors.As still find what err wraps.
func (e environ) named(name string, err error) error {
	abs := e.abs(name)
	if err == nil || abs == name || !strings.Contains(err.Error(), abs) {
		return err
	}
	return &renamedError{msg: strings.ReplaceAll(err.Error(), abs, name), err: err}
}

// renamedError is an error whose message names a host path as the user
// wrote it ([environ.named]).
type renamedError struct {
	msg string
	err error
}

func (e *renamedError) Error() string { return e.msg }
func (e *renamedError) Unwrap() error { return e.err }

// tempDir is [os.TempDir] of the environ: $TMPDIR, else /tmp.
func (e environ) tempDir() string {
	if d := e.env("TMPDIR"); d != "" {
		return d
	}
	return "/tmp"
}

// kindEnv is what the mount kinds read of the environ ([mountkind.Env]),
// with the session's memory quota.
func (e environ) kindEnv(memQuota int64) mountkind.Env {
	return mountkind.Env{MemoryQuota: memQuota, Getenv: e.env}
}
