package mountkind

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseQuota parses a size: a byte count with an optional binary unit (K,
// KiB, M, MiB, G, GiB, T, TiB; KB, MB, GB and TB mean the same, any case), or
// "0" or "none" for no limit, returned as -1.
func ParseQuota(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "none") || t == "0" {
		return -1, nil
	}
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 || i > 15 {
		return 0, errors.New("want a size such as 64MiB, 1GiB or 1048576, or none")
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, errors.New("want a size such as 64MiB, 1GiB or 1048576, or none")
	}
	shift, err := unitShift(t[i:])
	if err != nil {
		return 0, err
	}
	if n > math.MaxInt64>>shift {
		return 0, errors.New("too large")
	}
	if n == 0 {
		return -1, nil
	}
	return n << shift, nil
}

// unitShift is the power of two a [ParseQuota] unit stands for.
func unitShift(unit string) (uint, error) {
	switch strings.ToLower(strings.TrimSpace(unit)) {
	case "", "b":
		return 0, nil
	case "k", "kb", "kib":
		return 10, nil
	case "m", "mb", "mib":
		return 20, nil
	case "g", "gb", "gib":
		return 30, nil
	case "t", "tb", "tib":
		return 40, nil
	}
	return 0, fmt.Errorf("unknown unit %q (want K, M, G or T, binary)", unit)
}

// FormatQuota shows a size the way [ParseQuota] reads it.
func FormatQuota(q int64) string {
	switch {
	case q < 0:
		return "none"
	case q >= 1<<30 && q%(1<<30) == 0:
		return strconv.FormatInt(q>>30, 10) + "GiB"
	case q >= 1<<20 && q%(1<<20) == 0:
		return strconv.FormatInt(q>>20, 10) + "MiB"
	case q >= 1<<10 && q%(1<<10) == 0:
		return strconv.FormatInt(q>>10, 10) + "KiB"
	}
	return strconv.FormatInt(q, 10)
}
