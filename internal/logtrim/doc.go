// Package logtrim keeps log lines short whatever tenants send: ReplaceAttr,
// installed in the process's slog handler, cuts every string value longer
// than 200 bytes (an id, a name) and, in a message or an error, every word
// longer than that (an id the sentence quotes), each with a marker saying
// how much was cut.
//
// It owns no policy on what may be logged — which attributes carry
// personal data is the caller's choice (engine.LogChannel logs message
// text and contacts only at debug) — only on how long a value may be. It
// imports nothing of Baton, so any package may use it.
package logtrim
