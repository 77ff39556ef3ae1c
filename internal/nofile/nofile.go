package nofile

// start is the soft and hard limit at start-up; read reports whether it
// was read.
var (
	start [2]uint64
	read  bool
)

func init() { read = getNofile(&start) == 0 }

// Start returns the soft and hard limit on open files the process
// started with, and ok when Go raised the soft one since, as it does
// below the hard limit less one: then a child should get soft back,
// provided the limit is still what Go set (soft hard-1, hard hard), as
// os/exec checks in the child before it puts it back: a program that set
// the limit itself keeps it for its children.
func Start() (soft, hard uint64, ok bool) {
	s, h := start[0], start[1]
	return s, h, read && h > 0 && s < h-1
}
