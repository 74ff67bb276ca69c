package pecbench

import (
	"fmt"
	"io"
	"math"
)

// The cost model (`pkie bench pec --cost`) recomputes Table 3 of "Towards
// Sustainable Evolution for the TLS PKI" (PEC, ASIA CCS 2018, §6.3.2): the
// monthly cost to a cloud provider of proving every TLS connection of a
// country's Internet users (CT and revocation, the common case), as
// inbound and outbound traffic and the machines the connection rate needs.
// It puts the paper's inputs beside this implementation's measured ones:
// the connections one machine proves per second and the bytes of a
// submission and of its proofs.

// Inputs the paper states, or that its Table 3 implies where it does not.
const (
	// PaperGlobalUsers is §6.3.2's "approx. 3.55 billion users" (its
	// reference: Internet Live Stats, "Internet Users", 2016).
	PaperGlobalUsers = 3.55e9
	// PaperInBytes is the average "ServerHello message" of Alexa's top
	// 1,000 domains, the bytes a cloud receives per connection.
	PaperInBytes = PaperFlightBytes
	// PaperOutBytesText is what §6.3.2 says the cloud sends per
	// connection, "the sum of the maximum size of CT and revocation
	// proofs": a CT presence proof (Table 1: 1,018 bytes) and a
	// revocation absence proof (Table 2: 1,282 bytes).
	PaperOutBytesText = 1018 + 1282
	// PaperOutBytes is what Table 3 itself uses: its Data Out over Data
	// In times the 4,553 bytes in (764.18 / 1,740.66 × 4,553), which the
	// model takes so that it reproduces the table.
	PaperOutBytes = 1999
	// PaperInstanceMonthUSD is the t2.medium's price per month the
	// paper uses (footnote 10: "Two virtual CPUs and 4GB memory for $15
	// per month").
	PaperInstanceMonthUSD = 15
	// PaperMachineVCPUs are a t2.medium's.
	PaperMachineVCPUs = 2
	// HoursPerMonth is AWS's billing month. With it and decimal
	// gigabytes the paper's Iceland traffic cost comes out within 1%.
	HoursPerMonth = 730
)

// PaperTable3 is the paper's Table 3: data in and out per day (TB), and the
// monthly data, computing and total costs (USD).
var PaperTable3 = map[string]Table3Row{
	"Iceland": {0.163, 0.071, 194, 15, 209},
	"Spain":   {18.57, 8.15, 17760, 390, 18150},
	"U.S.":    {140.7, 61.77, 104888, 2970, 107858},
	"Global":  {1740.66, 764.18, 1211236, 36615, 1247851},
}

// Table3Row is one row of Table 3.
type Table3Row struct {
	InTBPerDay  float64 `json:"in_tb_per_day"`
	OutTBPerDay float64 `json:"out_tb_per_day"`
	DataUSD     float64 `json:"data_usd"`
	ComputeUSD  float64 `json:"compute_usd"`
	TotalUSD    float64 `json:"total_usd"`
}

// PaperConnPerUserSecond is the connection rate per Internet user behind
// Table 3. §6.3.2 does not state it: it takes "the maximum rate we
// observe" per client IP in a private 24-hour SWITCH trace. Table 3's
// global row gives it: 1,740.66 TB a day of 4,553-byte ServerHellos from
// 3.55 billion users is 0.0012464 connections per user per second (4.49
// an hour, 108 a day).
var PaperConnPerUserSecond = PaperTable3["Global"].InTBPerDay * 1e12 / (86400 * PaperInBytes * PaperGlobalUsers)

// CostRegion is a population of Internet users.
type CostRegion struct {
	Name   string  `json:"name"`
	Users  float64 `json:"users"`
	Source string  `json:"source"`
}

// PaperCostRegions are Table 3's rows. The paper takes each country's users
// from Internet Live Stats' "Internet Users by Country (2016)" (population
// × penetration) without printing them; the counts here are what its Data
// In column implies at PaperConnPerUserSecond, which matches that source's
// 2016 figures where we could read them (Iceland: 331,778, all of the
// population; U.S.: 286.9 million).
func PaperCostRegions() []CostRegion {
	implied := func(name string) float64 {
		return PaperTable3[name].InTBPerDay * 1e12 / (86400 * PaperInBytes * PaperConnPerUserSecond)
	}
	src := "implied by Table 3's Data In (Internet Live Stats, 2016)"
	return []CostRegion{
		{"Iceland", implied("Iceland"), src},
		{"Spain", implied("Spain"), src},
		{"U.S.", implied("U.S."), src},
		{"Global", PaperGlobalUsers, "§6.3.2: approx. 3.55 billion (Internet Live Stats, 2016)"},
	}
}

