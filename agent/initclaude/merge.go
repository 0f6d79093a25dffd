package initclaude

import (
	"encoding/json"
	"fmt"
)

// Merge returns the settings file data with every teambus handler taken out
// and groups appended as teambus's own matcher groups (§12.2.4). data may be
// empty (a missing file is {}). Running Merge on its own output returns it
// unchanged.
func Merge(data []byte, groups []EventGroup) ([]byte, error) {
	return editSettings(data, groups, false)
}

// RemoveHooks returns data without any teambus handler (§12.2.5). An event
// left empty is deleted; "hooks" left empty is deleted unless keepEmptyHooks
// (the user had a "hooks" key before teambus wrote the file).
func RemoveHooks(data []byte, keepEmptyHooks bool) ([]byte, error) {
	return editSettings(data, nil, keepEmptyHooks)
}

func editSettings(data []byte, groups []EventGroup, keepEmptyHooks bool) ([]byte, error) {
	ms, err := parseDocument(data)
	if err != nil {
		return nil, err
	}
	at, err := findKey(ms, "hooks")
	if err != nil {
		return nil, err
	}
	var cur []byte
	if at >= 0 {
		cur = ms[at].value
	}
	val, empty, err := editHooks(cur, groups)
	if err != nil {
		return nil, err
	}
	switch {
	case at >= 0 && empty && !keepEmptyHooks:
		ms = append(ms[:at:at], ms[at+1:]...)
	case at >= 0:
		ms[at].value = val
	case !empty:
		ms = append(ms, newMember("hooks", val))
	}
	return document(ms), nil
}

// editHooks edits the value of "hooks" (nil when absent) at depth 1. It
// returns the new value and whether it is empty.
func editHooks(cur []byte, groups []EventGroup) ([]byte, bool, error) {
	var events []member
	if cur != nil && kind(cur) != 'n' {
		if kind(cur) != '{' {
			return nil, false, fmt.Errorf("%w: \"hooks\" is not an object", ErrNotJSON)
		}
		var err error
		if events, err = parseObject(cur); err != nil {
			return nil, false, fmt.Errorf("%w: hooks: %w", ErrNotJSON, err)
		}
	}
	add := map[string][]Group{}
	var order []string
	for _, g := range groups {
		if _, ok := add[g.Event]; !ok {
			order = append(order, g.Event)
		}
		add[g.Event] = append(add[g.Event], g.Group)
	}
	done := map[string]bool{}
	var out []member
	for _, ev := range events {
		if kind(ev.value) == 'n' {
			continue // null: Claude Code expects arrays
		}
		newGroups := add[ev.key]
		if done[ev.key] {
			newGroups = nil // a duplicate event key gets teambus's groups once
		}
		done[ev.key] = true
		if kind(ev.value) != '[' {
			if len(newGroups) > 0 {
				return nil, false, fmt.Errorf("%w: hooks.%s is not an array", ErrNotJSON, ev.key)
			}
			out = append(out, ev)
			continue
		}
		val, changed, n, err := editEvent(ev.value, newGroups)
		if err != nil {
			return nil, false, fmt.Errorf("hooks.%s: %w", ev.key, err)
		}
		if changed && n == 0 {
			continue
		}
		if changed {
			ev.value = val
		}
		out = append(out, ev)
	}
	for _, e := range order {
		if done[e] {
			continue
		}
		val, _, _, err := editEvent([]byte("[]"), add[e])
		if err != nil {
			return nil, false, err
		}
		out = append(out, newMember(e, val))
	}
	return writeObject(out, 1), len(out) == 0, nil
}

// editEvent takes teambus handlers out of an event array (depth 2) and
// appends add. It returns the new array, whether it differs from cur, and
// its number of groups.
func editEvent(cur []byte, add []Group) ([]byte, bool, int, error) {
	elems, err := parseArray(cur)
	if err != nil {
		return nil, false, 0, fmt.Errorf("%w: %w", ErrNotJSON, err)
	}
	changed := len(add) > 0
	var out [][]byte
	for _, g := range elems {
		ng, keep, gChanged := editGroup(g)
		changed = changed || gChanged
		if keep {
			out = append(out, ng)
		}
	}
	for _, g := range add {
		b, err := marshal(g, 3)
		if err != nil {
			return nil, false, 0, err
		}
		out = append(out, b)
	}
	if !changed {
		return cur, false, len(out), nil
	}
	return writeArray(out, 2), true, len(out), nil
}

// editGroup takes teambus handlers out of one matcher group (depth 3). It
// returns the group, whether to keep it, and whether it changed. A group
// teambus can not read is kept as it is.
func editGroup(g []byte) ([]byte, bool, bool) {
	if kind(g) != '{' {
		return g, true, false
	}
	ms, err := parseObject(g)
	if err != nil {
		return g, true, false
	}
	at, err := findKey(ms, "hooks")
	if err != nil || at < 0 || kind(ms[at].value) != '[' {
		return g, true, false
	}
	hs, err := parseArray(ms[at].value)
	if err != nil {
		return g, true, false
	}
	var keep [][]byte
	for _, h := range hs {
		if !IsOwned(h) {
			keep = append(keep, h)
		}
	}
	if len(keep) == len(hs) {
		return g, true, false
	}
	if len(keep) == 0 {
		return nil, false, true
	}
	ms[at].value = writeArray(keep, 4)
	return writeObject(ms, 3), true, true
}

// Installed is one teambus handler found in a file.
type Installed struct {
	Event   string
	Matcher string
	Handler []byte // as written
}

// FindInstalled lists the teambus handlers of a settings (or hooks.json)
// file, in file order.
func FindInstalled(data []byte) ([]Installed, error) {
	ms, err := parseDocument(data)
	if err != nil {
		return nil, err
	}
	at, err := findKey(ms, "hooks")
	if err != nil || at < 0 || kind(ms[at].value) != '{' {
		return nil, err
	}
	events, err := parseObject(ms[at].value)
	if err != nil {
		return nil, fmt.Errorf("%w: hooks: %w", ErrNotJSON, err)
	}
	var out []Installed
	for _, ev := range events {
		if kind(ev.value) != '[' {
			continue
		}
		groups, err := parseArray(ev.value)
		if err != nil {
			continue
		}
		for _, g := range groups {
			if kind(g) != '{' {
				continue
			}
			gm, err := parseObject(g)
			if err != nil {
				continue
			}
			matcher := ""
			if i, _ := findKey(gm, "matcher"); i >= 0 && kind(gm[i].value) == '"' {
				_ = json.Unmarshal(gm[i].value, &matcher) // a non-string matcher stays "": it matches no teambus entry
			}
			hi, _ := findKey(gm, "hooks")
			if hi < 0 || kind(gm[hi].value) != '[' {
				continue
			}
			hs, err := parseArray(gm[hi].value)
			if err != nil {
				continue
			}
			for _, h := range hs {
				if IsOwned(h) {
					out = append(out, Installed{Event: ev.key, Matcher: matcher, Handler: h})
				}
			}
		}
	}
	return out, nil
}
