package pecbench

import (
	"fmt"
	"slices"
	"time"

	"github.com/pkie/pkie/internal/chart"
)

// SavePlots draws the rows that have a shape worth seeing, each as
// PREFIX-NAME.svg and PREFIX-NAME.png: the median latency inflation against
// the client–cloud distance, one line per client–server distance (the PEC
// paper's Figure 5 plots the same inflation as a CDF over placements), and
// the distribution of proof delivery times with and without loss. It
// returns the files written.
func (r *Report) SavePlots(prefix string) ([]string, error) {
	var written []string
	save := func(name string, p *chart.Plot) error {
		paths := []string{prefix + "-" + name + ".svg", prefix + "-" + name + ".png"}
		if err := p.SaveAll(paths...); err != nil {
			return err
		}
		written = append(written, paths...)
		return nil
	}
	if l := r.Latency; l != nil && len(l.Points) > 0 {
		p := &chart.Plot{Title: "Client-only PEC: latency inflation of a usable connection (median)",
			XLabel: "client–cloud RTT (ms)", YLabel: "inflation over the TLS handshake alone (%)"}
		var servers []float64
		for _, pt := range l.Points {
			if !slices.Contains(servers, pt.ServerRTTms) {
				servers = append(servers, pt.ServerRTTms)
			}
		}
		slices.Sort(servers)
		for _, s := range servers {
			var pts []LatencyPoint
			for _, pt := range l.Points {
				if pt.ServerRTTms == s {
					pts = append(pts, pt)
				}
			}
			slices.SortFunc(pts, func(a, b LatencyPoint) int { return int(a.CloudRTTms - b.CloudRTTms) })
			// The expected inflation is in the table; one line per
			// server distance keeps one colour per distance.
			measured := chart.Series{Name: fmt.Sprintf("client–server RTT %.0f ms", s)}
			for _, pt := range pts {
				measured.X, measured.Y = append(measured.X, pt.CloudRTTms), append(measured.Y, 100*pt.Inflation)
			}
			p.Series = append(p.Series, measured)
		}
		if err := save("latency", p); err != nil {
			return written, err
		}
	}
	if l := r.Loss; l != nil && len(l.clean) > 0 {
		ms := func(ds []time.Duration) []float64 {
			out := make([]float64, len(ds))
			for i, d := range ds {
				out[i] = float64(d.Nanoseconds()) / 1e6
			}
			return out
		}
		p := &chart.Plot{Title: fmt.Sprintf("Proof delivery over QUIC, %.0f ms RTT", l.RTTms), XLabel: "submit to last proof (ms)", YLabel: "fraction of submissions",
			Series: []chart.Series{chart.CDF("no loss", ms(l.clean)), chart.CDF(fmt.Sprintf("%.0f%% of datagrams dropped each way", 100*l.Loss), ms(l.lossy))}}
		if err := save("loss", p); err != nil {
			return written, err
		}
	}
	return written, nil
}
