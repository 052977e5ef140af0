// Command baton runs Baton: conversational agent executions, durable on
// PostgreSQL.
//
//	baton serve     API and workers
//	baton migrate   apply River's and Baton's migrations
//	baton dev       a private PostgreSQL (unless DATABASE_URL is set), migrated, with an example workflow, served without auth
//	baton token     mint an API token
//	baton demo      a recruiting story, end to end, on a scratch database
//	baton bench     measure Baton against bare River and the commit rate
//	baton monitor   the monitoring views as tables (--watch, --json)
//
// The command wires the packages together: config, engine, jobs, httpapi,
// live and metrics; nothing imports it.
package main
