package cli

import (
	"encoding/json"
	"os"

	"mcpbox/internal/group"
	"mcpbox/internal/specconv"
)

// groupMain is the hidden `mcpbox __group` command: the supervisor inside
// a group's sandbox, its members in $MCPBOX_GROUP_MEMBERS.
func (e *env) groupMain(args []string) int {
	raw := os.Getenv(specconv.GroupMembersEnv)
	if len(args) != 0 || raw == "" {
		e.errorf("__group: want no arguments and the members in $%s", specconv.GroupMembersEnv)
		return exitUsage
	}
	os.Unsetenv(specconv.GroupMembersEnv) // not for the members
	var members []group.Member
	if err := json.Unmarshal([]byte(raw), &members); err != nil {
		e.errorf("__group: %v", err)
		return exitUsage
	}
	if err := group.Supervise(members, e.stdin, e.stdout, e.stderr); err != nil {
		e.errorf("__group: %v", err)
		return 1
	}
	return 0
}
