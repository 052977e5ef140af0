// Package live streams execution events to WebSocket clients of any Baton
// process: one Hub per process polls the execution_event sequence, reads
// the new rows once they are final, and fans them out to its subscribers.
//
// live imports engine and db/dbsqlc and never imports httpapi or jobs.
package live
