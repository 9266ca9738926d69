package vfs

import (
	"io/fs"
	"testing"
)

func TestUnixModeRoundTrip(t *testing.T) {
	cases := map[fs.FileMode]uint32{
		0o644:                              0o100644,
		fs.ModeDir | 0o755 | fs.ModeSticky: 0o041755,
		fs.ModeSymlink | 0o777:             0o120777,
		0o755 | fs.ModeSetuid:              0o104755,
		0o755 | fs.ModeSetgid:              0o102755,
		fs.ModeNamedPipe | 0o600:           0o010600,
		fs.ModeSocket | 0o600:              0o140600,
		fs.ModeDevice | fs.ModeCharDevice:  0o020000,
		fs.ModeDevice | 0o660:              0o060660,
	}
	for m, u := range cases {
		if got := UnixMode(m); got != u {
			t.Errorf("UnixMode(%v) = %o, want %o", m, got, u)
		}
		if got := FileModeOf(u); got != m {
			t.Errorf("FileModeOf(%o) = %v, want %v", u, got, m)
		}
	}
	if got := FileModeOf(0o000644); got.Type() != fs.ModeIrregular {
		t.Errorf("FileModeOf of no type = %v, want irregular", got)
	}
}
