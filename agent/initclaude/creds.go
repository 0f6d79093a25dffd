package initclaude

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
)

// Credential is the member (or lead) credential a run provisioned, kept or
// revoked, as Result reports it.
type Credential struct {
	Path   string `json:"path"`
	Team   string `json:"team"`
	Member string `json:"member"`
	// Action is issued, reissued, reused, kept or revoked ("would …" with
	// DryRun).
	Action string `json:"action"`
	// Reason says why an existing file was not reused.
	Reason string `json:"reason,omitempty"`
	// Baked says the handlers name the file (--creds); otherwise each
	// session's TEAMBUS_CREDS must.
	Baked bool `json:"baked"`
}

// CredsDir is where `init claude` keeps the credentials it provisions:
// $XDG_CONFIG_HOME/teambus/creds (xdgConfig when absolute), else
// ~/.config/teambus/creds; "" when neither is known.
func CredsDir(xdgConfig, home string) string {
	if xdgConfig != "" && filepath.IsAbs(xdgConfig) {
		return filepath.Join(xdgConfig, "teambus", "creds")
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".config", "teambus", "creds")
}

// CredsPath is the file of member's credential in team under dir:
// <dir>/<team>/<member>.creds.
func CredsPath(dir, team, member string) string {
	return filepath.Join(dir, team, member+".creds")
}

// provision issues or reuses the credential of the identity into
// r.credsPath before the handlers naming it are written. An existing file
// is reused when it is private, is this member's, names the bus the node
// is at now and the node still accepts it; otherwise a new credential is
// issued (which replaces the password: the old file stops working) and the
// reason is reported. Nothing is written when the bus does not answer
// (exit 1) or the team or member is not on it (exit 2).
func (r *run) provision() error {
	team, member, path := r.in.Team, r.in.Member, r.credsPath
	if root := r.target.ProjectRoot; root != "" && within(root, path) {
		return teambus.Invalidf("init claude: the credential file %s would be inside the repository %s: set XDG_CONFIG_HOME to a directory outside it; nothing was written", path, root)
	}
	cred := &Credential{Path: path, Team: team, Member: member, Baked: r.opts.Creds != ""}
	r.rep.Credential = cred
	old, why := readOwnCreds(path, team, member)
	if r.in.OpenBus == nil {
		return teambus.Unavailablef("init claude: no bus to issue the credential of %s in team %s from; nothing was written", member, team)
	}
	b, done, err := r.in.OpenBus(r.ctx)
	if err != nil {
		if old != nil && r.in.ConnectCreds != nil {
			// No operator here: the file the operator handed out is
			// reused when the node accepts a connection with it.
			return r.reuseByConnecting(cred, err)
		}
		hint := ""
		if old == nil && why == "" {
			hint = fmt.Sprintf(" (without the node token: put the credential the operator issued, `teambus team creds %s --member %s --out FILE`, at %s, mode 0600, and rerun)", team, member, path)
		}
		return fmt.Errorf("init claude: the bus does not answer as the operator, so the credential of %s in team %s can not be issued or checked%s: %w; nothing was written", member, team, hint, err)
	}
	defer done()
	if err := b.Team(r.ctx, team); err != nil {
		if errors.Is(err, teambus.ErrNotFound) {
			return teambus.Invalidf("init claude: team %s is not on the bus: create it (`teambus team create %s --member %s`) and rerun; nothing was written", team, team, member)
		}
		return fmt.Errorf("init claude: ask the bus for team %s: %w; nothing was written", team, err)
	}
	if member != teambus.Lead {
		if err := b.Member(r.ctx, team, member); err != nil {
			if errors.Is(err, teambus.ErrNotFound) {
				return teambus.Invalidf("init claude: team %s has no member %s: add it or fix --member, and rerun; nothing was written", team, member)
			}
			return fmt.Errorf("init claude: ask the bus for member %s of team %s: %w; nothing was written", member, team, err)
		}
	}
	servers := b.Servers()
	if old != nil {
		switch ok, err := b.Accepts(r.ctx, old); {
		case err != nil:
			return fmt.Errorf("init claude: check the credential %s: %w; nothing was written", path, err)
		case !slices.Equal(old.Servers, servers):
			why = fmt.Sprintf("it names the bus %s, the node is at %s", strings.Join(old.Servers, ","), strings.Join(servers, ","))
		case !ok:
			why = "the node no longer accepts it (revoked, or issued again since)"
		default:
			cred.Action = r.dry("reused")
			return nil
		}
	}
	cred.Action, cred.Reason = "issued", why
	if why != "" {
		cred.Action = "reissued"
	}
	cred.Action = r.dry(cred.Action)
	if r.in.DryRun {
		return nil
	}
	if err := mkdirPrivate(r.in.CredsDir, filepath.Dir(path)); err != nil {
		return err
	}
	cr, err := b.Issue(r.ctx, team, member, servers)
	if err != nil {
		return fmt.Errorf("init claude: issue the credential of %s in team %s: %w; nothing was written", member, team, err)
	}
	if err := bus.WriteCreds(path, cr); err != nil {
		// The node has the new password, the file the old one: a rerun
		// issues again.
		return fmt.Errorf("init claude: %w", err)
	}
	if why != "" {
		r.warn("issued a new credential of %s in team %s into %s: the old file was not reused (%s); a session still running on it is refused from now on", member, team, path, why)
	}
	return nil
}

