package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine"
)

// Config configures Metrics.
type Config struct {
	// Pool is read at scrape time for the gauges. Required.
	Pool *pgxpool.Pool
	// ScrapeTimeout bounds the gauges' queries. Zero means 2 seconds.
	ScrapeTimeout time.Duration
	// Logger receives scrape errors. Nil discards them.
	Logger *slog.Logger
	// LabelValues is how many distinct workflow_id values, and
	// workflow_id/step_id pairs, each metric keeps; later ones are counted
	// as "other". Zero means DefaultLabelValues (100).
	LabelValues int
}

// Metrics is Baton's Prometheus registry. It implements engine.Metrics.
type Metrics struct {
	registry   *prometheus.Registry
	logger     *slog.Logger
	executeDur *prometheus.HistogramVec
	stepDur    *prometheus.HistogramVec
	errorCount *prometheus.CounterVec
	retryCount *prometheus.CounterVec
	// retentionRemoved counts what retention sweeps removed, by table.
	retentionRemoved *prometheus.CounterVec
	// The label caps of each metric: tenants choose workflow ids, node ids
	// and (through failures) error codes.
	executeWorkflows *labelCap
	stepSteps        *stepLabels
	retrySteps       *stepLabels
	errorCodes       *labelCap
}

var _ engine.Metrics = (*Metrics)(nil)

// durationBuckets cover a millisecond step to a day-long conversation.
var durationBuckets = []float64{1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 1800000, 3600000, 86400000}

