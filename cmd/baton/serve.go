package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/batonrun/baton/config"
	"github.com/batonrun/baton/console"
	"github.com/batonrun/baton/db"
	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/httpapi"
	"github.com/batonrun/baton/internal/logtrim"
	"github.com/batonrun/baton/jobs"
	"github.com/batonrun/baton/live"
	"github.com/batonrun/baton/metrics"
	"github.com/batonrun/baton/retention"
)

// defaultPoolSize is the pool size when DATABASE_URL sets no pool_max_conns.
const defaultPoolSize = 40

// serveConfig is what serve and dev share.
type serveConfig struct {
	addr        string
	databaseURL string
	jwtSecret   string
	insecure    bool
	migrate     bool
	logFormat   choiceFlag
	logLevel    choiceFlag
	rescueAfter time.Duration
	// configPath is the config file (BATON_CONFIG); empty means defaults.
	configPath string
	// lockTimeout overrides the file's locks.timeout when set (flag, else
	// BATON_LOCK_TIMEOUT).
	lockTimeout positiveDuration
	// listener, when set, is the address already bound to serve on (dev
	// binds it before it starts anything); serve binds addr otherwise.
	listener net.Listener
	// ready is called with the listening address once the server accepts
	// connections.
	ready func(addr string)
	// prepare runs once the engine exists, before serving (dev stores its
	// example there).
	prepare func(ctx context.Context, eng *engine.Engine) error
	// devTenant, when set, is the tenant the console signs a browser in
	// as, with every scope (baton dev).
	devTenant string
	// operatorSecret signs operator tokens (BATON_OPERATOR_SECRET), which
	// open River UI; empty serves no River UI on a server with
	// authentication.
	operatorSecret string
	// tlsConfig, when set, serves HTTPS with its certificate (serve's
	// --tls-cert and --tls-key); nil serves plain HTTP.
	tlsConfig *tls.Config
	// weakSecrets lets callbacks and webhooks run with a callback or
	// webhook secret under engine.MinSecretBytes, with a warning (baton
	// dev); serve refuses to start.
	weakSecrets bool
}

// loadConfig reads the config file, or the defaults when there is none, and
// lays the flags and environment over it (flags > env > file).
func (c *serveConfig) loadConfig() (*config.Config, error) {
	file := config.Default()
	if c.configPath != "" {
		var err error
		if file, err = config.Load(c.configPath); err != nil {
			return nil, err
		}
	}
	if c.lockTimeout.d > 0 {
		file.Locks.Timeout = config.Duration(c.lockTimeout.d)
	}
	return file, nil
}

func envOr(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}

// flags declares the flags serve and dev share; logFormat is the default
// log format.
func (c *serveConfig) flags(fs *flag.FlagSet, logFormat string) {
	c.logFormat = *newChoice(logFormat, "json", "text")
	c.logLevel = *newChoice("info", "debug", "info", "warn", "error")
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "listen address (BATON_ADDR)")
	fs.StringVar(&c.databaseURL, "database-url", "", "PostgreSQL connection string (DATABASE_URL)")
	fs.Var(&c.logFormat, "log-format", "log `format`: json or text (BATON_LOG_FORMAT)")
	fs.Var(&c.logLevel, "log-level", "log `level`: debug, info, warn, error (BATON_LOG_LEVEL)")
	fs.StringVar(&c.configPath, "config", "", "config file, JSON5 (BATON_CONFIG)")
	fs.Var(&c.lockTimeout, "lock-timeout", "stale-lock age, a `duration` such as 10m; overrides the config file's locks.timeout (BATON_LOCK_TIMEOUT)")
	fs.DurationVar(&c.rescueAfter, "rescue-after", jobs.DefaultRescueStuckJobsAfter, "how long a running step of a live but stuck process may go before River hands it to another worker (must be over 60s); a dead process's steps are handed back within seconds by the process sweep")
}

