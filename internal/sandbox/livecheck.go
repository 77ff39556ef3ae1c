package sandbox

import (
	"context"
	"fmt"
	"time"
)

// LiveCheck starts a default-policy sandbox running /bin/true: the probes
// of Doctor can say a feature exists, only a start proves the layers
// compose on this host.
func LiveCheck() Check {
	c := Check{Name: "sandbox start", Required: true,
		Degrades: "the default policy cannot run here"}
	spec := Spec{Args: []string{"/bin/true"}, Limits: Limits{Memory: 64 << 20, Pids: 16, Timeout: 10 * time.Second}}
	start := time.Now()
	res, err := Run(context.Background(), spec, Stdio{})
	switch {
	case err != nil:
		c.Detail = err.Error()
	case res.ExitCode != 0:
		c.Detail = fmt.Sprintf("/bin/true exited %d", res.ExitCode)
	default:
		c.OK = true
		c.Detail = fmt.Sprintf("/bin/true ran with every layer in %s", time.Since(start).Round(100*time.Microsecond))
	}
	return c
}