// dry is action, or "would <action>" with DryRun.
func (r *run) dry(action string) string {
	if r.in.DryRun {
		return "would " + map[string]string{"issued": "issue", "reissued": "reissue", "reused": "reuse", "revoked": "revoke"}[action]
	}
	return action
}

// readOwnCreds reads the credential file at path when it may be reused:
// it is there, only its owner may read it, and it is a teambus credential
// of team's member. Otherwise cr is nil and why says what is wrong ("" when
// there is no file).
func readOwnCreds(path, team, member string) (cr *bus.Creds, why string) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ""
	}
	if err != nil {
		return nil, fmt.Sprintf("it can not be read: %v", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Sprintf("other users may read it (mode %04o)", fi.Mode().Perm())
	}
	cr, ok, err := bus.ReadCreds(path)
	switch {
	case err != nil:
		return nil, fmt.Sprintf("it is damaged: %v", err)
	case !ok:
		return nil, "it is not a teambus credential"
	case cr.Team != team || cr.Member != member:
		return nil, fmt.Sprintf("it is the credential of %s in team %s", cr.Member, cr.Team)
	}
	return cr, ""
}

// mkdirPrivate makes dir (and root above it) with mode 0700, and takes
// group and other access away from the directories between root and dir
// that were already there: they are teambus's own.
func mkdirPrivate(root, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("init claude: credentials directory: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o700); err != nil {
			return fmt.Errorf("init claude: credentials directory: %w", err)
		}
		if d == root || !within(root, d) {
			return nil
		}
	}
}

