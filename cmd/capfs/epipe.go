package main

import "syscall"

// syscallEPIPE is the error a write to a closed pipe fails with.
func syscallEPIPE() error { return syscall.EPIPE }
