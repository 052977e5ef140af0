// Package pgtest gives each test package its own migrated PostgreSQL
// databases.
//
// A package's TestMain calls Main, which picks a server (TEST_DATABASE_URL,
// else a server answering at 127.0.0.1:5432, else a private cluster started
// with pgcluster), creates one template database migrated with db.Migrate,
// runs the tests, and drops every database it created. Tests then call
// NewDatabase or NewPool for a fresh copy of the template of their own, so
// tests can run in parallel without seeing each other's rows.
//
// It owns the test databases' names and lives; it does not own the schema,
// which comes from db. It may import db and pgcluster but must not import
// any other Baton package (engine, jobs, httpapi, cmd), so that any of those
// can use it in their tests. Only _test.go files may import it.
package pgtest
