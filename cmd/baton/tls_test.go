package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

// selfSignedCert writes a self-signed certificate for 127.0.0.1 and its key
// as PEM files, and returns their paths and a pool that trusts it.
func selfSignedCert(t *testing.T) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "baton test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}

// baton serve --tls-cert --tls-key serves HTTPS: the probes, the API and
// the WebSocket stream answer over TLS to a client that trusts the
// certificate, the console's session cookie is Secure, and a plain HTTP
// request to the port is refused.
func TestServeOverTLS(t *testing.T) {
	t.Parallel()
	certFile, keyFile, roots := selfSignedCert(t)
	env, _, _ := serveDatabase(t, `{}`)
	srv := startServer(t, env, "--tls-cert", certFile, "--tls-key", keyFile)
	base := "https://" + srv.addr
	client := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}

	resp, err := client.Get(base + "/healthz")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotNil(t, resp.TLS)
	require.GreaterOrEqual(t, resp.TLS.Version, uint16(tls.VersionTLS12))
	t.Logf("served over %s, TLS 0x%04x", resp.Proto, resp.TLS.Version)

	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/workflow/definitions", strings.NewReader(`{"payload": {"workflow_id": "tls", "version": "1",
	  "nodes": [{"id": "start", "type": "start", "next": "end"}, {"id": "end", "type": "end"}]}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tenant-ID", "tls")
	resp, err = client.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)

	ws, _, err := websocket.Dial(t.Context(), "wss://"+srv.addr+"/api/v1/ws?workflow_id=tls", &websocket.DialOptions{
		HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}},
		HTTPHeader: http.Header{"X-Tenant-Id": []string{"tls"}},
	})
	require.NoError(t, err, "the event stream over TLS")
	_ = ws.Close(websocket.StatusNormalClosure, "")

	// The console's sign-in (a tenant, on a server without auth): its
	// cookie is Secure over TLS.
	req, err = http.NewRequest(http.MethodPost, base+"/console/signin", strings.NewReader(url.Values{"tenant": {"tls"}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err = client.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Set-Cookie"), "; Secure")

	// Plain HTTP to the TLS port is refused, never served.
	resp, err = http.Get("http://" + srv.addr + "/healthz")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	// A client that does not trust the certificate does not get through.
	_, err = http.Get(base + "/healthz")
	require.Error(t, err)
}

// --tls-cert and --tls-key go together, as flags or as BATON_TLS_CERT and
// BATON_TLS_KEY, and name files that hold a matching certificate and key;
// anything else stops baton serve before it starts.
func TestServeTLSFlagsRefuseToStart(t *testing.T) {
	t.Parallel()
	certFile, keyFile, _ := selfSignedCert(t)
	_, otherKey, _ := selfSignedCert(t)
	serve := []string{"serve", "--insecure-no-auth", "--addr", "127.0.0.1:0"}
	db := "DATABASE_URL=" + emptyDatabase(t)
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"cert without key", nil, []string{"--tls-cert", certFile}, []string{"--tls-cert (BATON_TLS_CERT) needs --tls-key"}},
		{"key without cert in env", []string{"BATON_TLS_KEY=" + keyFile}, nil, []string{"--tls-key (BATON_TLS_KEY) needs --tls-cert"}},
		{"missing file", []string{"BATON_TLS_CERT=" + certFile}, []string{"--tls-key", keyFile + ".gone"}, []string{"--tls-cert " + certFile, "no such file"}},
		{"mismatched key", nil, []string{"--tls-cert", certFile, "--tls-key", otherKey}, []string{"private key does not match public key"}},
	} {
		out, err := runBounded(t, append([]string{db}, c.env...), append(serve, c.args...)...)
		requireRefused(t, out, err, append([]string{"baton serve: "}, c.want...)...)
	}
}
