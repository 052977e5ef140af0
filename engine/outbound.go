package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ErrOutboundRefused is wrapped by the errors of a connection the outbound
// client would not make: a host or port outside its AllowList.
var ErrOutboundRefused = errors.New("outbound connection refused")

// AllowList is where outbound calls (callbacks, webhook channels) may go:
// callbacks.allowHosts, parsed. An entry is a host with an optional port:
//
//   - "api.example.com" allows that host on ports 80 and 443, whatever the
//     scheme;
//   - "api.example.com:8443" allows that host on port 8443 only;
//   - "*.example.com" (and "*.example.com:8443") allows its subdomains,
//     not example.com itself;
//   - "*" (and "*:8443") allows every host.
//
// Host names compare case-insensitively; an IPv6 address is written in
// brackets when it has a port ("[::1]:8080"). A name is matched as written,
// before it is resolved: the list trusts the DNS of the names it allows.
// The zero AllowList allows nothing.
type AllowList struct {
	entries []allowEntry
}

// allowEntry is one AllowList entry.
type allowEntry struct {
	// host is a lower-case host name or address, "*", or "*.suffix".
	host string
	// port is the allowed port; 0 means 80 and 443.
	port int
}

// ParseAllowList parses allowHosts entries. It reports every malformed
// entry at once.
func ParseAllowList(entries []string) (AllowList, error) {
	var (
		l        AllowList
		problems []string
	)
	for _, raw := range entries {
		e, err := parseAllowEntry(raw)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		l.entries = append(l.entries, e)
	}
	if len(problems) > 0 {
		return AllowList{}, errors.New(strings.Join(problems, "; "))
	}
	return l, nil
}

// parseAllowEntry parses "host", "host:port", "[v6]:port", "*.suffix" or
// "*", with an optional port.
func parseAllowEntry(raw string) (allowEntry, error) {
	bad := func(why string) (allowEntry, error) {
		return allowEntry{}, fmt.Errorf("allowHosts entry %q %s", raw, why)
	}
	s := strings.ToLower(strings.TrimSpace(raw))
	if s == "" || strings.ContainsAny(s, "/?#@ \t") {
		return bad("must be a host name or host:port (no scheme, path or user)")
	}
	host, port := s, 0
	switch {
	case strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]"):
		host = s[1 : len(s)-1]
	case strings.Count(s, ":") == 1 || strings.HasPrefix(s, "["):
		h, p, err := net.SplitHostPort(s)
		if err != nil {
			return bad("must be a host name or host:port")
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return bad("has a port that is not a number from 1 to 65535")
		}
		host, port = h, n
	}
	switch {
	case host == "":
		return bad("has no host")
	case host == "*":
	case strings.HasPrefix(host, "*."):
		if len(host) == 2 || strings.Contains(host[2:], "*") {
			return bad("may only start with \"*.\" before a domain")
		}
	case strings.Contains(host, "*"):
		return bad("may only start with \"*.\" before a domain")
	case strings.Contains(host, ":") && net.ParseIP(host) == nil:
		return bad("must be a host name or host:port")
	}
	return allowEntry{host: host, port: port}, nil
}

// Empty reports whether the list allows nothing.
func (l AllowList) Empty() bool { return len(l.entries) == 0 }

// Allows reports whether host (a name or an address, without brackets) may
// be reached on port.
func (l AllowList) Allows(host string, port int) bool {
	host = strings.ToLower(host)
	for _, e := range l.entries {
		if !e.allowsPort(port) {
			continue
		}
		switch {
		case e.host == "*", e.host == host:
			return true
		case strings.HasPrefix(e.host, "*.") && strings.HasSuffix(host, e.host[1:]):
			return true
		}
	}
	return false
}

func (e allowEntry) allowsPort(port int) bool {
	if e.port == 0 {
		return port == 80 || port == 443
	}
	return port == e.port
}

// urlHostPort returns the host of an http(s) URL and the port it connects
// to: the URL's, else 80 for http and 443 for https.
func urlHostPort(u *url.URL) (string, int, error) {
	if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return "", 0, errors.New("must be an http(s) URL")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", 0, fmt.Errorf("has an invalid port %q", p)
		}
		return strings.ToLower(u.Hostname()), n, nil
	}
	if u.Scheme == "https" {
		return strings.ToLower(u.Hostname()), 443, nil
	}
	return strings.ToLower(u.Hostname()), 80, nil
}

// AllowListOfURL returns the AllowList that allows exactly raw's host and
// port (a webhook channel's URL).
func AllowListOfURL(raw string) (AllowList, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return AllowList{}, fmt.Errorf("%q is not a URL: %w", raw, err)
	}
	host, port, err := urlHostPort(u)
	if err != nil {
		return AllowList{}, fmt.Errorf("%q %v", raw, err)
	}
	return AllowList{entries: []allowEntry{{host: host, port: port}}}, nil
}

// NewOutboundClient returns the client of outbound calls: it follows no
// redirect (a 3xx is the answer, which callers treat as a failed delivery),
// uses no proxy, and dials only hosts and ports that allow allows. The check
// is made on every connection the transport opens, so a retry, a
// keep-alive reconnection or a Location header cannot reach anything the
// URL check at execute time would have refused. timeout bounds a whole
// request; 0 means none (the caller's context still applies).
func NewOutboundClient(allow AllowList, timeout time.Duration) *http.Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil // a proxy would be the dialled address, not the destination
	transport.DialContext = allowedDialer(allow).DialContext
	return &http.Client{Transport: transport, Timeout: timeout, CheckRedirect: refuseRedirects}
}

// refuseRedirects is http.Client.CheckRedirect for outbound calls: the
// redirect response is returned as is and nothing is sent to its Location.
func refuseRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// guardedDialer dials only what its AllowList allows.
type guardedDialer struct {
	allow  AllowList
	dialer *net.Dialer
}

// allowedDialer returns a dialer that checks the host and port of every
// address it is asked to dial, before it resolves anything.
func allowedDialer(allow AllowList) *guardedDialer {
	return &guardedDialer{allow: allow, dialer: &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}
}

// DialContext dials addr ("host:port") when the list allows it; else the
// error wraps ErrOutboundRefused and nothing is resolved or sent.
func (d *guardedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %v: %w", addr, err, ErrOutboundRefused)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || !d.allow.Allows(host, port) {
		return nil, fmt.Errorf("dialing %s: not in the allow list: %w", addr, ErrOutboundRefused)
	}
	return d.dialer.DialContext(ctx, network, addr)
}