// serveEnv are the environment variables behind the flags of serve and dev.
var serveEnv = []envFlag{
	{"addr", "BATON_ADDR"}, {"database-url", "DATABASE_URL"}, {"log-format", "BATON_LOG_FORMAT"},
	{"log-level", "BATON_LOG_LEVEL"}, {"config", "BATON_CONFIG"}, {"lock-timeout", "BATON_LOCK_TIMEOUT"},
}

// parse parses serve's or dev's flags and the environment behind them
// (serveEnv, and extra for the command's own flags), and checks what the
// flags' own parsers cannot.
func (c *serveConfig) parse(fs *flag.FlagSet, args []string, extra ...envFlag) error {
	if err := parseFlags(fs, args, append(slices.Clone(serveEnv), extra...)...); err != nil {
		return err
	}
	if c.rescueAfter <= jobs.StepTimeout {
		return fmt.Errorf("--rescue-after %s: must be over the step timeout (%s)", c.rescueAfter, jobs.StepTimeout)
	}
	return nil
}

func cmdServe(ctx context.Context, args []string) error {
	var c serveConfig
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	c.flags(fs, "json")
	fs.BoolVar(&c.insecure, "insecure-no-auth", false, "serve without authentication (X-Tenant-ID alone names the tenant); never in production")
	fs.BoolVar(&c.migrate, "migrate", false, "apply migrations before serving")
	var certFile, keyFile string
	fs.StringVar(&certFile, "tls-cert", "", "serve HTTPS with this PEM certificate `file` (chain included); needs --tls-key (BATON_TLS_CERT)")
	fs.StringVar(&keyFile, "tls-key", "", "the PEM private key `file` of --tls-cert (BATON_TLS_KEY)")
	if err := c.parse(fs, args, envFlag{"tls-cert", "BATON_TLS_CERT"}, envFlag{"tls-key", "BATON_TLS_KEY"}); err != nil {
		return err
	}
	var err error
	if c.tlsConfig, err = loadTLS(certFile, keyFile); err != nil {
		return err
	}
	c.jwtSecret = os.Getenv("BATON_JWT_SECRET")
	if c.jwtSecret == "" && !c.insecure {
		return errors.New("BATON_JWT_SECRET is not set: set it, or pass --insecure-no-auth to serve without authentication")
	}
	if !c.insecure && len(c.jwtSecret) < httpapi.MinJWTSecretBytes {
		return fmt.Errorf("BATON_JWT_SECRET is %d bytes: it must be at least %d, or anyone holding one token can guess it (openssl rand -hex 32 makes one)",
			len(c.jwtSecret), httpapi.MinJWTSecretBytes)
	}
	c.operatorSecret = os.Getenv("BATON_OPERATOR_SECRET")
	if err := c.checkOperatorSecret(); err != nil {
		return err
	}
	if c.databaseURL == "" {
		return errors.New("DATABASE_URL is not set (baton dev starts a private PostgreSQL for local use)")
	}
	return serve(ctx, c)
}

// checkOperatorSecret checks BATON_OPERATOR_SECRET on a server with
// authentication: unset (River UI is not served), or at least 32 bytes and
// not BATON_JWT_SECRET.
func (c *serveConfig) checkOperatorSecret() error {
	if c.insecure || c.operatorSecret == "" {
		return nil
	}
	if len(c.operatorSecret) < httpapi.MinJWTSecretBytes {
		return fmt.Errorf("BATON_OPERATOR_SECRET is %d bytes: it must be at least %d (openssl rand -hex 32 makes one)",
			len(c.operatorSecret), httpapi.MinJWTSecretBytes)
	}
	if c.operatorSecret == c.jwtSecret {
		return errors.New("BATON_OPERATOR_SECRET must differ from BATON_JWT_SECRET: whoever signs tenant tokens must not be able to sign operator tokens")
	}
	return nil
}

