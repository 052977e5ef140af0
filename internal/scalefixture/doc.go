// Package scalefixture loads a month of Baton's traffic into a migrated
// database: a million executions with ten million events, their threads and
// messages, definitions, lanes, inbound events, idempotency keys and River
// jobs, each table filled by one INSERT … SELECT generate_series. It is the
// data on which db's explain test checks the queries' plans and the
// console's benchmark times its pages.
//
// It owns the fixture's shape and the ids of the rows it names; it does
// not own the schema, which comes from db's migrations. It imports nothing
// of Baton's. Only _test.go files may import it.
package scalefixture
