package logtrim

import (
	"fmt"
	"log/slog"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxBytes is the longest string value a log line carries whole: ids and
// names are cut past it.
const MaxBytes = 200

// MaxErrorBytes is the longest error value, or message, a log line carries
// whole. Within it, each word (a run of non-space bytes: an id, a URL)
// longer than MaxBytes is cut as a string value is.
const MaxErrorBytes = 2000

// String returns s when it is at most max bytes, else its first max bytes
// (cut at a rune boundary) and a marker naming how many bytes were left
// out.
func String(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…[%d bytes cut]", s[:cut], len(s)-cut)
}

// Text cuts each word of s (a run of bytes other than spaces) longer than
// MaxBytes, then s itself past MaxErrorBytes: a sentence that quotes a long
// id keeps its other words.
func Text(s string) string {
	if len(s) <= MaxBytes {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		i := strings.IndexFunc(s, unicode.IsSpace)
		if i < 0 {
			i = len(s)
		}
		b.WriteString(String(s[:i], MaxBytes))
		s = s[i:]
		j := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsSpace(r) })
		if j < 0 {
			j = len(s)
		}
		b.WriteString(s[:j])
		s = s[j:]
	}
	return String(b.String(), MaxErrorBytes)
}

// ReplaceAttr is a slog.HandlerOptions.ReplaceAttr that cuts string values
// to MaxBytes, and error values and the message with Text. A panic's
// "stack" is kept whole.
func ReplaceAttr(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		s := a.Value.String()
		if len(s) <= MaxBytes {
			return a
		}
		switch a.Key {
		case "stack":
		case slog.MessageKey, "error":
			a.Value = slog.StringValue(Text(s))
		default:
			a.Value = slog.StringValue(String(s, MaxBytes))
		}
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok {
			if s := err.Error(); len(s) > MaxBytes {
				a.Value = slog.StringValue(Text(s))
			}
		}
	}
	return a
}