// loadTLS reads serve's certificate and key: nil when neither is given, an
// error naming the flag when only one is, or when they cannot be read or do
// not match. The server then speaks TLS 1.2 or later, HTTP/2 and HTTP/1.1.
func loadTLS(certFile, keyFile string) (*tls.Config, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil
	case certFile == "":
		return nil, errors.New("--tls-key (BATON_TLS_KEY) needs --tls-cert (BATON_TLS_CERT)")
	case keyFile == "":
		return nil, errors.New("--tls-cert (BATON_TLS_CERT) needs --tls-key (BATON_TLS_KEY)")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s and --tls-key %s: %w", certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// newLogger returns the logger of a format and level checked by their
// flags (choiceFlag): an unknown level would be info.
func newLogger(format, level string) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		lv = slog.LevelInfo
	}
	// Long values (ids, names tenants send) are cut, so no line repeats
	// one whole.
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: logtrim.ReplaceAttr}
	if format == "text" {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, opts))
}

// serve runs the API and the workers until ctx ends. It binds its address
// before anything else, so that a busy port stops it before it starts any
// worker.
func serve(ctx context.Context, c serveConfig) error {
	logger := newLogger(c.logFormat.value, c.logLevel.value)
	ln := c.listener
	if ln == nil {
		var err error
		if ln, err = listen(c.addr, "BATON_ADDR or --addr picks another address"); err != nil {
			return err
		}
	}
	defer ln.Close()
	file, err := c.loadConfig()
	if err != nil {
		return err
	}
	var secret []byte
	if len(file.Callbacks.AllowHosts) > 0 {
		if secret, err = outboundSecret("BATON_CALLBACK_SECRET", "callbacks.allowHosts enables callbacks", c.weakSecrets, logger); err != nil {
			return err
		}
	}
	channels, err := outboundChannels(file, c.weakSecrets, logger)
	if err != nil {
		return err
	}
	pool, err := servePool(ctx, c.databaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if c.migrate {
		if err := db.Migrate(ctx, pool, logger); err != nil {
			return err
		}
	}
	if err := checkMigrated(ctx, pool); err != nil {
		return err
	}
	tools := engine.NewTools()
	if err := file.RegisterTools(tools); err != nil {
		return err
	}
	reg := metrics.New(metrics.Config{Pool: pool, Logger: logger})
	reg.WatchBreakers(tools)
	eng, err := engine.New(engine.Config{
		Pool: pool, Logger: logger, Tools: tools, Metrics: reg, Channels: channels,
		CallbackAllowHosts: file.Callbacks.AllowHosts, CallbackSecret: secret,
		LockTimeout: time.Duration(file.Locks.Timeout),
		LaneLimits:  file.LaneLimits(), LanePerTenant: file.LanePerTenant(),
		Queue: engine.QueueConfig{Mode: file.Messages.Queue.Mode, DebounceMS: file.Messages.Queue.DebounceMS,
			Cap: file.Messages.Queue.Cap, Drop: file.Messages.Queue.Drop, ByChannel: file.Messages.Queue.ByChannel},
		Limits: file.Limits,
	})
	if err != nil {
		return err
	}
	hub, err := live.NewHub(live.Config{Pool: pool, Logger: logger})
	if err != nil {
		return err
	}
	if c.prepare != nil {
		if err := c.prepare(ctx, eng); err != nil {
			return err
		}
	}
	sweep := file.RetentionConfig()
	sweep.Logger, sweep.Metrics = logger, reg
	// The fence stops this process's jobs while its presence is unproven,
	// before the process sweep can hand them to others (jobs/fence.go).
	fence := jobs.NewFence()
	client, err := jobs.NewClient(pool, jobs.Config{Engine: eng, Logger: logger, RescueStuckJobsAfter: c.rescueAfter,
		LockReapInterval: time.Duration(file.Locks.ReapInterval), Retention: retention.New(pool, sweep),
		CompletedJobRetention: time.Duration(file.Retention.Jobs), Fence: fence})
	if err != nil {
		return err
	}
	// Announced before River works a job, so that every job this process
	// runs is handed back within seconds if it dies (jobs/presence.go).
	presence, err := jobs.StartPresence(ctx, pool, jobs.PresenceConfig{Engine: eng, ClientID: client.ID(), Fence: fence, Logger: logger})
	if err != nil {
		return err
	}
	defer presence.Stop(context.WithoutCancel(ctx)) // after River's client has stopped
	proxies, err := file.HTTP.TrustedProxyPrefixes()
	if err != nil {
		return err
	}
	api, err := httpapi.New(httpapi.Config{
		Engine: eng, Pool: pool, JWTSecret: []byte(c.jwtSecret), OperatorSecret: []byte(c.operatorSecret), Insecure: c.insecure, Logger: logger,
		Hub: hub, Metrics: reg.Handler(), MetricsToken: os.Getenv("BATON_METRICS_TOKEN"),
		Token: httpapi.TokenPolicy{MaxLifetime: time.Duration(file.Auth.MaxTokenLifetime),
			Audience: envOr("BATON_JWT_AUDIENCE", file.Auth.Audience), Issuer: envOr("BATON_JWT_ISSUER", file.Auth.Issuer)},
		RateLimits: httpapi.RateLimits{Write: httpapi.RateLimit(file.RateLimits.Write), Read: httpapi.RateLimit(file.RateLimits.Read),
			Stream: httpapi.RateLimit(file.RateLimits.Stream), MaxBuckets: file.RateLimits.MaxBuckets},
		TrustedProxies: proxies,
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("starting River: %w", err)
	}
	defer eng.DeliverPromptly(engine.DefaultPromptSlots)() // after River's client has stopped
	// Timers due soon are made available here, not by River's leader only.
	defer jobs.StartTimers(ctx, pool, jobs.TimersConfig{Logger: logger}).Stop()
	hub.Start()
	defer hub.Stop() // after Shutdown: ends the WebSocket streams it left open
	jobsUI, err := c.jobsUI(ctx, client, logger)
	if err != nil {
		return err
	}
	con, err := console.New(console.Config{Engine: eng, Pool: pool, API: api, DevTenant: c.devTenant, Jobs: jobsUI, Logger: logger})
	if err != nil {
		return err
	}
	srv := newHTTPServer(withConsole(api.Handler(), con.Handler()), file.HTTP)
	errc := make(chan error, 1)
	if c.tlsConfig != nil {
		srv.TLSConfig = c.tlsConfig
		go func() { errc <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { errc <- srv.Serve(ln) }()
	}
	logger.Info("baton serving", "addr", ln.Addr().String(), "auth", !c.insecure, "tls", c.tlsConfig != nil)
	if c.ready != nil {
		c.ready(ln.Addr().String())
	}

	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving: %w", err)
		}
	}
	logger.Info("baton stopping")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	if err := client.Stop(shutdownCtx); err != nil {
		_ = client.StopAndCancel(shutdownCtx)
	}
	return nil
}

// jobsUI is River UI for the console, served to operators: on a server
// with authentication only when BATON_OPERATOR_SECRET is set, since only
// an operator token opens it; nil otherwise.
func (c *serveConfig) jobsUI(ctx context.Context, client *river.Client[pgx.Tx], logger *slog.Logger) (http.Handler, error) {
	if !c.insecure && c.operatorSecret == "" {
		logger.Info("River UI is not served: BATON_OPERATOR_SECRET is not set (operators sign in to it with baton token --operator)")
		return nil, nil
	}
	ui, err := console.NewJobsUI(ctx, console.JobsUIConfig{Client: client, Logger: logger})
	if err != nil {
		return nil, err
	}
	return ui, nil
}

// withConsole serves the console under /console/ and the API elsewhere.
func withConsole(api, con http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/console/", con)
	mux.Handle("/console", con)
	mux.Handle("/", api)
	return mux
}

// servePool connects to the database with the pool size serve needs.
func servePool(ctx context.Context, databaseURL string) (*pgxpool.Pool, error) {
	poolCfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parsing DATABASE_URL: %w", err)
	}
	if !strings.Contains(databaseURL, "pool_max_conns") {
		// River's workers, the HTTP handlers and the listener share this
		// pool; pgxpool's default (max(4, cores)) starves them.
		poolCfg.MaxConns = defaultPoolSize
	}
	return connectPool(ctx, poolCfg)
}

