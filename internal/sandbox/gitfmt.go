package sandbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// gitlinks returns the paths of the submodules (gitlinks, mode 0160000)
// an index file lists, but those marked skip-worktree (a sparse
// checkout's, which git status does not enter): git status enters each
// that is populated. It reads index versions 2 to 4 (the
// prefix-compressed paths of 4 too); hashLen is the object hash's length
// (20, or 32 for SHA-256). shared is the hash of the shared index a split
// index names in its link extension (nil: none), whose entries count too.
func gitlinks(data []byte, hashLen int) (links []string, shared []byte, err error) {
	if len(data) < 12 || string(data[:4]) != "DIRC" {
		return nil, nil, errors.New("not an index file")
	}
	version := binary.BigEndian.Uint32(data[4:])
	if version < 2 || version > 4 {
		return nil, nil, fmt.Errorf("index version %d, which mcpbox does not read", version)
	}
	n := binary.BigEndian.Uint32(data[8:])
	if uint64(n) > uint64(len(data)) {
		return nil, nil, errors.New("truncated index")
	}
	var out []string
	var prev []byte
	off := 12
	for range n {
		start := off
		fixed := 40 + hashLen + 2
		if off+fixed > len(data) {
			return nil, nil, errors.New("truncated index")
		}
		mode := binary.BigEndian.Uint32(data[off+24:])
		flags := binary.BigEndian.Uint16(data[off+40+hashLen:])
		off += fixed
		skip := false
		if version >= 3 && flags&0x4000 != 0 {
			if off+2 > len(data) {
				return nil, nil, errors.New("truncated index")
			}
			skip = binary.BigEndian.Uint16(data[off:])&0x4000 != 0 // skip-worktree
			off += 2
		}
		var name []byte
		if version == 4 {
			strip, m := gitVarint(data[min(off, len(data)):])
			if m == 0 || strip > uint64(len(prev)) {
				return nil, nil, errors.New("bad path in index")
			}
			off += m
			end := bytes.IndexByte(data[min(off, len(data)):], 0)
			if end < 0 {
				return nil, nil, errors.New("truncated index")
			}
			name = append(append([]byte{}, prev[:uint64(len(prev))-strip]...), data[off:off+end]...)
			off += end + 1
		} else {
			end := bytes.IndexByte(data[min(off, len(data)):], 0)
			if end < 0 {
				return nil, nil, errors.New("truncated index")
			}
			name = data[off : off+end]
			// 1 to 8 NULs end the entry at a multiple of 8 bytes.
			off = start + (off+end-start+8)&^7
			if off > len(data) {
				return nil, nil, errors.New("truncated index")
			}
		}
		prev = name
		if mode&0o170000 == 0o160000 && !skip {
			out = append(out, string(name))
		}
	}
	// Extensions: a signature, a length, the data; the file's hash last.
	for off+8 <= len(data)-hashLen {
		size := uint64(binary.BigEndian.Uint32(data[off+4:]))
		if string(data[off:off+4]) == "link" && size >= uint64(hashLen) && off+8+hashLen <= len(data) {
			shared = data[off+8 : off+8+hashLen]
			if bytes.Count(shared, []byte{0}) == hashLen {
				shared = nil // an all-zero hash: no shared index
			}
		}
		if size > uint64(len(data)) {
			break
		}
		off += 8 + int(size)
	}
	return out, shared, nil
}

// gitVarint decodes the index's offset-style varint; it returns the value
// and the bytes read (0: malformed).
func gitVarint(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	c := b[0]
	v := uint64(c & 127)
	i := 1
	for c&128 != 0 {
		if i >= len(b) || i > 9 {
			return 0, 0
		}
		v++
		c = b[i]
		v = v<<7 | uint64(c&127)
		i++
	}
	return v, i
}

// gitConfig returns the settings of a git config file as (key, value)
// pairs in order: the key is "section.name" or "section.subsection.name"
// with section and name lower-cased (as git matches them), the
// subsection as written. A key without "=" has the value "true". It
// reads what holdGit needs (paths), not every corner of the syntax:
// a line continuation ends the value.
func gitConfig(data []byte) [][2]string {
	var out [][2]string
	section := ""
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a byte order mark, which git skips
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			end := strings.IndexByte(line, ']')
			if end < 0 {
				section = ""
				continue
			}
			head := strings.TrimSpace(line[1:end])
			name, sub, quoted := strings.Cut(head, " ")
			if quoted {
				sub = strings.TrimSpace(sub)
				sub = strings.TrimSuffix(strings.TrimPrefix(sub, `"`), `"`)
				sub = strings.NewReplacer(`\\`, `\`, `\"`, `"`).Replace(sub)
				section = strings.ToLower(name) + "." + sub
			} else if s, rest, dotted := strings.Cut(head, "."); dotted {
				section = strings.ToLower(s) + "." + strings.ToLower(rest)
			} else {
				section = strings.ToLower(head)
			}
			line = strings.TrimSpace(line[end+1:])
			if line == "" {
				continue
			}
		}
		if line == "" || line[0] == '#' || line[0] == ';' || section == "" {
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		key = strings.ToLower(strings.TrimSpace(key))
		if !ok {
			out = append(out, [2]string{section + "." + key, "true"})
			continue
		}
		out = append(out, [2]string{section + "." + key, gitValue(val)})
	}
	return out
}

// gitValue is a config value as git reads it: quotes removed, escapes
// applied, a comment outside quotes dropped, outer spaces trimmed.
func gitValue(v string) string {
	var b strings.Builder
	quoted := false
	v = strings.TrimSpace(v)
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			quoted = !quoted
		case c == '\\' && i+1 < len(v):
			i++
			switch v[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'b':
				b.WriteByte('\b')
			default:
				b.WriteByte(v[i])
			}
		case (c == '#' || c == ';') && !quoted:
			return strings.TrimSpace(b.String())
		default:
			b.WriteByte(c)
		}
	}
	return strings.TrimSpace(b.String())
}
