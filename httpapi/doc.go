// Package httpapi serves Baton's REST API (docs/api.md): its
// envelopes and headers, JWT authentication with scopes, tenant isolation,
// console sessions, operator tokens (operator.go: they open River UI and
// no tenant's API), request idempotency by message_id, the error envelope,
// and the OpenAPI document of the contract. Handlers are thin: they decode, call engine, and
// render.
//
// httpapi imports engine and db; it never imports jobs.
package httpapi