// newHTTPServer is the API's server with the config's timeouts: a whole
// request must be read within ReadTimeout (its headers within 10 s), its
// answer written within WriteTimeout, and an idle keep-alive connection is
// closed after IdleTimeout. The WebSocket stream clears the read and write
// deadlines of its connection (httpapi/stream.go). Every answer, the
// console's and River UI's included, carries X-Content-Type-Options:
// nosniff (httpapi.NoSniff).
func newHTTPServer(h http.Handler, c config.HTTP) *http.Server {
	read := time.Duration(c.ReadTimeout)
	return &http.Server{
		Handler:           httpapi.NoSniff(h),
		ReadHeaderTimeout: min(10*time.Second, read),
		ReadTimeout:       read,
		WriteTimeout:      time.Duration(c.WriteTimeout),
		IdleTimeout:       time.Duration(c.IdleTimeout),
	}
}

func cmdMigrate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	databaseURL := fs.String("database-url", "", "PostgreSQL connection string (DATABASE_URL)")
	if err := parseFlags(fs, args, envFlag{"database-url", "DATABASE_URL"}); err != nil {
		return err
	}
	if *databaseURL == "" {
		return errors.New("DATABASE_URL is not set")
	}
	pool, err := connectPoolURL(ctx, *databaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	logger := newLogger("text", "info")
	if err := db.Migrate(ctx, pool, logger); err != nil {
		return err
	}
	fmt.Println("migrations applied")
	return nil
}

