package openapitest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// strictBase is the URL under which the document's component schemas are
// registered, translated, as the $defs of one JSON Schema resource.
const strictBase = "https://openapitest.invalid/components.json"

// strictSchemas holds the document's schemas translated to JSON Schema
// 2020-12 with exactly the meaning OpenAPI 3.0.3 gives them, most of all to
// `nullable`: it adds null to the type named by a `type` beside it, and does
// nothing else. A `nullable` without `type` allows nothing more, and it does
// not override the constraints of an `allOf`, `oneOf`, `anyOf` or `$ref`
// next to it. This is how strict validators (and the JSON Schema a 3.1
// migration produces) read the document; kin-openapi is more lenient and
// accepts null wherever `nullable: true` appears. Every body is checked by
// both.
type strictSchemas struct {
	// bodies are the JSON response schemas, by the media type that holds
	// them.
	bodies map[*openapi3.MediaType]*jsonschema.Schema
	// components are the component schemas, by name.
	components map[string]*jsonschema.Schema
}

// compileStrict translates and compiles every component schema and every
// JSON response schema of doc, and checks each component's example against
// its strict schema.
func compileStrict(doc *openapi3.T) (*strictSchemas, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	defs := map[string]any{}
	for name, ref := range doc.Components.Schemas {
		translated, err := translate(ref)
		if err != nil {
			return nil, fmt.Errorf("components/schemas/%s: %w", name, err)
		}
		defs[name] = translated
	}
	if err := c.AddResource(strictBase, map[string]any{"$defs": defs}); err != nil {
		return nil, err
	}
	s := &strictSchemas{bodies: map[*openapi3.MediaType]*jsonschema.Schema{}, components: map[string]*jsonschema.Schema{}}
	var errs []error
	for _, name := range sortedKeys(doc.Components.Schemas) {
		sch, err := c.Compile(strictBase + "#/$defs/" + escapePointer(name))
		if err != nil {
			errs = append(errs, fmt.Errorf("components/schemas/%s: %w", name, err))
			continue
		}
		s.components[name] = sch
		if ex := doc.Components.Schemas[name].Value.Example; ex != nil {
			if err := validateStrict(sch, ex); err != nil {
				errs = append(errs, fmt.Errorf("components/schemas/%s: the example is not valid under strict OpenAPI 3.0 semantics: %w", name, err))
			}
		}
	}
	errs = append(errs, s.compileBodies(c, doc)...)
	return s, errors.Join(errs...)
}

// compileBodies compiles the JSON schema of every response of every
// operation.
func (s *strictSchemas) compileBodies(c *jsonschema.Compiler, doc *openapi3.T) []error {
	var errs []error
	for _, path := range doc.Paths.InMatchingOrder() {
		for method, op := range doc.Paths.Value(path).Operations() {
			for status, resp := range op.Responses.Map() {
				for mediaType, mt := range resp.Value.Content {
					if _, done := s.bodies[mt]; done || !isJSON(mediaType) || mt.Schema == nil {
						continue
					}
					where := fmt.Sprintf("%s %s %s %s", method, path, status, mediaType)
					sch, err := compileOne(c, mt.Schema, len(s.bodies))
					if err != nil {
						errs = append(errs, fmt.Errorf("%s: %w", where, err))
						continue
					}
					s.bodies[mt] = sch
				}
			}
		}
	}
	return errs
}

// compileOne registers one translated schema as a resource of its own and
// compiles it.
func compileOne(c *jsonschema.Compiler, ref *openapi3.SchemaRef, n int) (*jsonschema.Schema, error) {
	translated, err := translate(ref)
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("https://openapitest.invalid/body/%d.json", n)
	if err := c.AddResource(url, translated); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// body returns the strict schema of the response with this status and
// Content-Type, or nil when it has no JSON schema.
func (s *strictSchemas) body(op *openapi3.Operation, status int, contentType string) *jsonschema.Schema {
	resp := op.Responses.Status(status)
	if resp == nil {
		resp = op.Responses.Default()
	}
	if resp == nil || resp.Value == nil {
		return nil
	}
	mt := resp.Value.Content.Get(contentType)
	if mt == nil {
		return nil
	}
	return s.bodies[mt]
}

// validateBody checks a JSON body against sch.
func validateBody(sch *jsonschema.Schema, body []byte) error {
	value, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("the body is not JSON: %w", err)
	}
	return sch.Validate(value)
}

// validateStrict checks a value decoded by encoding/json or YAML against sch.
func validateStrict(sch *jsonschema.Schema, value any) error {
	raw, err := json.Marshal(value)
	if err != nil {
		return err
	}
	return validateBody(sch, raw)
}

