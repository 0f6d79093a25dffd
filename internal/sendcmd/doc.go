// Package sendcmd is `teambus send` of one message, as both builds run it:
// the command and its flags, the request its flags and argument make (the
// body, from stdin with -, and its checks; the type, data and id), and
// sending it through a team service client with the lines and exit codes
// of the outcome. It links no NATS client, so the lean agent build
// (cmd/teambus-agent) runs the very same code as the full build
// (cmd/teambus); only how the client is reached differs.
package sendcmd