// tokenScopes are the scopes baton token accepts.
var tokenScopes = []string{httpapi.ScopeWorkflowsRead, httpapi.ScopeWorkflowsWrite, httpapi.ScopeMonitorRead, httpapi.ScopeMonitorWrite}

// tokenFlags are baton token's flags.
type tokenFlags struct {
	operator        bool
	tenant, subject string
	scope, aud, iss string
	ttl             time.Duration
}

func cmdToken(args []string) error {
	var f tokenFlags
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.BoolVar(&f.operator, "operator", false, "mint an operator token, which opens River UI: signed with BATON_OPERATOR_SECRET, no tenant, no scope")
	fs.StringVar(&f.tenant, "tenant", "", "tenant the token is for (required, except with --operator)")
	fs.StringVar(&f.subject, "sub", "baton-cli", "subject of the token (with --operator: who the operator is)")
	fs.StringVar(&f.scope, "scope", "", `space-separated scopes (default "workflows:read workflows:write")`)
	fs.DurationVar(&f.ttl, "ttl", 24*time.Hour, "how long the token is valid (baton serve refuses more than auth.maxTokenLifetime, default 720h)")
	fs.StringVar(&f.aud, "aud", "", "the token's aud claim (BATON_JWT_AUDIENCE); an operator token's is always baton-operator")
	fs.StringVar(&f.iss, "iss", "", "the token's iss claim (BATON_JWT_ISSUER)")
	if err := parseFlags(fs, args, envFlag{"aud", "BATON_JWT_AUDIENCE"}, envFlag{"iss", "BATON_JWT_ISSUER"}); err != nil {
		return err
	}
	if f.ttl <= 0 {
		return fmt.Errorf("--ttl %s: must be positive", f.ttl)
	}
	if f.ttl > httpapi.DefaultMaxTokenLifetime {
		fmt.Fprintf(os.Stderr, "warning: --ttl %s is over the %s baton serve accepts unless auth.maxTokenLifetime is raised\n", f.ttl, httpapi.DefaultMaxTokenLifetime)
	}
	var (
		tok string
		err error
	)
	if f.operator {
		tok, err = mintOperatorToken(f)
	} else {
		tok, err = mintTenantToken(f)
	}
	if err != nil {
		return err
	}
	fmt.Println(tok)
	return nil
}

// tokenSecret reads the secret in env that signs a token, warning when it
// is shorter than baton serve accepts.
func tokenSecret(env string) ([]byte, error) {
	secret := os.Getenv(env)
	if secret == "" {
		return nil, fmt.Errorf("%s is not set", env)
	}
	if len(secret) < httpapi.MinJWTSecretBytes {
		fmt.Fprintf(os.Stderr, "warning: %s is %d bytes; baton serve refuses a secret under %d bytes\n", env, len(secret), httpapi.MinJWTSecretBytes)
	}
	return []byte(secret), nil
}

