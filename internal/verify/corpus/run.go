package corpus

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/pkie/pkie/internal/verify"
)

// Answer is one back end's answer to one case: a verdict, or Err when it
// gave none.
type Answer struct {
	Backend string      `json:"backend"`
	Valid   bool        `json:"valid"`
	Code    verify.Code `json:"code,omitempty"`
	Reason  string      `json:"reason,omitempty"`
	Err     string      `json:"error,omitempty"`
}

// Outcome is every back end's answer to one case, in the order of the
// back ends run.
type Outcome struct {
	Case    *Case    `json:"case"`
	Answers []Answer `json:"answers"`
}

// Run puts every case to every back end and reports how they did.
//
// Each back end answers the cases one after another on its own goroutine,
// so the back ends work side by side; a helper answers one request at a
// time in any case. progress, when not nil, is called (never concurrently)
// each time a case has been answered by all back ends. A cancelled ctx
// stops the run; the cases not yet answered get the context's error.
func Run(ctx context.Context, backends []verify.Backend, cases []Case, progress func(done, total int)) *Report {
	return RunSets(ctx, [][]verify.Backend{backends}, cases, progress)
}

// RunSets is Run with several sets of the same back ends, in the same
// order: the cases are dealt among the sets, which run side by side. With
// helpers, each set is its own helper processes, so this is how to use
// more than one process per library.
func RunSets(ctx context.Context, sets [][]verify.Backend, cases []Case, progress func(done, total int)) *Report {
	outs := make([]Outcome, len(cases))
	if len(sets) == 0 || len(sets[0]) == 0 {
		for i := range cases {
			outs[i] = Outcome{Case: &cases[i]}
		}
		return NewReport(nil, outs)
	}
	nb := len(sets[0])
	for i := range cases {
		outs[i] = Outcome{Case: &cases[i], Answers: make([]Answer, nb)}
	}
	answered := make([]atomic.Int32, len(cases))
	var (
		pmu  sync.Mutex
		done int
	)
	finish := func(i int) {
		if int(answered[i].Add(1)) != nb {
			return
		}
		pmu.Lock()
		done++
		if progress != nil {
			progress(done, len(cases))
		}
		pmu.Unlock()
	}
	var wg sync.WaitGroup
	for s, set := range sets {
		for b, be := range set {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := s; i < len(cases); i += len(sets) {
					outs[i].Answers[b] = ask(ctx, be, &cases[i])
					finish(i)
				}
			}()
		}
	}
	wg.Wait()
	names := make([]string, nb)
	for b, be := range sets[0] {
		names[b] = be.Name()
	}
	rep := NewReport(names, outs)
	for b, be := range sets[0] {
		rep.Backends[b].Library = be.Library()
	}
	return rep
}

func ask(ctx context.Context, be verify.Backend, c *Case) Answer {
	a := Answer{Backend: be.Name()}
	if err := ctx.Err(); err != nil {
		a.Err = err.Error()
		return a
	}
	res, err := be.Verify(ctx, c.Request())
	if err != nil {
		a.Err = err.Error()
		return a
	}
	a.Valid, a.Code, a.Reason = res.Valid, res.Code, res.Reason
	return a
}
