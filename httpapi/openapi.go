package httpapi

import _ "embed"

// OpenAPIDocument is the OpenAPI 3.0.3 document of the whole REST + WebSocket
// contract (docs/api.md), served at GET /api/v1/openapi.yaml. Paths in it are full
// paths from the root (/api/v1/…, /healthz, /readyz, /metrics) under a single
// server "/". Tests check real responses against it with
// internal/openapitest.
//
//go:embed openapi.yaml
var OpenAPIDocument []byte
