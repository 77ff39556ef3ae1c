// Command rootprobe reports what a sandbox with an image root shows: the
// sandbox tests build it static and put it in the image. Each argument is
// OP:PATH; one line per argument goes to stdout.
//
//	stat:P   "stat P: ok" or the error
//	read:P   "read P: CONTENT" or the error
//	write:P  "write P: ok" or the error
package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	for _, a := range os.Args[1:] {
		op, p, _ := strings.Cut(a, ":")
		var res string
		var err error
		switch op {
		case "stat":
			_, err = os.Lstat(p)
			res = "ok"
		case "read":
			var b []byte
			b, err = os.ReadFile(p)
			res = strings.TrimSpace(string(b))
		case "write":
			err = os.WriteFile(p, []byte("x"), 0o644)
			res = "ok"
		}
		if err != nil {
			res = "error"
		}
		fmt.Printf("%s %s: %s\n", op, p, res)
	}
}
