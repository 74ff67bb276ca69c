package soak

import (
	"io"
	"log"
)

// fit lowers the attacks' connection counts so that, all running at once,
// they use at most half of the open-file limit (both ends of every
// connection are in this process), leaving the rest to the services and
// the good client: the soak measures the services' bounds, not this
// process's. It returns the sizes it kept to.
func (s *Scale) fit(openFiles int) map[string]int64 {
	budget := openFiles / 2
	used := func() int { return 2 * (s.H2Conns + s.SlowBodies + s.FloodWorkers + 2*s.IdleConns + 16) }
	for used() > budget && s.IdleConns > 10 {
		s.IdleConns = max(10, s.IdleConns/2)
	}
	for used() > budget && s.FloodWorkers > 10 {
		s.FloodWorkers = max(10, s.FloodWorkers/2)
	}
	for used() > budget && s.SlowBodies > 10 {
		s.SlowBodies = max(10, s.SlowBodies/2)
	}
	return map[string]int64{
		"h2_conns":            int64(s.H2Conns),
		"h2_streams_per_conn": int64(s.H2Streams),
		"slow_bodies":         int64(s.SlowBodies),
		"flood_workers":       int64(s.FloodWorkers),
		"idle_conns_each":     int64(s.IdleConns),
	}
}

// discardLog silences net/http's per-connection error log: the attacks
// provoke errors on purpose.
func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }
