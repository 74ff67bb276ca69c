package notary

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are one notary's Prometheus metrics, in a registry of its own so
// that several notaries in one process (the testbed, the demo) stay apart.
type metrics struct {
	reg          *prometheus.Registry
	requests     *prometheus.CounterVec
	cacheHits    prometheus.Counter
	cacheMisses  prometheus.Counter
	inflight     prometheus.Gauge
	probeSeconds prometheus.Histogram
	probeErrors  prometheus.Counter
	overloaded   prometheus.Counter
	abandoned    prometheus.Counter
	historyEmpty prometheus.Gauge

	reprobes, reprobesLimited prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pkie_notary_requests_total", Help: "Requests answered, by API and HTTP status.",
		}, []string{"api", "code"}),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pkie_notary_cache_hits_total", Help: "Checks answered from the observation history without a probe.",
		}),
		cacheMisses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pkie_notary_cache_misses_total", Help: "Checks that needed a probe of the target.",
		}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pkie_notary_probes_in_flight", Help: "Outbound probes in progress.",
		}),
		probeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "pkie_notary_probe_duration_seconds", Help: "Time to probe a target (resolve, connect, handshake).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 13),
		}),
		probeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pkie_notary_probe_errors_total", Help: "Probes that failed.",
		}),
		overloaded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pkie_notary_overloaded_total", Help: "Requests refused with 503 because the notary was at a concurrency bound: requests in progress, or the probe queue (or a client's or target's share of it).",
		}),
		abandoned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pkie_notary_probes_abandoned_total", Help: "Probes dropped from the queue before they started because every request waiting for them had gone.",
		}),
		reprobes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pkie_notary_reprobes_total", Help: "Extra probes made after a probe saw a certificate other than the one asked about, looking for it among those the target serves at once.",
		}),
		reprobesLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pkie_notary_reprobes_limited_total", Help: "Reprobe rounds not made because the target had one within the reprobe interval.",
		}),
		historyEmpty: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pkie_notary_history_empty_at_start",
			Help: "1 when the notary started on an empty history although it had recorded observations before (a lost database); 0 otherwise.",
		}),
	}
	m.reg.MustRegister(m.requests, m.cacheHits, m.cacheMisses, m.inflight, m.probeSeconds, m.probeErrors, m.overloaded, m.abandoned, m.historyEmpty, m.reprobes, m.reprobesLimited,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
