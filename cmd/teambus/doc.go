// Command teambus is the command line of teambus: flags, environment
// variables, output formats and exit codes. It is the only package that
// imports urfave/cli or calls os.Exit; everything it does is a call into
// bus, kv, lead or teammate.
//
// # Layout
//
// main.go is ten lines: a signal context (SIGINT, SIGTERM) and
// os.Exit(run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)). app.go holds
// newApp, which lists every command explicitly (no init registration), and
// run. Each command lives in its own file with a constructor returning
// *cli.Command (busCommand in bus.go, versionCommand in version.go); add a
// command by writing its file and adding its constructor to the list in
// newApp. Tests run the app in-process (see runTest in app_test.go).
//
// What this command line adds to urfave/cli (flags after positionals, help,
// usage errors, the one-shot commands' flags, the error line and exit
// code) is package internal/cliapp's, and `send` of one message is package
// internal/sendcmd's: neither links a NATS client, so the lean agent build
// (cmd/teambus-agent, what an agent's shell runs as `teambus`) parses and
// sends with the very same code; cliv2.go, flags.go and mail.go call them.
//
// # Running, errors and exit codes
//
//	run(ctx, args, stdin, stdout, stderr) int
//	runApp(ctx, app, args) error   // reorder, help, app.RunContext
//	exit(ctx, err, stderr) int      // print one line, map to an exit code
//
// An action returns an error; run prints it as one line on stderr,
// "teambus: <message>", and exits with teambus.ExitCode(err): 0 ok, 1
// transient (an unclassified error counts as transient), 2 permanent, 3
// conflict. Return the domain's classified errors (teambus.Invalidf,
// NotFoundf, Statef, Conflictf, Fencedf, Unavailablef) or wrap them with %w.
// Never print an error yourself and never call os.Exit.
//
// Usage errors exit 2 with one line naming the command and its help, never
// the whole help text: urfave's flag errors (unknown flag, missing or bad
// value, bad environment variable) go through onUsageError; unknown
// commands and subcommands are refused by the group actions prepare
// installs. In an action use
//
//	usageError(c, format, args...) error  // ErrInvalid: "<cmd>: <msg> (see `teambus <cmd> --help`)"
//	exactArgs(c, n) error                 // n positional arguments, else usage error
//	minArgs(c, n) error                   // at least n
//
// or, for the common shapes, let the action's preamble check arguments and
// identity in that order before anything connects (action.go, service.go):
//
//	teamAction(n, fn(c, teamID))          // n arguments, then --team
//	actorAction(n, fn(c, team.Actor))     // n arguments, then --team --member --session
//	teamArgAction(fn(c, *session, teamID)) // one argument, a team id, then a session
//	teamArg(c) (string, error)            // one argument, a team id
//	withSession(c, fn(*session)) error    // open (--timeout), fn, close
//	teamMemberArgs(c) (teamID, member, error) // two arguments, a team id and a member id
//	withMember(c, a, fn(*session, *teamapi.Client)) error // the same with the actor's service client
//	                                      // from connectMember: through its sidecar's relay when
//	                                      // one answers (relaySession), else its own connection
//	connectAPI(ctx, conn, svc, a, probe, log) (teamapi.API, error) // the member API on a
//	                                      // connection: the team service, or (probe > 0, operator,
//	                                      // no service on the bus) the team state itself (mcp)
//	streamConn(c) (*bus.Conn, error)      // a connection for a stream or server: operatorOnly checked
//	logConn(c) (*slog.Logger, *bus.Conn, error) // newLogger, then streamConn (sidecars, mcp, ui)
//
// Set ArgsUsage on a command that takes arguments ("T", "SEQ..."): it is
// shown in help and in these errors. Do not mark flags Required (urfave
// would print the whole help): check in the action with the helpers below.
//
// # Flags may follow positionals
//
// urfave/cli v2 stops parsing flags at the first positional argument.
// Before the app runs, parseInvocation walks the command tree by the names
// in args, splits the rest into flags (with their values: a flag that is not
// a bool consumes the next token, so `--priority -1` works; `--x=v` is one
// token) and positionals ("-1" is a positional, everything after "--" is),
// and invocation.args rebuilds the line as
//
//	teambus CMD SUB [flags] -- [positionals]
//
// so `teambus ack 12 13 --member tm2` and `teambus team create alpha
// --member tm1` work, and so does `teambus --dir X bus status`. Every flag
// goes to the deepest command on the path that defines it. A flag name must
// mean the same kind (bool or value) everywhere in the tree; a test checks
// it. Commands with SkipFlagParsing get their arguments untouched.
//
// -h/--help anywhere, and `teambus help CMD SUB`, print the help of that
// command on stdout and exit 0. Each command has its own help flag: urfave's
// shared one is a package variable that it writes to, which races when two
// apps run in one process (tests do).
//
// # Flags
//
// Flags are built by functions and never shared between apps: urfave writes
// into a flag while parsing. Every flag has EnvVars (TEAMBUS_...) so that
// --help shows them; help is the only exception.
//
//	flags(groups ...[]cli.Flag) []cli.Flag   // concatenate groups for Command.Flags
//	connFlags() []cli.Flag    // --dir --server --creds --token --user --password
//	                          // --tls-ca --tls-cert --tls-key --timeout: on every
//	                          // leaf command that talks to the bus
//	dirFlag(), timeoutFlag() cli.Flag
//	memberFlags() []cli.Flag  // --team --member --session
//	teamFlag(), memberFlag(), sessionFlag() cli.Flag
//	jsonFlag() cli.Flag       // --json
//	logFlags() []cli.Flag     // --log-level --log-format, foreground processes
//	policyFlags() []cli.Flag  // one string flag per teambus.PolicyDurations entry,
//	                          // --crash-limit, --max-attempts (TEAMBUS_POLICY_*)
//
// Reading them:
//
//	connect(c) (*bus.Conn, error)               // bus.Connect with connConfig; caller closes
//	connConfig(c) (bus.ConnectConfig, error)    // for sidecars that connect themselves
//	stateDir(c) (string, error)                 // --dir, absolute
//	timeout(c) (time.Duration, error)           // --timeout, positive
//	withTimeout(c) (context.Context, context.CancelFunc, error) // one-shot commands
//	teamID(c), memberID(c) (string, error)      // required, checked against the id rule
//	sessionID(c) (string, error)                // required, teambus.ValidateSession
//	policyFromFlags(c) (teambus.Policy, error)  // DefaultPolicy + set flags, validated
//	applyPolicyFlags(c, *teambus.Policy) error  // set flags onto a stored policy, validated
//	parseSize(name, s string) (int64, error)    // "10GiB", "512MiB", "1.5G", "1000000"
//	splitList([]string) []string                // comma lists of a repeatable flag
//	newLogger(c) (*slog.Logger, error)          // from logFlags, to stderr
//
// Repeatable flags (cli.StringSliceFlag) keep each value whole: the app
// disables urfave's comma splitting, so `--done "a, b"` is one item.
//
// # Output
//
//	printJSON(w, v) error           // one indented JSON document (--json of show/status)
//	newJSONLines(w).Write(v) error  // JSON Lines, one compact object per line (inbox, replay)
//	formatTime(t) string            // text: RFC 3339 UTC to the second, "-" when zero
//	jsonTime(t) *string             // JSON: RFC 3339 UTC (nanoseconds), nil (null) when zero
//	jsonTimePtr(*time.Time) *string
//	formatDuration(d) string        // 10m, 1h30m, 30s
//	formatSize(n int64) string      // 512B, 1.5KiB, 10GiB
//
// Write to c.App.Writer (stdout) and read from c.App.Reader (stdin), never
// os.Stdout: tests capture them.
package main
