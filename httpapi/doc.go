// Package httpapi serves Baton's REST API (docs/api.md): its
// envelopes and headers, JWT authentication with scopes, tenant isolation,
// request idempotency by message_id, the error envelope, and the OpenAPI
// document of the contract. Handlers are thin: they decode, call engine, and
// render.
//
// httpapi imports engine and db; it never imports jobs.
package httpapi
