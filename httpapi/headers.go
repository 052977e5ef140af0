package httpapi

import "net/http"

// NoSniff wraps h so that every answer it gives — API envelopes, errors,
// the OpenAPI document, metrics, the console and River UI when h serves
// them — carries X-Content-Type-Options: nosniff: a browser takes each
// answer for the Content-Type it declares and never guesses another (a
// JSON answer that holds a tenant's text is never run as a script or a
// page). Server.Handler is wrapped with it; baton serve wraps its whole
// handler, the console included.
func NoSniff(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}
