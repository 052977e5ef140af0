// Package openapitest checks HTTP requests and responses against an OpenAPI 3
// document in tests, so that handler tests prove the server keeps the contract
// it publishes (httpapi/openapi.yaml, API.md).
//
// It is built on github.com/getkin/kin-openapi: the document is loaded and
// validated once per distinct document, routes are found with kin-openapi's
// gorilla/mux router, and responses are checked with
// openapi3filter.ValidateResponse, including their status code (a status the
// operation does not document fails), documented headers and body.
// Authentication is not checked: the validator looks at shapes, not tokens.
//
// It is a test helper: only _test.go files import it. It must not import
// httpapi, engine or anything else of Baton, so that any package's tests can
// use it without import cycles; its own tests read the document from disk.
package openapitest
