// Package db owns Baton's schema: the goose migrations embedded from
// db/migrations, the SQL in db/queries, and Migrate, which applies River's
// schema (through rivermigrate) and Baton's under one advisory lock.
//
// The generated query code lives in db/dbsqlc and is never edited by hand.
// This package imports nothing of Baton's.
package db
