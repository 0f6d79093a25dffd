package initclaude

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// The files of the plugin (§12.2.9), relative to its directory.
const (
	PluginManifest = ".claude-plugin/plugin.json"
	PluginHooks    = "hooks/hooks.json"
	PluginMCP      = ".mcp.json"
	PluginSkill    = "skills/teambus/SKILL.md"
	PluginReadme   = "README.md"
)

// Manifest is .claude-plugin/plugin.json.
type Manifest struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Description string `json:"description"`
	Author      Author `json:"author"`
}

// Author is the manifest's author (`claude plugin validate` warns without
// one).
type Author struct {
	Name string `json:"name"`
}

var semverRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]*)?$`) })

// PluginVersion turns a teambus version ("v1.2.3", "dev") into the semantic
// version a plugin manifest carries ("1.2.3", "0.0.0-dev").
func PluginVersion(v string) string {
	v = strings.TrimPrefix(v, "v")
	if semverRE().MatchString(v) {
		return v
	}
	return "0.0.0-dev"
}

// pluginReadme is the plugin's README.md.
const pluginReadme = `# teambus plugin for Claude Code

Written by ` + "`teambus init claude --scope plugin`" + `. It makes a Claude Code session a member of a
teambus team through hooks (hooks/hooks.json) and adds the teambus MCP server (.mcp.json) and a skill.

- ` + "`teambus`" + ` must be on PATH: the hooks and the MCP server run the bare command.
- The identity comes from the environment only:
  ` + "`TEAMBUS_TEAM=alpha TEAMBUS_MEMBER=tm1 claude --plugin-dir <this directory>`" + `.
  A session without TEAMBUS_TEAM/TEAMBUS_MEMBER is not a member; every hook is then a silent no-op.
- Install for good through a marketplace, or try it with ` + "`claude --plugin-dir DIR`" + `.
  The MCP tools are named mcp__plugin_teambus_teambus__<tool>.
- Do not also install the teambus hooks into a settings file: a plugin's hooks and a settings
  file's hooks both fire. ` + "`teambus init claude --check`" + ` warns about that.
- Remove with ` + "`teambus init claude --scope plugin --out DIR --remove`" + `.
`

// PluginFile is one file of the plugin.
type PluginFile struct {
	Rel  string
	Data []byte
}

// PluginFiles returns the plugin's files for version (a teambus version) and
// o (Bin and identity are set here: the bare teambus, identity from env).
func PluginFiles(version string, o Options) ([]PluginFile, error) {
	o.Bin, o.Team, o.Member = "teambus", "", ""
	if err := o.Validate(); err != nil {
		return nil, err
	}
	man, err := marshal(Manifest{
		Name:        "teambus",
		Version:     PluginVersion(version),
		Description: "Make this Claude Code session a durable teambus team member: mail, tasks, checkpoints, crash recovery",
		Author:      Author{Name: "teambus"},
	}, 0)
	if err != nil {
		return nil, err
	}
	hooks, err := Merge(nil, Handlers(o))
	if err != nil {
		return nil, err
	}
	mcp, err := MergeMCP(nil, "teambus")
	if err != nil {
		return nil, err
	}
	return []PluginFile{
		{PluginManifest, append(man, '\n')},
		{PluginHooks, hooks},
		{PluginMCP, mcp},
		{PluginSkill, []byte(SkillText)},
		{PluginReadme, []byte(pluginReadme)},
	}, nil
}

// PlanPlugin returns the changes that write the plugin into dir. The files
// are teambus's: they are replaced whole.
func PlanPlugin(dir, version string, o Options) ([]Change, error) {
	files, err := PluginFiles(version, o)
	if err != nil {
		return nil, err
	}
	var out []Change
	for _, f := range files {
		p := filepath.Join(dir, f.Rel)
		old, err := readFile(p)
		if err != nil {
			return nil, err
		}
		out = append(out, Change{Path: p, Old: old, New: f.Data})
	}
	return out, nil
}

// PlanPluginRemove returns the changes that delete the plugin from dir, and
// warnings for files kept because they were edited.
func PlanPluginRemove(dir string) ([]Change, []string, error) {
	var out []Change
	var warns []string
	keep := func(c Change, w string, err error) error {
		if err != nil {
			return err
		}
		if w != "" {
			warns = append(warns, w)
		}
		out = append(out, c)
		return nil
	}
	// plugin.json: teambus's when named teambus with only the keys it writes.
	man := filepath.Join(dir, PluginManifest)
	old, err := readFile(man)
	if err != nil {
		return nil, nil, err
	}
	if old != nil {
		var m map[string]any
		if json.Unmarshal(old, &m) == nil && m["name"] == "teambus" && len(m) <= 4 {
			out = append(out, Change{Path: man, Old: old, Prune: []string{filepath.Dir(man)}})
		} else {
			warns = append(warns, fmt.Sprintf("%s: not as teambus wrote it; kept", man))
		}
	}
	hooks := filepath.Join(dir, PluginHooks)
	c, err := PlanSettingsRemove(hooks)
	if err != nil {
		return nil, nil, err
	}
	c.Prune = []string{filepath.Dir(hooks)}
	out = append(out, c)
	c, err = PlanMCPRemove(filepath.Join(dir, PluginMCP))
	if err != nil {
		return nil, nil, err
	}
	out = append(out, c)
	skill := filepath.Join(dir, PluginSkill)
	c, w, err := PlanSkillRemove(skill)
	c.Prune = []string{filepath.Dir(skill), filepath.Dir(filepath.Dir(skill))}
	if err := keep(c, w, err); err != nil {
		return nil, nil, err
	}
	c, w, err = planOwnedRemove(filepath.Join(dir, PluginReadme), []byte(pluginReadme))
	c.Prune = []string{dir}
	if err := keep(c, w, err); err != nil {
		return nil, nil, err
	}
	return out, warns, nil
}
