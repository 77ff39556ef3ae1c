package procgroup

import "os/exec"

// OpenStarted holds the group of cmd, just started as a group leader
// (Setpgid). If that fails it kills and reaps cmd, so that nothing is
// left running that the caller could not signal.
func OpenStarted(cmd *exec.Cmd) (*Group, error) {
	g, err := Open(cmd.Process)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	return g, nil
}
