// Package ui serves `teambus ui`: a live, read-only web view of teams.
//
// A Server is an http.Handler with a small JSON API and one page (HTML, JS
// and CSS embedded with embed; no build step, no CDN, works offline):
//
//	GET  /                                  the page (html/template)
//	GET  /app.js, /app.css, /favicon.svg    its assets
//	GET  /api/teams                         every team with status and progress
//	GET  /api/teams/{team}                  the team: view, task depths, policy
//	GET  /api/teams/{team}/mail             mail, filtered by from, to, type, text
//	GET  /api/teams/{team}/events           the event log tail
//	GET  /api/teams/{team}/live             Server-Sent Events: state, mail, event
//	POST /api/teams/{team}/tasks/{id}/release, .../pause, /members/{id}/probe
//	                                        operator actions (AllowActions only)
//
// Live updates come from NATS, not from polling: one feed per watched team,
// shared by every browser that shows it, holds a KV watch of the team's
// state bucket and of its heartbeat bucket (an expiring heartbeat is a purge
// the watch sees), and two ordered consumers that follow the mailbox and the
// event log. A change marks the view dirty; the feed rebuilds it at most
// every RebuildEvery and pushes it only when it differs. The feed keeps the
// last MailBacklog messages and EventBacklog events, so a browser that
// connects (or reconnects) gets a consistent start and then every change.
// Memory is bounded: the backlogs are rings, each browser has a queue of
// ClientBuffer frames, and a browser that does not keep up is dropped (its
// EventSource reconnects and starts over). A feed stops, and its watches
// and consumers with it, when its last browser leaves.
//
// Security: every request needs the access token, given once in the URL
// (?token=) and then kept in an HttpOnly, SameSite=Strict cookie; without
// it the answer is 401 and no team data. Team text is data: the page renders
// it with textContent only, and a Content-Security-Policy forbids inline
// script. The view is read-only unless AllowActions; each action is a POST
// that must carry the page's CSRF token (X-CSRF-Token) from the same origin,
// and each is logged in the team's event log as a ui.action event.
package ui