// within reports whether path is dir or below it.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// revokeCreds revokes the credential of the member the removed handlers
// were installed for (the identity given, else the one they baked) and
// deletes its file, before anything else is changed. Without Revoke it
// only reports the file it keeps.
func (r *run) revokeCreds(have Options) error {
	team, member, path := r.in.Team, r.in.Member, r.credsPath
	if team == "" {
		team, member, path = have.Team, have.Member, have.Creds
	}
	if path == "" && team != "" && r.in.CredsDir != "" {
		path = CredsPath(r.in.CredsDir, team, member)
	}
	if !r.in.Revoke {
		if path != "" {
			if _, err := os.Stat(path); err == nil {
				r.rep.Credential = &Credential{Path: path, Team: team, Member: member, Action: "kept"}
			}
		}
		return nil
	}
	if team == "" {
		return teambus.Invalidf("init claude: --revoke needs the member whose credential to revoke: pass --team T --member M (or --lead --team T); nothing was changed")
	}
	r.rep.Credential = &Credential{Path: path, Team: team, Member: member, Action: r.dry("revoked")}
	if r.in.DryRun {
		return nil
	}
	if r.in.OpenBus == nil {
		return teambus.Unavailablef("init claude: no bus to revoke the credential of %s in team %s on; nothing was changed", member, team)
	}
	b, done, err := r.in.OpenBus(r.ctx)
	if err != nil {
		return fmt.Errorf("init claude: the bus does not answer, so the credential of %s in team %s can not be revoked: %w; nothing was changed", member, team, err)
	}
	defer done()
	if err := b.Revoke(r.ctx, team, member); err != nil {
		return fmt.Errorf("init claude: revoke the credential of %s in team %s: %w; nothing was changed", member, team, err)
	}
	if path != "" {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("init claude: the credential is revoked; delete its file: %w", err)
		}
	}
	return nil
}

// The sources of the credential a session's hooks connect with.
const (
	// SourceCreds: a credential file baked into the handlers (--creds).
	SourceCreds = "creds"
	// SourceEnv: TEAMBUS_CREDS of the session's environment (the
	// settings file's "env", else the terminal claude is started from).
	SourceEnv = "env"
	// SourceToken: the node token (operator rights).
	SourceToken = "token"
)

// CredUse is the credential the teambus handlers (or MCP server) of one
// location connect with, as Check reports it. Problem, when set, is why a
// session would hold the node token or would not bind; Fix is the command
// (or edit) that mends it.
type CredUse struct {
	Source  string `json:"source"`
	Path    string `json:"path,omitempty"`
	Team    string `json:"team,omitempty"`
	Member  string `json:"member,omitempty"`
	Problem string `json:"problem,omitempty"`
	Fix     string `json:"fix,omitempty"`
	creds   *bus.Creds
	fix     string // the fix of the location, for a problem found later
}

// String is the credential in a few words.
func (u *CredUse) String() string {
	switch u.Source {
	case SourceToken:
		return "the node token"
	case SourceEnv:
		if u.Path == "" {
			return "TEAMBUS_CREDS of the environment (not set)"
		}
		return fmt.Sprintf("TEAMBUS_CREDS of the environment: %s (%s/%s)", u.Path, u.Team, u.Member)
	}
	return fmt.Sprintf("credential %s (%s/%s)", u.Path, u.Team, u.Member)
}

// secretEnv are variables that hand a secret to every session when a
// settings file sets them in "env".
var secretEnv = []string{"TEAMBUS_TOKEN", "TEAMBUS_PASSWORD"}

