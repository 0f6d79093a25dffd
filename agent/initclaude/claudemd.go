package initclaude

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
)

// The markers of the CLAUDE.md block (§12.2.8).
const (
	BlockBegin = "<!-- teambus:begin v1 -->"
	BlockEnd   = "<!-- teambus:end -->"
)

// guide is the text of the CLAUDE.md block and of the skill: what teambus
// mail looks like and the commands. It must stay within 10 lines so the
// block with its markers is at most 12.
const guide = `## teambus (team mail and tasks)
When this session is a teambus team member, mail arrives in context as "teambus mail for <member>
(team <team>)", one "[#seq time from sender, type]" header per message, each body indented two spaces.
Mail is acknowledged on delivery; ` + "`teambus inbox`" + ` shows what is still unread.
- Reply or report: ` + "`teambus send --to <member|lead> \"…\"`" + `
- Tasks: ` + "`teambus task next`" + `, then ` + "`teambus task complete <id>`" + ` (or ` + "`teambus task block <id> --reason …`" + `)
- Record progress: ` + "`teambus checkpoint --done \"…\" --remaining \"…\" --last-action \"…\"`" + `
Processing a message twice must be harmless: after a crash it may be shown again.
`

// ClaudeMDBlock is the block teambus adds to CLAUDE.md.
const ClaudeMDBlock = BlockBegin + "\n" + guide + BlockEnd + "\n"

// SkillText is .claude/skills/teambus/SKILL.md: the guide plus examples.
const SkillText = `---
name: teambus
description: Work as a member of a teambus team - read and answer teambus mail, take, checkpoint and complete tasks. Use when teambus mail, a teambus brief or a teambus task appears in context.
---

` + guide + `
## Examples

` + "```" + `sh
teambus send --to lead "schema ready: db/001.sql; next: migrations"
teambus send --to tm2 --type question "is the users table reversible?"
teambus inbox                      # unread mail (the hooks deliver it on their own)
teambus task next                  # claim the next task for you
teambus checkpoint --done "schema" --remaining "migrations" --last-action "wrote db/001.sql"
teambus task complete t3 --commit "$(git rev-parse HEAD)"
teambus task block t4 --on t3 --reason "needs the schema"
` + "```" + `

With the MCP server installed the same actions are tools: send, inbox, ack, task_next,
task_complete, task_block, checkpoint, whoami, team_status.
`

// knownBlocks are the sha256 of every block and skill text a teambus version
// wrote; only these are replaced or removed without --force.
var knownBlocks = map[string]bool{hash(ClaudeMDBlock): true, hash(SkillText): true}

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// findBlock returns the byte range of the teambus block in data (from the
// begin marker's line to the end marker's line and its newline), or -1.
func findBlock(data []byte) (int, int) {
	b := bytes.Index(data, []byte("<!-- teambus:begin"))
	if b < 0 || (b > 0 && data[b-1] != '\n') {
		return -1, -1
	}
	e := bytes.Index(data[b:], []byte(BlockEnd))
	if e < 0 {
		return -1, -1
	}
	e += b + len(BlockEnd)
	if e < len(data) && data[e] == '\n' {
		e++
	}
	return b, e
}

// PlanClaudeMD returns the change that adds the block to the CLAUDE.md at
// path, and a warning when a block edited by hand is kept.
func PlanClaudeMD(path string, force bool) (Change, string, error) {
	old, err := readFile(path)
	if err != nil {
		return Change{}, "", err
	}
	b, e := findBlock(old)
	if b >= 0 {
		cur := string(old[b:e])
		if cur == ClaudeMDBlock {
			return Change{Path: path, Old: old, New: old}, "", nil
		}
		if !knownBlocks[hash(cur)] && !force {
			return Change{Path: path, Old: old, New: old}, fmt.Sprintf("%s: the teambus block was edited; kept (--force replaces it)", path), nil
		}
		out := append(append(append([]byte{}, old[:b]...), ClaudeMDBlock...), old[e:]...)
		return Change{Path: path, Old: old, New: out, Backup: true}, "", nil
	}
	out := append([]byte{}, old...)
	if len(out) > 0 {
		if out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		out = append(out, '\n')
	}
	out = append(out, ClaudeMDBlock...)
	return Change{Path: path, Old: old, New: out, Backup: true}, "", nil
}

// PlanClaudeMDRemove returns the change that takes the block out of the
// CLAUDE.md at path when it is as teambus wrote it.
func PlanClaudeMDRemove(path string) (Change, string, error) {
	old, err := readFile(path)
	if err != nil || old == nil {
		return Change{Path: path, Old: old, New: old}, "", err
	}
	b, e := findBlock(old)
	if b < 0 {
		return Change{Path: path, Old: old, New: old}, "", nil
	}
	if !knownBlocks[hash(string(old[b:e]))] {
		return Change{Path: path, Old: old, New: old}, fmt.Sprintf("%s: the teambus block was edited; kept, remove it by hand", path), nil
	}
	head := old[:b]
	if bytes.HasSuffix(head, []byte("\n\n")) {
		head = head[:len(head)-1] // the blank line teambus put before the block
	}
	out := append(append([]byte{}, head...), old[e:]...)
	c := Change{Path: path, Old: old, New: out}
	bak, err := readFile(path + BackupSuffix)
	if err != nil {
		return Change{}, "", err
	}
	switch {
	case bak != nil && bytes.Equal(bytes.TrimRight(bak, "\n"), bytes.TrimRight(out, "\n")):
		// The original, perhaps without the final newline teambus added.
		c.New, c.Restored, c.DropBackup = bak, true, true
	case bak == nil && strings.TrimSpace(string(out)) == "":
		c.New = nil
	}
	return c, "", nil
}

// PlanSkill returns the change that writes the skill file at path.
func PlanSkill(path string, force bool) (Change, string, error) {
	return planOwnedFile(path, []byte(SkillText), force)
}

// planOwnedFile writes a file wholly teambus's: replaced when it is as some
// teambus version wrote it, kept (with a warning) when edited.
func planOwnedFile(path string, want []byte, force bool) (Change, string, error) {
	old, err := readFile(path)
	if err != nil {
		return Change{}, "", err
	}
	if old != nil && !bytes.Equal(old, want) && !knownBlocks[hash(string(old))] && !force {
		return Change{Path: path, Old: old, New: old}, fmt.Sprintf("%s: edited since teambus wrote it; kept (--force replaces it)", path), nil
	}
	return Change{Path: path, Old: old, New: want}, "", nil
}

// PlanSkillRemove returns the change that deletes the skill file at path
// when it is as teambus wrote it, with its directory when empty.
func PlanSkillRemove(path string) (Change, string, error) {
	return planOwnedRemove(path, []byte(SkillText))
}

// planOwnedRemove deletes a file wholly teambus's when it is unchanged.
func planOwnedRemove(path string, want []byte) (Change, string, error) {
	old, err := readFile(path)
	if err != nil || old == nil {
		return Change{Path: path}, "", err
	}
	if !bytes.Equal(old, want) && !knownBlocks[hash(string(old))] {
		return Change{Path: path, Old: old, New: old}, fmt.Sprintf("%s: edited since teambus wrote it; kept, remove it by hand", path), nil
	}
	return Change{Path: path, Old: old, Prune: []string{filepath.Dir(path)}}, "", nil
}
