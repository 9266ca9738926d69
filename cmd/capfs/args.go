package main

import "strings"

// valueFlags are the root's persistent flags that take a value as the next
// argument: "capfs --mount grep=memory: ls" has no grep subcommand.
var valueFlags = map[string]bool{
	"-m": true, "--mount": true, "--config": true, "--policy": true, "--audit": true,
	"--subject": true, "--memory-quota": true, "--allow-secret": true,
	"--audit-max-size": true, "--audit-max-files": true, "--audit-level": true,
}

// grepShortValue are grep's one-letter flags that take a value.
const grepShortValue = "eABC"

// rewriteGrepArgs gives -m after the grep subcommand grep's meaning,
// --max-count, as GNU grep has it; before "grep", -m stays --mount (a persistent
// flag's shorthand cannot be redefined by one subcommand). "-m5", "-m 5" and a
// cluster such as "-cm1" are rewritten; nothing after "--" is.
func rewriteGrepArgs(args []string) []string {
	at := -1
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return args
		}
		if valueFlags[a] {
			i++
			continue
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		if a == "grep" {
			at = i
		}
		break
	}
	if at < 0 {
		return args
	}
	out := append([]string(nil), args[:at+1]...)
	for i := at + 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if a != "-m" && valueFlags[a] || a == "-e" || a == "-A" || a == "-B" || a == "-C" || strings.HasPrefix(a, "--") && !strings.Contains(a, "=") && grepLongValue(a) {
			out = append(out, a)
			if i+1 < len(args) {
				out = append(out, args[i+1])
				i++
			}
			continue
		}
		if len(a) < 2 || a[0] != '-' || a[1] == '-' {
			out = append(out, a)
			continue
		}
		// A cluster of short flags: split it at "m".
		cluster := a[1:]
		var pre strings.Builder
		done := false
		for k := 0; k < len(cluster); k++ {
			c := cluster[k]
			if strings.IndexByte(grepShortValue, c) >= 0 {
				break // the rest of the cluster is this flag's value
			}
			if c == 'm' {
				if pre.Len() > 0 {
					out = append(out, "-"+pre.String())
				}
				if rest := cluster[k+1:]; rest != "" {
					out = append(out, "--max-count="+rest)
				} else {
					out = append(out, "--max-count")
				}
				done = true
				break
			}
			pre.WriteByte(c)
		}
		if !done {
			out = append(out, a)
		}
	}
	return out
}

// grepLongValue reports whether grep's long flag a takes a value.
func grepLongValue(a string) bool {
	switch a {
	case "--regexp", "--after-context", "--before-context", "--context", "--max-count",
		"--include", "--exclude", "--exclude-dir", "--max-filesize", "--color", "--colour":
		return true
	}
	return false
}
