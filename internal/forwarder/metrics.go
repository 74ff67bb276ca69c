package forwarder

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are one forwarder's Prometheus metrics, in a registry of its own.
type metrics struct {
	reg            *prometheus.Registry
	sessions       prometheus.Gauge
	clients        prometheus.Gauge
	sessionsOpened *prometheus.CounterVec
	refused        *prometheus.CounterVec
	registrations  prometheus.Counter
	issued         prometheus.Counter
	submissions    *prometheus.CounterVec
	relayed        *prometheus.CounterVec
	upstreams      prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pkie_forwarder_sessions", Help: "Sessions open (clients and clouds, including those in their handshake).",
		}),
		clients: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pkie_forwarder_clients", Help: "Registered clients.",
		}),
		sessionsOpened: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pkie_forwarder_sessions_opened_total", Help: "Sessions opened, by transport.",
		}, []string{"transport"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pkie_forwarder_connections_refused_total", Help: "Connections closed at once at a session bound, by bound.",
		}, []string{"bound"}),
		registrations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pkie_forwarder_registrations_total", Help: "Clients registered.",
		}),
		issued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pkie_forwarder_ephids_issued_total", Help: "Ephemeral identifiers issued.",
		}),
		submissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pkie_forwarder_submissions_total", Help: "Sealed submissions from clients, by outcome (relayed, or the reject code).",
		}, []string{"outcome"}),
		relayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pkie_forwarder_relayed_total", Help: "Messages from clouds under an identifier, by outcome (ok, unknown, reused, gone; unauthenticated: from a session that is no cloud, refused and the session closed).",
		}, []string{"outcome"}),
		upstreams: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pkie_forwarder_cloud_sessions_opened_total", Help: "Sessions the forwarder opened to clouds.",
		}),
	}
	m.reg.MustRegister(m.sessions, m.clients, m.sessionsOpened, m.refused, m.registrations, m.issued, m.submissions, m.relayed, m.upstreams)
	return m
}

func (m *metrics) handler() http.Handler { return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}) }

// Health is the body of /healthz.
type Health struct {
	Status  string `json:"status"`
	Clients int    `json:"clients"`
	// UsedIDs is the number of identifiers remembered as used.
	UsedIDs int `json:"used_ids"`
}

func (f *Forwarder) healthz(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	h := Health{Status: "ok", Clients: len(f.clients)}
	f.mu.Unlock()
	h.UsedIDs = f.used.len()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(h)
}
