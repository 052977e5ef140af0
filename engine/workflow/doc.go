// Package workflow is Baton's workflow language: definitions and their
// validation, decision conditions (CEL), templates, durations, and the
// Limits that bound what a tenant may write and what a run of it may cost.
//
// It is pure: it touches no database, no network and no clock but for the
// deadline of a condition's evaluation. Everything in it takes tenant input
// as hostile: validation runs in time linear in a definition's size, a
// condition's worst-case cost is estimated when it is stored and again on
// the variables it runs against (a regular expression by what it compiles
// to, checked again before each match), and rendering stops at its byte
// budget.
//
// workflow imports nothing of Baton's; engine imports it.
package workflow
