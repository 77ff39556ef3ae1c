package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Size is a number of bytes. In the file it is a non-negative integer with an
// optional suffix: binary Ki, Mi, Gi, Ti, Pi, Ei (powers of 1024) or decimal
// k, M, G, T, P, E (powers of 1000). Fractions are not accepted, and neither
// are Docker-style lower-case m or g, whose meaning differs between tools.
type Size int64

type sizeUnit struct {
	suffix string
	mult   int64
}

// sizeUnits is ordered so that, between equally short spellings, String
// prefers binary and larger units.
var sizeUnits = []sizeUnit{
	{"Ei", 1 << 60}, {"Pi", 1 << 50}, {"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10},
	{"E", 1e18}, {"P", 1e15}, {"T", 1e12}, {"G", 1e9}, {"M", 1e6}, {"k", 1e3},
}

// ParseSize parses a size such as "512Mi", "1G" or "1024".
func ParseSize(s string) (Size, error) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	digits, suffix := s[:i], s[i:]
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("invalid size %q: must not be negative", s)
	}
	if digits == "" {
		return 0, fmt.Errorf("invalid size %q: want an integer with an optional unit such as 512Mi", s)
	}
	mult := int64(1)
	if suffix != "" {
		u, ok := findUnit(suffix)
		if !ok {
			return 0, fmt.Errorf("invalid size %q: unknown unit %q (want Ki, Mi, Gi, Ti, Pi, Ei or k, M, G, T, P, E)", s, suffix)
		}
		mult = u.mult
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return Size(n * mult), nil
}

func findUnit(suffix string) (sizeUnit, bool) {
	for _, u := range sizeUnits {
		if u.suffix == suffix {
			return u, true
		}
	}
	return sizeUnit{}, false
}

// String returns the shortest exact spelling of s that ParseSize accepts,
// such as "512Mi", "256M" or "1000".
func (s Size) String() string {
	best := strconv.FormatInt(int64(s), 10)
	if s <= 0 {
		return best
	}
	for _, u := range sizeUnits {
		if int64(s)%u.mult != 0 {
			continue
		}
		if c := strconv.FormatInt(int64(s)/u.mult, 10) + u.suffix; len(c) < len(best) {
			best = c
		}
	}
	return best
}

// Duration is a non-negative time span written as time.ParseDuration
// accepts it, such as "90s", "10m" or "1h30m".
type Duration time.Duration

// ParseDuration parses a non-negative duration.
func ParseDuration(s string) (Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (want e.g. 30s, 10m, 1h)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("invalid duration %q: must not be negative", s)
	}
	return Duration(d), nil
}

// String is time.Duration's spelling without trailing zero units:
// "1h" rather than "1h0m0s".
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