// TodayGlobalUsers is ITU's estimate of Internet users in 2024 ("Facts and
// Figures 2024": 5.5 billion, 68% of the world's population).
const TodayGlobalUsers = 5.5e9

// EgressTier is a band of monthly outbound traffic and its price.
type EgressTier struct {
	// GB is the band's width (0: unbounded).
	GB       float64 `json:"gb"`
	USDPerGB float64 `json:"usd_per_gb"`
}

// Prices are an instance's and the outbound traffic's.
type Prices struct {
	Name             string       `json:"name"`
	Source           string       `json:"source"`
	Instance         string       `json:"instance"`
	InstanceMonthUSD float64      `json:"instance_month_usd"`
	FreeGB           float64      `json:"free_gb"`
	Egress           []EgressTier `json:"egress"`
}

// awsEgress are AWS's Data Transfer Out to the Internet tiers (us-east-1),
// the same in 2017 and today: up to 10 TB a month $0.09/GB, the next 40 TB
// $0.085, the next 100 TB $0.07, beyond 150 TB $0.05.
var awsEgress = []EgressTier{{10000, 0.09}, {40000, 0.085}, {100000, 0.07}, {0, 0.05}}

// PaperPrices and TodayPrices are the two price sets the model is run at.
var (
	PaperPrices = Prices{Name: "paper (2017)", Source: "the paper's t2.medium at $15/month (footnote 10); AWS us-east-1 egress tiers of 2017 (first 1 GB free)",
		Instance: "t2.medium", InstanceMonthUSD: PaperInstanceMonthUSD, FreeGB: 1, Egress: awsEgress}
	TodayPrices = Prices{Name: "today (2025)", Source: "AWS us-east-1 list prices, 2025: t2.medium On-Demand Linux $0.0464/h × 730 h; egress tiers unchanged, first 100 GB a month free (since December 2021)",
		Instance: "t2.medium", InstanceMonthUSD: 0.0464 * HoursPerMonth, FreeGB: 100, Egress: awsEgress}
)

// egressUSD is the monthly price of gb of outbound traffic.
func (p Prices) egressUSD(gb float64) float64 {
	gb = math.Max(0, gb-p.FreeGB)
	usd := 0.0
	for _, t := range p.Egress {
		x := gb
		if t.GB > 0 {
			x = math.Min(gb, t.GB)
		}
		usd += x * t.USDPerGB
		gb -= x
		if gb <= 0 {
			break
		}
	}
	return usd
}

// CostBasis is one set of per-connection inputs.
type CostBasis struct {
	Name string `json:"name"`
	// MachinePerSecond is the connections one machine proves per
	// second.
	MachinePerSecond float64 `json:"machine_per_second"`
	InBytes          int     `json:"in_bytes"`
	OutBytes         int     `json:"out_bytes"`
	Source           string  `json:"source"`
}

// CostLine is one region at one basis and one price set.
type CostLine struct {
	Region      string  `json:"region"`
	Basis       string  `json:"basis"`
	Prices      string  `json:"prices"`
	Users       float64 `json:"users"`
	ConnPerSec  float64 `json:"connections_per_second"`
	InTBPerDay  float64 `json:"in_tb_per_day"`
	OutTBPerDay float64 `json:"out_tb_per_day"`
	Machines    int     `json:"machines"`
	DataUSD     float64 `json:"data_usd_month"`
	ComputeUSD  float64 `json:"compute_usd_month"`
	TotalUSD    float64 `json:"total_usd_month"`
}

