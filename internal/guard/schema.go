package guard

import (
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
)

// schemaMismatch says why args do not match the inputSchema of def, the
// tool's definition as its server lists it, or "" when they do or the
// schema cannot be read. A call held for approval is checked first: a
// person should not decide on a call its server refuses anyway (MCP
// servers must validate a tool's input; the SDKs do so by this schema).
// What cannot be judged (no definition, a schema this validator cannot
// resolve or a draft it does not know, a panic on a hostile schema) is
// "" and asked about as before: the check only saves a person's time.
func schemaMismatch(def, args json.RawMessage) (why string) {
	if len(def) == 0 {
		return ""
	}
	var tool struct {
		InputSchema *jsonschema.Schema `json:"inputSchema"`
	}
	if json.Unmarshal(def, &tool) != nil || tool.InputSchema == nil {
		return ""
	}
	s := tool.InputSchema
	switch s.Schema {
	case "", "http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2020-12/schema":
	default:
		return ""
	}
	defer func() {
		if recover() != nil {
			why = ""
		}
	}()
	resolved, err := s.Resolve(nil)
	if err != nil {
		return ""
	}
	// As the go-sdk's servers take a call: missing arguments are an empty
	// object, and a property's default stands in for it when absent.
	v := map[string]any{}
	if len(args) > 0 && string(args) != "null" {
		if json.Unmarshal(args, &v) != nil {
			return "they are not a JSON object"
		}
	}
	var inst any = v
	if resolved.ApplyDefaults(&inst) != nil {
		return ""
	}
	if err := resolved.Validate(inst); err != nil {
		// It may quote a value the agent sent, whole.
		return cutUTF8(err.Error(), maxSchemaWhy)
	}
	return ""
}

// maxSchemaWhy bounds the validator's reason in a refusal.
const maxSchemaWhy = 1024

// schemaRefusal is the agent's answer to a call refused by
// schemaMismatch.
func schemaRefusal(name, why string) string {
	return fmt.Sprintf("mcpbox: the arguments of %s do not match its input schema (%s); "+
		"nobody was asked to approve it: fix the arguments and call again", name, why)
}
