package cloud

import (
	"encoding/json"
	"net/http"

	"github.com/pkie/pkie"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are one cloud's Prometheus metrics, in a registry of its own so
// that several clouds in one process (tests, the testbed) stay apart.
type metrics struct {
	reg            *prometheus.Registry
	sessions       prometheus.Gauge
	clients        prometheus.Gauge
	jobs           prometheus.Gauge
	sessionsOpened *prometheus.CounterVec
	sessionsClosed *prometheus.CounterVec
	refused        *prometheus.CounterVec
	registrations  prometheus.Counter
	submissions    *prometheus.CounterVec
	rejects        *prometheus.CounterVec
	proofs         *prometheus.CounterVec
	proofSeconds   *prometheus.HistogramVec
	jobSeconds     prometheus.Histogram
}

func newMetrics() *metrics {
	buckets := prometheus.ExponentialBuckets(0.0005, 2, 16)
	m := &metrics{
		reg: prometheus.NewRegistry(),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pkie_cloud_sessions", Help: "Sessions open (registered clients and submitters, including those in their handshake).",
		}),
		clients: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pkie_cloud_clients", Help: "Registered clients.",
		}),
		jobs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pkie_cloud_jobs_in_flight", Help: "Submissions being proved.",
		}),
		sessionsOpened: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pkie_cloud_sessions_opened_total", Help: "Sessions opened, by transport.",
		}, []string{"transport"}),
		sessionsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pkie_cloud_sessions_closed_total", Help: "Sessions ended, by reason (closed, idle, slow_reader, protocol, too_large, malformed, write, shutdown).",
		}, []string{"reason"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pkie_cloud_connections_refused_total", Help: "Connections closed at once because the cloud was at a session bound, by bound.",
		}, []string{"bound"}),
		registrations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pkie_cloud_registrations_total", Help: "Clients registered.",
		}),
		submissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pkie_cloud_submissions_total", Help: "Submissions received, by outcome: accepted, rejected, or unanswered (duplicate; unknown or client_full, submitted by another session).",
		}, []string{"outcome"}),
		rejects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pkie_cloud_rejects_total", Help: "Submissions refused (Reject) and sessions ended (Error), by code.",
		}, []string{"code"}),
		proofs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pkie_cloud_proofs_total", Help: "Outcomes pushed to clients, by enhancement and status.",
		}, []string{"pkie", "status"}),
		proofSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "pkie_cloud_prove_duration_seconds", Help: "Time a prover took to answer, by enhancement.", Buckets: buckets,
		}, []string{"pkie"}),
		jobSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "pkie_cloud_handler_duration_seconds", Help: "Time from a submission's arrival to its last outcome.", Buckets: buckets,
		}),
	}
	m.reg.MustRegister(m.sessions, m.clients, m.jobs, m.sessionsOpened, m.sessionsClosed, m.refused, m.registrations,
		m.submissions, m.rejects, m.proofs, m.proofSeconds, m.jobSeconds,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// addHealth exports one hosted enhancement's health, asked at each scrape.
func (m *metrics) addHealth(name string, healthy func() bool) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "pkie_cloud_pkie_healthy", Help: "1 when the enhancement's prover is healthy (synced with a fresh tree of its TTP, store readable), 0 when not (its /healthz entry says why).",
		ConstLabels: prometheus.Labels{"pkie": name},
	}, func() float64 {
		if healthy() {
			return 1
		}
		return 0
	}))
}

// refusalCounter is a prover that counts the syncs it refused because its
// TTP went back on what was verified (the ct prover of a mirrored log:
// forks, rollbacks, bad signatures, entries not matching).
type refusalCounter interface{ RefusedSyncs() uint64 }

// addRefusals exports one hosted enhancement's refused syncs.
func (m *metrics) addRefusals(name string, refused func() uint64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "pkie_cloud_pkie_refused_syncs_total", Help: "Syncs the enhancement's prover refused because its TTP went back on what was verified (a fork, a rollback, a bad signature, entries not matching): alert on any.",
		ConstLabels: prometheus.Labels{"pkie": name},
	}, func() float64 { return float64(refused()) }))
}

// lookupCounter is a prover that counts, per source it consults on a
// request's behalf, the lookups that failed (the ct prover: per CT log,
// the inclusion lookups).
type lookupCounter interface{ LookupFailures() map[string]uint64 }

// addLookupFailures exports one hosted enhancement's failed lookups, by
// source, asked at each scrape.
func (m *metrics) addLookupFailures(name string, failures func() map[string]uint64) {
	m.reg.MustRegister(&lookupCollector{desc: prometheus.NewDesc("pkie_cloud_pkie_lookup_failures_total",
		"Lookups the enhancement's prover made on a request's behalf that failed, by source (the ct prover: inclusion lookups, by CT log); the proof says the lookup failed, and clients read it as unknown.",
		[]string{"source"}, prometheus.Labels{"pkie": name}), failures: failures})
}

type lookupCollector struct {
	desc     *prometheus.Desc
	failures func() map[string]uint64
}

func (c *lookupCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *lookupCollector) Collect(ch chan<- prometheus.Metric) {
	for src, n := range c.failures() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), src)
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Health is the body of /healthz.
type Health struct {
	// Status is "ok" when every hosted prover is healthy, else "degraded".
	Status string `json:"status"`
	// PKIEs maps each hosted enhancement's name to "ok" or what is wrong.
	PKIEs   map[string]string `json:"pkies"`
	Clients int               `json:"clients"`
	Jobs    int               `json:"jobs_in_flight"`
}

// Health asks every hosted prover that can tell (a pkie.Healther).
func (c *Cloud) Health() Health {
	h := Health{Status: "ok", PKIEs: map[string]string{}}
	for _, id := range c.ids {
		p := c.provers[id]
		st := "ok"
		if err := p.health(); err != nil {
			st, h.Status = err.Error(), "degraded"
		}
		h.PKIEs[p.name] = st
	}
	c.mu.Lock()
	h.Clients, h.Jobs = len(c.clients), c.jobs
	c.mu.Unlock()
	return h
}

// healthz answers 200 when every prover is healthy and 503 otherwise, so
// that a load balancer's health check takes a replica whose provers lost
// their TTPs out of rotation.
func (c *Cloud) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	h := c.Health()
	w.Header().Set("Content-Type", "application/json")
	if h.Status != "ok" {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(h)
}

// health asks the prover, if it can tell (a pkie.Healther).
func (h *hosted) health() error {
	if hp, ok := h.p.(pkie.Healther); ok {
		return hp.Health()
	}
	return nil
}

// header is a prover that keeps a signed statement of its TTP that other
// replicas learn from (treeproof's mirrors: the head they refuse to go
// back on).
type header interface{ Head() []byte }

// head serves GET /v1/heads/{pkie}: the signed head the enhancement's
// prover refuses to go back on, for a replica without state of its own
// (pkie cloud serve --peer). It needs no trust in this replica: the head is
// the TTP's signed note, which the asking replica verifies.
func (c *Cloud) head(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("pkie")
	for _, id := range c.ids {
		p := c.provers[id]
		if p.name != name {
			continue
		}
		hp, ok := p.p.(header)
		var msg []byte
		if ok {
			msg = hp.Head()
		}
		if len(msg) == 0 {
			http.Error(w, "no head of "+name+"'s TTP here", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(msg)
		return
	}
	http.Error(w, "no such enhancement here", http.StatusNotFound)
}