// mintTenantToken mints an API token for a tenant with BATON_JWT_SECRET.
func mintTenantToken(f tokenFlags) (string, error) {
	scopes := splitFields(f.scope)
	for _, s := range scopes {
		if s == "operator" {
			return "", errors.New("--scope operator: a tenant's token no longer opens River UI; mint an operator token with baton token --operator (BATON_OPERATOR_SECRET)")
		}
		if !slices.Contains(tokenScopes, s) {
			return "", fmt.Errorf("--scope: unknown scope %q (known: %s)", s, strings.Join(tokenScopes, " "))
		}
	}
	secret, err := tokenSecret("BATON_JWT_SECRET")
	if err != nil {
		return "", err
	}
	var opts []httpapi.TokenOption
	if f.aud != "" {
		opts = append(opts, httpapi.WithAudience(f.aud))
	}
	if f.iss != "" {
		opts = append(opts, httpapi.WithIssuer(f.iss))
	}
	return httpapi.MintToken(secret, f.tenant, f.subject, scopes, f.ttl, opts...)
}

// mintOperatorToken mints an operator token with BATON_OPERATOR_SECRET: no
// tenant, no scope, audience baton-operator.
func mintOperatorToken(f tokenFlags) (string, error) {
	if f.tenant != "" || f.scope != "" {
		return "", errors.New("--operator: an operator token names no tenant and no scope; leave out --tenant and --scope")
	}
	secret, err := tokenSecret("BATON_OPERATOR_SECRET")
	if err != nil {
		return "", err
	}
	var opts []httpapi.TokenOption
	if f.iss != "" {
		opts = append(opts, httpapi.WithIssuer(f.iss))
	}
	return httpapi.MintOperatorToken(secret, f.subject, f.ttl, opts...)
}

// outboundChannels builds the channel adapters of the config file's
// channels, by name: the log (the default) or a webhook signed with
// BATON_WEBHOOK_SECRET (outboundSecret). A thread delivers through the one
// its channel names, else through channels.default.
func outboundChannels(file *config.Config, weakSecrets bool, logger *slog.Logger) (map[string]engine.ChannelAdapter, error) {
	out := make(map[string]engine.ChannelAdapter, len(file.Channels))
	var (
		secret     []byte
		haveSecret bool
	)
	for name, ch := range file.Channels {
		switch ch.Type {
		case "", "log":
			out[name] = &engine.LogChannel{Logger: logger}
		case "webhook":
			if ch.URL == "" {
				return nil, fmt.Errorf("channels.%s is a webhook without a url", name)
			}
			if !haveSecret {
				s, err := outboundSecret("BATON_WEBHOOK_SECRET", fmt.Sprintf("channels.%s is a webhook", name), weakSecrets, logger)
				if err != nil {
					return nil, err
				}
				secret, haveSecret = s, true
			}
			out[name] = &engine.WebhookChannel{URL: ch.URL, Secret: secret}
		default:
			return nil, fmt.Errorf("channels.%s: unknown type %q", name, ch.Type)
		}
	}
	return out, nil
}

// outboundSecret reads the secret in the environment variable env that
// signs outbound calls, which why says are enabled. A secret under
// engine.MinSecretBytes (an empty one included) is an error, or with
// weakSecrets (baton dev) a warning: an empty key signs what anyone can
// forge.
func outboundSecret(env, why string, weakSecrets bool, logger *slog.Logger) ([]byte, error) {
	secret := os.Getenv(env)
	if len(secret) >= engine.MinSecretBytes {
		return []byte(secret), nil
	}
	state := "is not set"
	if secret != "" {
		state = fmt.Sprintf("is %d bytes", len(secret))
	}
	msg := fmt.Sprintf("%s %s, but %s: set it to a secret of at least %d bytes (openssl rand -hex 32)", env, state, why, engine.MinSecretBytes)
	if !weakSecrets {
		return nil, errors.New(msg)
	}
	logger.Warn(msg + "; baton dev goes on with it")
	return []byte(secret), nil
}
