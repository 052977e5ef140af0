// Package config reads Baton's configuration file (BATON_CONFIG): JSON5, of
// which plain JSON is a part, in the shape docs/configuration.md gives.
// It is parsed with github.com/titanous/json5 (a maintained, tagged fork of
// the yosuke-furukawa decoder that follows the JSON5 spec: comments,
// unquoted keys, trailing commas, single quotes), then decoded strictly into
// typed structs with encoding/json so that unknown keys are errors.
//
// Precedence is flags, then environment variables, then this file; the
// command line applies the first two over a loaded Config.
//
// config imports engine (for the tool and queue types it fills in) and
// retention (for the sweep's configuration), and never imports httpapi,
// jobs or cmd.
package config
