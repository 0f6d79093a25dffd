package initclaude

import (
	"path/filepath"
)

// Config is one run of `init claude` once its flags are read.
type Config struct {
	Target  Target
	Options Options
	// MCP adds the server to the project's .mcp.json (project scope; other
	// scopes use `claude mcp add`, which the caller runs).
	MCP bool
	// ClaudeMD and Skill add the CLAUDE.md block and the skill file.
	ClaudeMD, Skill bool
	// Force replaces a CLAUDE.md block or skill edited by hand.
	Force bool
	// Version is the teambus version (the plugin's manifest).
	Version string
}

// Plan is the file changes of a run and the warnings found on the way.
type Plan struct {
	Changes  []Change
	Warnings []string
}

// PlanInstall returns the changes that install teambus for cfg.
func PlanInstall(cfg Config) (Plan, error) {
	var p Plan
	if err := cfg.Options.Validate(); err != nil {
		return p, err
	}
	t := cfg.Target
	if t.Scope == ScopePlugin {
		cs, err := PlanPlugin(t.Dir, cfg.Version, cfg.Options)
		p.Changes = cs
		return p, err
	}
	c, err := PlanSettings(t.Settings, Handlers(cfg.Options))
	if err != nil {
		return p, err
	}
	p.Changes = append(p.Changes, c)
	if cfg.MCP && t.Scope == ScopeProject {
		c, err := PlanMCP(filepath.Join(t.ProjectRoot, ".mcp.json"), "teambus")
		if err != nil {
			return p, err
		}
		p.Changes = append(p.Changes, c)
	}
	if cfg.ClaudeMD {
		c, w, err := PlanClaudeMD(t.ClaudeMD, cfg.Force)
		if err := p.add(c, w, err); err != nil {
			return p, err
		}
	}
	if cfg.Skill {
		c, w, err := PlanSkill(t.Skill, cfg.Force)
		if err := p.add(c, w, err); err != nil {
			return p, err
		}
	}
	return p, nil
}

// PlanRemove returns the changes that take everything teambus wrote for the
// target out again (§12.2.5): its handlers from every event, the project's
// MCP entry, the CLAUDE.md block and the skill when unchanged.
func PlanRemove(t Target) (Plan, error) {
	var p Plan
	if t.Scope == ScopePlugin {
		cs, ws, err := PlanPluginRemove(t.Dir)
		p.Changes, p.Warnings = cs, ws
		return p, err
	}
	c, err := PlanSettingsRemove(t.Settings)
	if err != nil {
		return p, err
	}
	p.Changes = append(p.Changes, c)
	if t.Scope == ScopeProject {
		c, err := PlanMCPRemove(filepath.Join(t.ProjectRoot, ".mcp.json"))
		if err != nil {
			return p, err
		}
		p.Changes = append(p.Changes, c)
	}
	if t.ClaudeMD != "" {
		c, w, err := PlanClaudeMDRemove(t.ClaudeMD)
		if err := p.add(c, w, err); err != nil {
			return p, err
		}
	}
	c, w, err := PlanSkillRemove(t.Skill)
	c.Prune = append(c.Prune, filepath.Dir(filepath.Dir(t.Skill)))
	if t.Scope != ScopeUser {
		c.Prune = append(c.Prune, filepath.Dir(t.Settings)) // .claude, when teambus left it empty
	}
	if err := p.add(c, w, err); err != nil {
		return p, err
	}
	return p, nil
}

func (p *Plan) add(c Change, warn string, err error) error {
	if err != nil {
		return err
	}
	if warn != "" {
		p.Warnings = append(p.Warnings, warn)
	}
	p.Changes = append(p.Changes, c)
	return nil
}

// Apply performs the changes in order; it stops at the first failure.
func (p Plan) Apply() error {
	for _, c := range p.Changes {
		if err := Apply(c); err != nil {
			return err
		}
	}
	return nil
}
