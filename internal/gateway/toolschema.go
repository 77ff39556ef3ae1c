package gateway

import (
	"bytes"
	"encoding/json"
)

// A tool's inputSchema (and outputSchema, if any) must be a JSON Schema
// object with "type": "object" (MCP, every revision). Some servers list
// schemas without a type (npm @modelcontextprotocol/server-gitlab@2025.4.25
// sends {"$schema": ...} only), and clients that validate the list (the
// TypeScript SDK) then reject the whole tools/list, every other server's
// tools with it. So the list a client gets is made valid here, after the
// List hook: the pins (internal/integrity) hash what the server sent, and
// only what the client sees is changed.
//
//   - a schema without "type" gets "type": "object": a tool's arguments
//     and structured result are JSON objects whatever the schema says, so
//     this adds no constraint a call did not already have; a missing
//     inputSchema becomes {"type": "object"} (any arguments);
//   - a tool that cannot be made valid without guessing (an inputSchema
//     that is not a JSON object, a "type" other than "object", properties
//     that are not schemas, a required that is not a list of names) is
//     left out of the client's list, as a client would drop the list;
//   - so is a tool whose x-mcp-header annotations are invalid
//     (paramHeaderFault), as a 2026 client would leave it out.
//
// Each is warned about once per server (normalised) or tool (left out).

// clientTool returns the tool entry as a client gets it, or nil to leave
// it out.
func (g *Gateway) clientTool(server string, it Item) json.RawMessage {
	var tool map[string]json.RawMessage
	if json.Unmarshal(it.Raw, &tool) != nil {
		return it.Raw // entries the gateway could not read were dropped when listed
	}
	fixed := false
	for _, field := range []string{"inputSchema", "outputSchema"} {
		raw, ok := tool[field]
		if !ok && field == "outputSchema" {
			continue
		}
		schema, added, why := objectSchema(raw, ok)
		if why != "" {
			if _, seen := g.schemaWarned.LoadOrStore(server+"\x00"+it.Key, true); !seen {
				g.log.Warn("tool left out of the list clients get: its "+field+" is not an object schema, which MCP clients refuse (the whole list with it)",
					"server", server, "tool", it.Key, "problem", why)
			}
			return nil
		}
		if added {
			tool[field], fixed = schema, true
		}
	}
	// Only a definition that names the annotation is read again (each
	// tool, at every list), or may name it escaped ("x-mcp-head\u0065r"
	// is the same key to a client's JSON parser).
	if bytes.Contains(it.Raw, []byte("x-mcp-header")) || bytes.Contains(it.Raw, []byte(`\u`)) {
		if why := paramHeaderFault(it.Raw); why != "" {
			if _, seen := g.schemaWarned.LoadOrStore(server+"\x00"+it.Key, true); !seen {
				g.log.Warn("tool left out of the list clients get: its x-mcp-header annotations are invalid, and MCP clients leave it out",
					"server", server, "tool", it.Key, "problem", why)
			}
			return nil
		}
	}
	if !fixed {
		return it.Raw
	}
	out, err := json.Marshal(tool)
	if err != nil {
		return nil
	}
	if _, seen := g.schemaWarned.LoadOrStore(server, true); !seen {
		g.log.Warn(`tool schemas without "type": "object" (which MCP requires) given one in the list clients get; pins keep what the server sent`,
			"server", server, "tool", it.Key)
	}
	return out
}

// objectSchema checks one tool schema (present: the field was there) and
// returns it with "type": "object" added if it had no type (added), or
// why it cannot be passed.
func objectSchema(raw json.RawMessage, present bool) (_ json.RawMessage, added bool, why string) {
	if !present {
		return json.RawMessage(`{"type":"object"}`), true, ""
	}
	var schema map[string]json.RawMessage
	if err := json.Unmarshal(raw, &schema); err != nil || schema == nil {
		return nil, false, "not a JSON object"
	}
	if p, ok := schema["properties"]; ok {
		var props map[string]json.RawMessage
		if json.Unmarshal(p, &props) != nil || props == nil {
			return nil, false, "properties is not an object"
		}
		for name, v := range props {
			var m map[string]json.RawMessage
			if json.Unmarshal(v, &m) != nil || m == nil {
				return nil, false, "property " + name + " is not a schema object"
			}
		}
	}
	if r, ok := schema["required"]; ok {
		var names []string
		if json.Unmarshal(r, &names) != nil || names == nil {
			return nil, false, "required is not a list of names"
		}
	}
	t, ok := schema["type"]
	if !ok {
		schema["type"] = json.RawMessage(`"object"`)
		out, err := json.Marshal(schema)
		if err != nil {
			return nil, false, err.Error()
		}
		return out, true, ""
	}
	var typ string
	if json.Unmarshal(t, &typ) != nil || typ != "object" {
		return nil, false, `"type" is ` + string(t) + `, not "object"`
	}
	return raw, false, ""
}
