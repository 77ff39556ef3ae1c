package daemon

import "runtime/debug"

// StampedVersion is v, or for "dev" (a build that did not set the
// version) "dev+" and the commit the go command stamped into the binary
// (a build in a git checkout): its first 12 digits, "-dirty" for
// uncommitted changes, so that two such builds can be told apart.
func StampedVersion(v string) string {
	bi, _ := debug.ReadBuildInfo()
	return stampedVersion(v, bi)
}

func stampedVersion(v string, bi *debug.BuildInfo) string {
	if v != "dev" || bi == nil {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value[:min(12, len(s.Value))]
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return v
	}
	return v + "+" + rev + dirty
}
