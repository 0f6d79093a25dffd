package initclaude

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
)

// ErrForeignEntry is returned when a file already has an entry named teambus
// that teambus did not write.
var ErrForeignEntry = errors.New("entry not written by teambus")

// MCPEntry is the mcpServers.teambus entry of a project's .mcp.json
// (§12.2.7). Identity reaches the server from the binding, never from here.
type MCPEntry struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

// mcpEntry is the entry for bin.
func mcpEntry(bin string) MCPEntry { return MCPEntry{Command: bin, Args: []string{"mcp"}} }

// ownedMCP reports whether an mcpServers entry is teambus's: a command whose
// base name is teambus with args ["mcp", …].
func ownedMCP(raw []byte) bool {
	var e struct {
		Command string   `json:"command"`
		Args    []string `json:"args"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return false
	}
	return filepath.Base(e.Command) == "teambus" && len(e.Args) > 0 && e.Args[0] == "mcp"
}

// MergeMCP returns the .mcp.json data with the teambus server entry set.
func MergeMCP(data []byte, bin string) ([]byte, error) {
	e := mcpEntry(bin)
	return editMCP(data, &e, false)
}

// RemoveMCP returns data without the teambus entry; mcpServers left empty is
// deleted unless keepEmpty.
func RemoveMCP(data []byte, keepEmpty bool) ([]byte, error) {
	return editMCP(data, nil, keepEmpty)
}

func editMCP(data []byte, entry *MCPEntry, keepEmpty bool) ([]byte, error) {
	ms, err := parseDocument(data)
	if err != nil {
		return nil, err
	}
	at, err := findKey(ms, "mcpServers")
	if err != nil {
		return nil, err
	}
	var servers []member
	if at >= 0 && kind(ms[at].value) != 'n' {
		if kind(ms[at].value) != '{' {
			return nil, fmt.Errorf("%w: \"mcpServers\" is not an object", ErrNotJSON)
		}
		if servers, err = parseObject(ms[at].value); err != nil {
			return nil, fmt.Errorf("%w: mcpServers: %w", ErrNotJSON, err)
		}
	}
	si, err := findKey(servers, "teambus")
	if err != nil {
		return nil, err
	}
	if si >= 0 && !ownedMCP(servers[si].value) {
		if entry == nil {
			return data, nil // not ours: leave it
		}
		return nil, fmt.Errorf("%w: mcpServers.teambus runs something else; rename or remove it first", ErrForeignEntry)
	}
	switch {
	case entry == nil && si >= 0:
		servers = append(servers[:si:si], servers[si+1:]...)
	case entry != nil:
		v, err := marshal(entry, 2)
		if err != nil {
			return nil, err
		}
		if si >= 0 {
			servers[si].value = v
		} else {
			servers = append(servers, newMember("teambus", v))
		}
	}
	val := writeObject(servers, 1)
	switch {
	case at >= 0 && len(servers) == 0 && !keepEmpty:
		ms = append(ms[:at:at], ms[at+1:]...)
	case at >= 0:
		ms[at].value = val
	case len(servers) > 0:
		ms = append(ms, newMember("mcpServers", val))
	}
	return document(ms), nil
}

// HasMCP reports whether data has teambus's mcpServers entry.
func HasMCP(data []byte) bool {
	ms, err := parseDocument(data)
	if err != nil {
		return false
	}
	at, _ := findKey(ms, "mcpServers")
	if at < 0 || kind(ms[at].value) != '{' {
		return false
	}
	servers, err := parseObject(ms[at].value)
	if err != nil {
		return false
	}
	si, _ := findKey(servers, "teambus")
	return si >= 0 && ownedMCP(servers[si].value)
}

// PlanMCP returns the change that adds the teambus server to the .mcp.json
// at path.
func PlanMCP(path, bin string) (Change, error) {
	old, err := readFile(path)
	if err != nil {
		return Change{}, err
	}
	out, err := MergeMCP(old, bin)
	if err != nil {
		return Change{}, fmt.Errorf("%s: %w", path, err)
	}
	if HasMCP(old) && sameJSON(out, old) {
		return Change{Path: path, Old: old, New: old}, nil
	}
	return Change{Path: path, Old: old, New: out, Backup: true}, nil
}

// PlanMCPRemove returns the change that takes the teambus server out of the
// .mcp.json at path.
func PlanMCPRemove(path string) (Change, error) {
	old, err := readFile(path)
	if err != nil || old == nil || !HasMCP(old) {
		return Change{Path: path, Old: old, New: old}, err
	}
	bak, err := readFile(path + BackupSuffix)
	if err != nil {
		return Change{}, err
	}
	out, err := RemoveMCP(old, hasKey(bak, "mcpServers"))
	if err != nil {
		return Change{}, fmt.Errorf("%s: %w", path, err)
	}
	return restoreOrDelete(path, old, out, bak), nil
}
