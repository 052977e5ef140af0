package benchkit

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/internal/pgcluster"
)

// Server is the PostgreSQL server a bench measures on: the one its URL names,
// or a private cluster the bench started and stops.
type Server struct {
	// URL is the server's connection string; databases the bench creates
	// are reached by changing its database name.
	URL     string
	cluster *pgcluster.Cluster
}

// StartServer returns the server at databaseURL, or, when databaseURL is
// empty, starts a private cluster in dataDir (reusing one already there).
// Call Stop when done: it stops the private cluster, if any.
func StartServer(ctx context.Context, databaseURL, dataDir string) (*Server, error) {
	if databaseURL != "" {
		return &Server{URL: databaseURL}, nil
	}
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dataDir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("starting the private PostgreSQL cluster: %w", err)
	}
	return &Server{URL: cluster.URL(), cluster: cluster}, nil
}

// Private says whether the bench started the server itself.
func (s *Server) Private() bool { return s.cluster != nil }

// Stop stops the private cluster; a server the bench was given is left as
// it is.
func (s *Server) Stop(ctx context.Context) error {
	if s.cluster == nil {
		return nil
	}
	if err := s.cluster.Stop(ctx); err != nil {
		return fmt.Errorf("stopping the private PostgreSQL cluster: %w", err)
	}
	return nil
}

// CreateDatabase creates the database name on the server and returns its
// URL.
func (s *Server) CreateDatabase(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return "", fmt.Errorf("connecting to the server: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("creating database %s: %w", name, err)
	}
	return withDatabase(s.URL, name)
}

// DropDatabase drops the database name, closing its connections.
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return fmt.Errorf("connecting to the server to drop %s: %w", name, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("dropping database %s: %w", name, err)
	}
	return nil
}

// withDatabase returns connString, a postgres:// URL or a keyword/value
// string, with its database replaced by name.
func withDatabase(connString, name string) (string, error) {
	if !strings.HasPrefix(connString, "postgres://") && !strings.HasPrefix(connString, "postgresql://") {
		// In a keyword/value string the last setting of a keyword wins.
		return connString + " dbname=" + name, nil
	}
	u, err := url.Parse(connString)
	if err != nil {
		return "", fmt.Errorf("parsing the server URL: %w", err)
	}
	u.Path, u.RawPath = "/"+name, ""
	return u.String(), nil
}