// New returns Metrics with its own registry (Go and process collectors
// included).
func New(cfg Config) *Metrics {
	if cfg.ScrapeTimeout <= 0 {
		cfg.ScrapeTimeout = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.LabelValues <= 0 {
		cfg.LabelValues = DefaultLabelValues
	}
	m := &Metrics{
		registry:         prometheus.NewRegistry(),
		logger:           cfg.Logger,
		executeWorkflows: newLabelCap(cfg.LabelValues),
		stepSteps:        newStepLabels(cfg.LabelValues),
		retrySteps:       newStepLabels(cfg.LabelValues),
		errorCodes:       newLabelCap(cfg.LabelValues),
		executeDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workflow_execute_duration_ms", Help: "Time from creation to end of executions that reached a terminal status, in milliseconds.",
			Buckets: durationBuckets,
		}, []string{"domain", "action", "workflow_id"}),
		stepDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workflow_step_duration_ms", Help: "Time of each node run (a task's tool call included), in milliseconds.",
			Buckets: durationBuckets,
		}, []string{"domain", "action", "workflow_id", "step_id"}),
		errorCount: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workflow_error_count", Help: "Executions that failed, by error code.",
		}, []string{"domain", "action", "error_code"}),
		retryCount: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workflow_retry_count", Help: "Steps run again after a failed attempt.",
		}, []string{"domain", "action", "workflow_id", "step_id"}),
		retentionRemoved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_retention_removed_total", Help: "Rows retention sweeps of this process removed, by table (thread_message.external_id: inbound message_ids forgotten).",
		}, []string{"table"}),
	}
	m.registry.MustRegister(m.executeDur, m.stepDur, m.errorCount, m.retryCount, m.retentionRemoved,
		&gauges{pool: cfg.Pool, q: dbsqlc.New(), timeout: cfg.ScrapeTimeout},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the Prometheus text exposition. A failed gauge query is
// logged and leaves the other metrics served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(m.logger.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// Registry returns the registry, for adding collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// ExecutionFinished observes workflow_execute_duration_ms.
func (m *Metrics) ExecutionFinished(workflowID string, _ engine.ExecutionStatus, d time.Duration) {
	m.executeDur.WithLabelValues("workflow", "execute", m.executeWorkflows.value(workflowID)).Observe(ms(d))
}

// StepFinished observes workflow_step_duration_ms.
func (m *Metrics) StepFinished(workflowID, stepID string, d time.Duration) {
	wf, step := m.stepSteps.values(workflowID, stepID)
	m.stepDur.WithLabelValues("workflow", "step", wf, step).Observe(ms(d))
}

// Error counts workflow_error_count.
func (m *Metrics) Error(code string) {
	domain, action := "workflow", "execute"
	if parts := strings.SplitN(code, ".", 3); len(parts) == 3 {
		domain, action = parts[0], parts[1]
	}
	m.errorCount.WithLabelValues(domain, action, m.errorCodes.value(code)).Inc()
}

// Retry counts workflow_retry_count.
func (m *Metrics) Retry(workflowID, stepID string) {
	wf, step := m.retrySteps.values(workflowID, stepID)
	m.retryCount.WithLabelValues("workflow", "step", wf, step).Inc()
}

// RetentionRemoved counts baton_retention_removed_total (retention.Recorder).
func (m *Metrics) RetentionRemoved(table string, n int64) {
	m.retentionRemoved.WithLabelValues(table).Add(float64(n))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// gauges reads the gauges from the database at scrape time.
type gauges struct {
	pool    *pgxpool.Pool
	q       *dbsqlc.Queries
	timeout time.Duration
}

var (
	queueDepthDesc = prometheus.NewDesc("workflow_queue_depth",
		"River jobs due and not yet taken, by queue.", []string{"domain", "action", "queue"}, nil)
	activeDesc = prometheus.NewDesc("workflow_active_executions",
		"Pending, running and waiting executions, by tenant and status; 0 for a tenant with stored definitions and none.", []string{"domain", "action", "tenant_id", "status"}, nil)
	locksDesc = prometheus.NewDesc("baton_thread_locks_held",
		"Threads whose lock an execution holds, by tenant.", []string{"tenant_id"}, nil)
	outboxDesc = prometheus.NewDesc("baton_outbound_pending",
		"Outbound messages waiting for delivery.", nil, nil)
	laneLimitDesc = prometheus.NewDesc("baton_lane_limit",
		"The concurrency limit of a built-in lane (main, subagent, cron); \"other\" sums the limits of all other lanes.", []string{"lane"}, nil)
	laneRunningDesc = prometheus.NewDesc("baton_lane_running",
		"Running executions of a built-in lane, over all tenants; \"other\" sums all other lanes.", []string{"lane"}, nil)
	lanePendingDesc = prometheus.NewDesc("baton_lane_pending",
		"Pending executions waiting for a slot of a built-in lane, over all tenants; \"other\" sums all other lanes.", []string{"lane"}, nil)
)

// Describe sends the gauges' descriptors.
func (g *gauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDepthDesc
	ch <- activeDesc
	ch <- locksDesc
	ch <- outboxDesc
	ch <- laneLimitDesc
	ch <- laneRunningDesc
	ch <- lanePendingDesc
}

// Collect queries the database with a short timeout.
func (g *gauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()
	depth, err := g.q.MetricsQueueDepth(ctx, g.pool)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(queueDepthDesc, err)
	} else {
		seen := map[string]bool{}
		for _, r := range depth {
			seen[r.Queue] = true
			ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(r.Jobs), "workflow", "queue", r.Queue)
		}
		for _, queue := range []string{"high", "medium", "low"} { // these queues show even when empty
			if !seen[queue] {
				ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, 0, "workflow", "queue", queue)
			}
		}
	}
	active, err := g.q.MetricsActiveExecutions(ctx, g.pool)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(activeDesc, err)
	} else {
		for _, r := range active {
			ch <- prometheus.MustNewConstMetric(activeDesc, prometheus.GaugeValue, float64(r.Executions), "workflow", "execute", r.TenantID, r.Status)
		}
	}
	locks, err := g.q.MetricsThreadLocks(ctx, g.pool)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(locksDesc, err)
	} else {
		for _, r := range locks {
			ch <- prometheus.MustNewConstMetric(locksDesc, prometheus.GaugeValue, float64(r.Threads), r.TenantID)
		}
	}
	pending, err := g.q.MetricsOutboundPending(ctx, g.pool)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(outboxDesc, err)
	} else {
		ch <- prometheus.MustNewConstMetric(outboxDesc, prometheus.GaugeValue, float64(pending))
	}
	lanes, err := g.q.MetricsLanes(ctx, g.pool)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(laneRunningDesc, err)
		return
	}
	// Lanes other than the built-in ones are named by tenants: they are
	// summed under "other", so their number cannot grow the scrape.
	type laneSum struct{ limit, running, pending int64 }
	sums := map[string]*laneSum{}
	var order []string
	for _, l := range lanes {
		label := laneLabel(l.Lane)
		sum := sums[label]
		if sum == nil {
			sum = &laneSum{}
			sums[label] = sum
			order = append(order, label)
		}
		sum.limit += l.MaxConcurrent
		sum.running += l.Running
		sum.pending += l.Pending
	}
	for _, label := range order {
		sum := sums[label]
		ch <- prometheus.MustNewConstMetric(laneLimitDesc, prometheus.GaugeValue, float64(sum.limit), label)
		ch <- prometheus.MustNewConstMetric(laneRunningDesc, prometheus.GaugeValue, float64(sum.running), label)
		ch <- prometheus.MustNewConstMetric(lanePendingDesc, prometheus.GaugeValue, float64(sum.pending), label)
	}
}