// CostReport is the recomputed Table 3 with every input.
type CostReport struct {
	ConnPerUserSecond float64              `json:"connections_per_user_second"`
	ConnSource        string               `json:"connections_source"`
	Regions           []CostRegion         `json:"regions"`
	Bases             []CostBasis          `json:"bases"`
	Prices            []Prices             `json:"prices"`
	Lines             []CostLine           `json:"lines"`
	Paper             map[string]Table3Row `json:"paper_table3"`
	// Measured is the throughput row the measured basis comes from.
	Measured *ThroughputRow `json:"measured,omitempty"`
	VCPUs    int            `json:"vcpus"`
	Notes    []string       `json:"notes"`
}

// Cost computes one line: traffic per day from the connection rate, the
// machines it needs (at least one) and the month's prices.
func Cost(r CostRegion, b CostBasis, p Prices, perUserSecond float64) CostLine {
	conn := r.Users * perUserSecond
	l := CostLine{Region: r.Name, Basis: b.Name, Prices: p.Name, Users: r.Users, ConnPerSec: conn,
		InTBPerDay: conn * 86400 * float64(b.InBytes) / 1e12, OutTBPerDay: conn * 86400 * float64(b.OutBytes) / 1e12}
	l.Machines = max(1, int(math.Ceil(conn/b.MachinePerSecond)))
	outGBMonth := conn * 3600 * HoursPerMonth * float64(b.OutBytes) / 1e9
	l.DataUSD = p.egressUSD(outGBMonth)
	l.ComputeUSD = float64(l.Machines) * p.InstanceMonthUSD
	l.TotalUSD = l.DataUSD + l.ComputeUSD
	return l
}

// CostModel recomputes Table 3 at the paper's inputs and at the measured
// ones (t: a throughput row; nil for the paper's alone), each at the
// paper's prices and today's. A machine of vcpus cores proves vcpus times
// the measured connections per CPU second; the CPU seconds counted include
// the load generator's, which ran in the same process, so the rate is a
// lower bound.
func CostModel(t *ThroughputRow, vcpus int) (*CostReport, error) {
	if vcpus < 1 {
		return nil, fmt.Errorf("pecbench: %d vCPUs", vcpus)
	}
	rep := &CostReport{ConnPerUserSecond: PaperConnPerUserSecond, VCPUs: vcpus,
		ConnSource: "not stated in the paper (the maximum per-IP HTTPS connection rate of a private 24-hour SWITCH trace); derived from Table 3's global row: Data In / (86,400 s × 4,553 B × 3.55 billion users)",
		Regions:    PaperCostRegions(), Prices: []Prices{PaperPrices, TodayPrices}, Paper: PaperTable3, Measured: t}
	rep.Regions = append(rep.Regions, CostRegion{"Global 2024", TodayGlobalUsers, "ITU, Facts and Figures 2024: 5.5 billion"})
	rep.Bases = []CostBasis{{Name: "paper", MachinePerSecond: PaperPerSecond, InBytes: PaperInBytes, OutBytes: PaperOutBytes,
		Source: "§6.3.2: 1,900 connections/s on a t2.medium; 4,553-byte ServerHello in; 1,999 B of proofs out (Table 3's Data Out / Data In × 4,553)"}}
	if t != nil {
		// The slower per CPU second of the cloud's runs: one site's chain
		// again and again (its parsed chain cached), or a new leaf every
		// time.
		x := t.Cloud
		if n := t.CloudNewLeaves; n != nil && n.PerCPUSecond > 0 && (x == nil || n.PerCPUSecond < x.PerCPUSecond) {
			x = n
		}
		if x == nil || x.PerCPUSecond <= 0 || x.SubmitBytes <= 0 || x.ProofBytes <= 0 {
			return nil, fmt.Errorf("pecbench: the throughput row has no measured rate or message sizes")
		}
		rep.Bases = append(rep.Bases, CostBasis{Name: "measured", MachinePerSecond: x.PerCPUSecond * float64(vcpus),
			InBytes: x.SubmitBytes, OutBytes: x.ProofBytes,
			Source: fmt.Sprintf("this run's %q (the slower per CPU second of the cloud's runs): %.0f connections per CPU second × %d vCPUs (%.0f/s on %.2f cores of this shared machine, %s; CPU seconds include the load generator's, so a lower bound); a %d-byte Submit in (the %d-byte chain, framed); %d bytes of Proof frames out",
				x.Name, x.PerCPUSecond, vcpus, x.PerSecond, x.CPUCores, x.Transport, x.SubmitBytes, t.ChainBytes, x.ProofBytes)})
	}
	for _, r := range rep.Regions {
		for _, b := range rep.Bases {
			for _, p := range rep.Prices {
				rep.Lines = append(rep.Lines, Cost(r, b, p, rep.ConnPerUserSecond))
			}
		}
	}
	g := PaperTable3["Global"]
	rep.Notes = []string{
		fmt.Sprintf("Table 3's traffic columns imply %.0f bytes out per connection (Data Out / Data In × 4,553), not the %d its text describes (the largest CT presence proof of Table 1 plus the largest revocation absence proof of Table 2); the paper basis uses the table's", g.OutTBPerDay/g.InTBPerDay*PaperInBytes, PaperOutBytesText),
		fmt.Sprintf("Table 3's computing column implies %.0f machines for the world at $15, %.3f× the %.0f its own traffic and 1,900/s give; its data costs are 4-8%% above AWS's tiers for Spain, the U.S. and the world (730-hour month, decimal GB, which give its Iceland figure within 1%%)",
			g.ComputeUSD/PaperInstanceMonthUSD, g.ComputeUSD/PaperInstanceMonthUSD/math.Ceil(PaperGlobalUsers*PaperConnPerUserSecond/PaperPerSecond), math.Ceil(PaperGlobalUsers*PaperConnPerUserSecond/PaperPerSecond)),
		"inbound traffic is not charged by AWS; it is shown, as in the paper, for completeness",
		"a t2.medium is burstable: its baseline is 40% of one vCPU, so sustained proving at the full rate would need unlimited mode or a fixed-performance instance; the paper's costs, like these, ignore that",
	}
	return rep, nil
}

