// Package console is Baton's browser console, served at /console/ by
// baton serve and baton dev: executions, threads, lanes, the monitor and
// definitions of the signed-in tenant, live.
//
// The pages are rendered on the server with html/template, which escapes
// every tenant-written string for its context, and embedded in the binary;
// there is no front-end build. One small script (static/console.js) does
// the live parts: it listens to the tenant's event stream (GET /api/v1/ws)
// and re-reads the parts of the page marked data-live when an event
// arrives, counts down timeouts, and sends the actions to the REST API,
// which checks the session's scopes exactly as it checks a token's.
//
// Sessions are the API's (httpapi/session.go): stored in PostgreSQL and
// read on every request, so a sign-out ends one in every process. What a
// tenant stored is shown within budgets (jsonview.go, render.go): a JSON
// value is indented while it is read, collapsed below 32 levels and cut
// at 64 KiB, so no page costs more than an API answer of the same rows.
// docs/console.md describes the pages, the sign-in and the bounds.
package console
