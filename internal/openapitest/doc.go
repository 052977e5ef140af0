// Package openapitest checks HTTP requests and responses against an OpenAPI 3
// document in tests, so that handler tests prove the server keeps the contract
// it publishes (httpapi/openapi.yaml, docs/api.md).
//
// It is built on github.com/getkin/kin-openapi: the document is loaded and
// validated once per distinct document, routes are found with kin-openapi's
// gorilla/mux router, and responses are checked with
// openapi3filter.ValidateResponse, including their status code (a status the
// operation does not document fails), documented headers and body.
// Authentication is not checked: the validator looks at shapes, not tokens.
//
// The document is held to strict OpenAPI 3.0: kin-openapi's own validation
// runs with its strict options, a `nullable` without a `type` beside it is
// an error, and every JSON response body (and every component's example) is
// also checked against the schema as OpenAPI 3.0.3 defines it, translated
// to JSON Schema 2020-12 and validated with
// github.com/santhosh-tekuri/jsonschema. There `nullable: true` only adds
// null to the `type` beside it and never overrides an `allOf`, `oneOf` or
// `$ref`, where kin-openapi accepts null wherever `nullable: true` appears.
//
// It is a test helper: only _test.go files import it. It must not import
// httpapi, engine or anything else of Baton, so that any package's tests can
// use it without import cycles; its own tests read the document from disk.
package openapitest