// translate returns ref as JSON Schema 2020-12 with OpenAPI 3.0.3's meaning.
func translate(ref *openapi3.SchemaRef) (any, error) {
	raw, err := json.Marshal(ref)
	if err != nil {
		return nil, err
	}
	var node any
	if err := json.Unmarshal(raw, &node); err != nil {
		return nil, err
	}
	return translateNode(node), nil
}

// translateNode rewrites one Schema Object: `nullable: true` becomes a
// `type` array including "null" when, and only when, `type` is beside it;
// references to component schemas point into the shared resource, and
// whatever sits beside a $ref is dropped, as OpenAPI 3.0 ignores it. Values
// of non-schema keywords (enum, default, example, extensions) are kept as
// they are.
func translateNode(node any) any {
	m, ok := node.(map[string]any)
	if !ok {
		return node
	}
	if ref, isRef := m["$ref"]; isRef {
		// OpenAPI 3.0 ignores everything beside a $ref.
		return map[string]any{"$ref": translateRef(ref)}
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch k {
		case "nullable":
		case "properties":
			props, _ := v.(map[string]any)
			translated := make(map[string]any, len(props))
			for name, p := range props {
				translated[name] = translateNode(p)
			}
			out[k] = translated
		case "items", "not", "additionalProperties":
			out[k] = translateNode(v)
		case "allOf", "anyOf", "oneOf":
			list, _ := v.([]any)
			translated := make([]any, len(list))
			for i, item := range list {
				translated[i] = translateNode(item)
			}
			out[k] = translated
		default:
			out[k] = v
		}
	}
	if t, typed := m["type"].(string); typed && m["nullable"] == true {
		out["type"] = []any{t, "null"}
	}
	return out
}

func translateRef(v any) any {
	ref, _ := v.(string)
	if name, ok := strings.CutPrefix(ref, "#/components/schemas/"); ok {
		return strictBase + "#/$defs/" + escapePointer(name)
	}
	return v
}

// lintNullable reports every schema of doc that has `nullable: true` but no
// `type`: OpenAPI 3.0.3 gives such a `nullable` no effect, so the schema
// does not allow the null it was meant to.
func lintNullable(doc *openapi3.T) error {
	var errs []error
	seen := map[*openapi3.Schema]bool{}
	var walk func(where string, ref *openapi3.SchemaRef)
	walk = func(where string, ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		if s.Nullable && (s.Type == nil || len(*s.Type) == 0) {
			errs = append(errs, fmt.Errorf("%s: `nullable: true` without a `type` beside it allows no null in OpenAPI 3.0", where))
		}
		for _, name := range sortedKeys(s.Properties) {
			walk(where+"/properties/"+name, s.Properties[name])
		}
		walk(where+"/items", s.Items)
		walk(where+"/not", s.Not)
		walk(where+"/additionalProperties", s.AdditionalProperties.Schema)
		for kw, list := range map[string]openapi3.SchemaRefs{"allOf": s.AllOf, "anyOf": s.AnyOf, "oneOf": s.OneOf} {
			for i, item := range list {
				walk(fmt.Sprintf("%s/%s/%d", where, kw, i), item)
			}
		}
	}
	for _, name := range sortedKeys(doc.Components.Schemas) {
		walk("components/schemas/"+name, doc.Components.Schemas[name])
	}
	walkOperationSchemas(doc, walk)
	return errors.Join(errs...)
}

// walkOperationSchemas calls walk with every schema written inline in an
// operation: parameters, request bodies, response headers and bodies.
func walkOperationSchemas(doc *openapi3.T, walk func(string, *openapi3.SchemaRef)) {
	for _, path := range doc.Paths.InMatchingOrder() {
		item := doc.Paths.Value(path)
		for _, p := range item.Parameters {
			walk(path+" parameter "+p.Value.Name, p.Value.Schema)
		}
		for method, op := range item.Operations() {
			where := method + " " + path
			for _, p := range op.Parameters {
				walk(where+" parameter "+p.Value.Name, p.Value.Schema)
			}
			if op.RequestBody != nil {
				for mediaType, mt := range op.RequestBody.Value.Content {
					walk(where+" request "+mediaType, mt.Schema)
				}
			}
			for status, resp := range op.Responses.Map() {
				for name, h := range resp.Value.Headers {
					walk(where+" "+status+" header "+name, h.Value.Schema)
				}
				for mediaType, mt := range resp.Value.Content {
					walk(where+" "+status+" "+mediaType, mt.Schema)
				}
			}
		}
	}
}

func isJSON(mediaType string) bool {
	mt, _, err := mime.ParseMediaType(mediaType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