// WriteText prints the table.
func (c *CostReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "pkie bench pec --cost: the PEC paper's Table 3 (§6.3.2), recomputed\n\ninputs\n")
	fmt.Fprintf(w, "  connections per user per second: %.7f (%.2f an hour); %s\n", c.ConnPerUserSecond, c.ConnPerUserSecond*3600, c.ConnSource)
	for _, r := range c.Regions {
		fmt.Fprintf(w, "  users, %-12s %14.0f  %s\n", r.Name+":", r.Users, r.Source)
	}
	for _, b := range c.Bases {
		fmt.Fprintf(w, "  basis %-9s one machine: %.0f connections/s; %d B in, %d B out per connection; %s\n", b.Name+":", b.MachinePerSecond, b.InBytes, b.OutBytes, b.Source)
	}
	for _, p := range c.Prices {
		fmt.Fprintf(w, "  prices %-13s %s $%.2f/month; egress $%.3f/$%.3f/$%.3f/$%.3f per GB by tier; %s\n", p.Name+":", p.Instance, p.InstanceMonthUSD,
			p.Egress[0].USDPerGB, p.Egress[1].USDPerGB, p.Egress[2].USDPerGB, p.Egress[3].USDPerGB, p.Source)
	}
	fmt.Fprintf(w, "\n  %-12s %-9s %-13s %13s %9s %9s %9s %12s %10s %12s\n", "region", "basis", "prices", "conn/s", "in TB/d", "out TB/d", "machines", "data $/mo", "compute $", "total $/mo")
	for _, r := range c.Regions {
		if p, ok := c.Paper[r.Name]; ok {
			fmt.Fprintf(w, "  %-12s %-9s %-13s %13s %9.3f %9.3f %9.0f %12.0f %10.0f %12.0f\n", r.Name, "Table 3", "paper", "", p.InTBPerDay, p.OutTBPerDay,
				p.ComputeUSD/PaperInstanceMonthUSD, p.DataUSD, p.ComputeUSD, p.TotalUSD)
		}
		for _, l := range c.Lines {
			if l.Region == r.Name {
				fmt.Fprintf(w, "  %-12s %-9s %-13s %13.0f %9.3f %9.3f %9d %12.0f %10.0f %12.0f\n", l.Region, l.Basis, l.Prices, l.ConnPerSec, l.InTBPerDay, l.OutTBPerDay,
					l.Machines, l.DataUSD, l.ComputeUSD, l.TotalUSD)
			}
		}
	}
	fmt.Fprintln(w)
	for _, n := range c.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}