// settingsEnv is the "env" object of a settings file: the variables
// Claude Code sets for the session and every process it starts.
func settingsEnv(data []byte) map[string]string {
	var doc struct {
		Env map[string]any `json:"env"`
	}
	_ = json.Unmarshal(data, &doc) // a file that is not JSON was reported already
	out := map[string]string{}
	for k, v := range doc.Env {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// judgeCreds says which credential the handlers inst of file (at a
// location of scope, holding env in its "env") connect with and what is
// wrong with it: a secret on a handler's command line or in "env", a
// baked identity without a credential (token handlers), handlers that take
// the connection from an environment without TEAMBUS_CREDS, or a
// credential file that is missing, readable by others or another
// member's.
func (r *run) judgeCreds(scope Scope, loc, file string, inst []Installed, env map[string]string) *CredUse {
	have := Infer(inst)
	fix := r.fixCommand(scope, loc, have, "", "")
	for _, in := range inst {
		for _, a := range decodeHandler(in.Handler).hookArgs() {
			if a == "--token" || strings.HasPrefix(a, "--token=") || a == "--password" || strings.HasPrefix(a, "--password=") {
				return &CredUse{Source: SourceToken, Problem: fmt.Sprintf("a %s handler in %s carries a secret on its command line (%s): every local user sees it, and the session holds it", in.Event, file, strings.SplitN(a, "=", 2)[0]), Fix: fix}
			}
		}
	}
	for _, k := range secretEnv {
		if _, ok := env[k]; ok {
			return &CredUse{Source: SourceToken, Problem: fmt.Sprintf("%s sets %s in \"env\": every session started with it, and every process the session runs, holds it", file, k),
				Fix: fmt.Sprintf("delete \"%s\" from \"env\" in %s", k, file)}
		}
	}
	switch {
	case have.Creds != "":
		u := &CredUse{Source: SourceCreds, Path: have.Creds, Team: have.Team, Member: have.Member, fix: fix}
		u.read(have.Team, have.Member, fix)
		return u
	case have.Team != "":
		from := "the bus directory of the terminal claude is started from"
		if have.Bus != "" {
			from = have.Bus
		}
		return r.tokenUse(&CredUse{Source: SourceToken, Team: have.Team, Member: have.Member,
			Problem: fmt.Sprintf("the handlers in %s act as %s/%s with the node token (read from %s): every session they start holds the operator's rights", file, have.Team, have.Member, from), Fix: fix})
	}
	path := env["TEAMBUS_CREDS"]
	if path != "" && scope == ScopeProject {
		r.warn("%s sets TEAMBUS_CREDS in \"env\": a shared file names one user's credential; let each user set TEAMBUS_CREDS in the terminal claude starts from", file)
	}
	if path == "" {
		path = os.Getenv("TEAMBUS_CREDS")
	}
	if path == "" {
		return r.tokenUse(&CredUse{Source: SourceToken, Problem: fmt.Sprintf("the handlers in %s take the connection from the environment, and TEAMBUS_CREDS is not set: a session started from this terminal connects with the node token", file), Fix: fix})
	}
	u := &CredUse{Source: SourceEnv, Path: path, fix: fix}
	u.read("", "", fix)
	if u.Team != "" {
		u.fix = r.fixCommand(scope, loc, have, u.Team, u.Member)
	}
	return u
}

// tokenUse is u, handlers that hand sessions the node token: a problem
// under Strict (--check --credential), else a warning, since that is
// still what an install without --credential writes.
func (r *run) tokenUse(u *CredUse) *CredUse {
	if !r.in.Strict {
		r.warn("%s (with --credential: %s)", u.Problem, strings.Trim(u.Fix, "`"))
		u.Problem, u.Fix = "", ""
	}
	return u
}

// read fills u from its credential file, or says what is wrong with it;
// team and member, when given, are who the handlers act as.
func (u *CredUse) read(team, member, fix string) {
	fi, err := os.Stat(u.Path)
	if err != nil {
		u.Problem, u.Fix = fmt.Sprintf("the credential file %s can not be read (%v): sessions would not bind", u.Path, err), fix
		return
	}
	if fi.Mode().Perm()&0o077 != 0 {
		u.Problem, u.Fix = fmt.Sprintf("other users may read the credential file %s (mode %04o)", u.Path, fi.Mode().Perm()), fix
		return
	}
	cr, ok, err := bus.ReadCreds(u.Path)
	switch {
	case err != nil:
		u.Problem, u.Fix = fmt.Sprintf("the credential file %s is damaged (%v): sessions would not bind", u.Path, err), fix
		return
	case !ok:
		u.Problem, u.Fix = fmt.Sprintf("%s is not a teambus member credential", u.Path), fix
		return
	}
	u.Team, u.Member, u.creds = cr.Team, cr.Member, cr
	if team != "" && (cr.Team != team || cr.Member != member) {
		u.Problem, u.Fix = fmt.Sprintf("the handlers act as %s/%s with the credential of %s/%s (%s): the bus refuses every request", team, member, cr.Team, cr.Member, u.Path), fix
	}
}

// fixCommand is the command that rewrites the handlers of a location of
// scope on a credential: the identity they act as (have), else team and
// member (of the credential found), else the one given or of
// TEAMBUS_TEAM/TEAMBUS_MEMBER, else placeholders; for a scope
// that does not bake it, followed by setting TEAMBUS_CREDS.
func (r *run) fixCommand(scope Scope, loc string, have Options, team, member string) string {
	if have.Team != "" {
		team, member = have.Team, have.Member
	}
	if team == "" {
		team, member = r.in.Team, r.in.Member
	}
	if team == "" {
		team, member = os.Getenv("TEAMBUS_TEAM"), os.Getenv("TEAMBUS_MEMBER")
	}
	if team == "" || member == "" {
		team, member = "<team>", "<member>"
	}
	args := []string{"teambus", "init", "claude", "--credential"}
	switch scope {
	case ScopeProject, ScopeUser:
		args = append(args, "--scope", string(scope))
	case ScopePlugin:
		args = append(args, "--scope", "plugin", "--out", loc)
	case ScopeSettings:
		args = append(args, "--settings", loc)
	}
	if member == teambus.Lead {
		args = append(args, "--lead", "--team", team)
	} else {
		args = append(args, "--team", team, "--member", member)
	}
	if have.Bus != "" {
		if strings.Contains(have.Bus, "://") {
			args = append(args, "--server", have.Bus)
		} else {
			args = append(args, "--dir", have.Bus)
		}
	}
	words := shellQuote(args)
	for i, a := range args {
		if a == "<team>" || a == "<member>" {
			words[i] = a
		}
	}
	cmd := strings.Join(words, " ")
	if have.Team == "" || scope == ScopePlugin || scope == ScopeProject || scope == ScopeUser {
		path := "<file>"
		if r.in.CredsDir != "" && team != "<team>" {
			path = shellQuote([]string{CredsPath(r.in.CredsDir, team, member)})[0]
		}
		cmd += " (run by the operator), then start claude with TEAMBUS_CREDS=" + path
	}
	return "`" + cmd + "`"
}

// tokenInEnv is the problem of a TEAMBUS_TOKEN set in the environment
// Check runs in: a claude started from it passes the token to the session
// and everything the session runs, whatever its hooks use. A local node's
// operator never needs it (its commands read the node's directory), so it
// is refused there; for an external bus (--server, TEAMBUS_SERVER) it may
// be how this very command authenticates, so there it is a warning.
func (r *run) tokenInEnv() (problem string) {
	if os.Getenv("TEAMBUS_TOKEN") == "" {
		return ""
	}
	msg := "TEAMBUS_TOKEN is set in this environment: a claude started from it passes the node token to the session and every process the session runs"
	if r.given("server") || !r.in.Strict {
		r.warn("%s; set it for operator commands only (`TEAMBUS_TOKEN=… teambus …`), never in the terminal claude starts from", msg)
		return ""
	}
	return msg + "; fix: `unset TEAMBUS_TOKEN` (the operator's commands read the local node's token from its directory)"
}

// reuseByConnecting reuses the credential file of cred when the node
// accepts a connection with it: an install run by a member of a shared bus
// (the operator handed the file out) has no token to read the node's
// record with. opErr is why the operator's connection failed.
func (r *run) reuseByConnecting(cred *Credential, opErr error) error {
	err := r.in.ConnectCreds(r.ctx, cred.Path)
	switch {
	case errors.Is(err, teambus.ErrInvalid):
		return teambus.Invalidf("init claude: the node refuses the credential %s (revoked, or issued again since): ask the operator for a new one (`teambus team creds %s --member %s --out FILE`); nothing was written", cred.Path, cred.Team, cred.Member)
	case err != nil:
		return fmt.Errorf("init claude: neither the operator's connection (%v) nor one with the credential %s reaches the bus: %w; nothing was written", opErr, cred.Path, err)
	}
	cred.Action, cred.Reason = r.dry("reused"), "checked by connecting with it: the node token is not at hand"
	return nil
}
