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
// docs/console.md describes the pages and the sign-in.
package console
