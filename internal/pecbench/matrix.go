package pecbench

import (
	"fmt"
	"math"
	"time"
)

// Region is an emulated data centre: an AWS region and the metro its
// coordinates stand for.
type Region struct {
	Code string  `json:"code"`
	City string  `json:"city"`
	Lat  float64 `json:"lat"`
	Lon  float64 `json:"lon"`
}

// PaperRegions are the 14 EC2 regions that existed in 2017, when "Towards
// Sustainable Evolution for the TLS PKI" (PEC, ASIA CCS 2018, §6.2) placed
// a VM "at each of the 14 different data centers (spread across four
// continents)". The paper does not list them; these are all 14 public
// regions AWS ran from December 2016 (London, Montréal, Ohio) until Paris
// opened in December 2017, and they match the ones its text names (Korea,
// Japan, Ohio). Its "four continents" counts Sydney with Asia Pacific.
// Coordinates are of the metro each region is known to be in.
var PaperRegions = []Region{
	{"us-east-1", "N. Virginia (Ashburn)", 39.04, -77.49},
	{"us-east-2", "Ohio (Columbus)", 39.96, -83.00},
	{"us-west-1", "N. California (San Jose)", 37.34, -121.89},
	{"us-west-2", "Oregon (Boardman)", 45.84, -119.70},
	{"ca-central-1", "Montréal", 45.50, -73.57},
	{"sa-east-1", "São Paulo", -23.55, -46.63},
	{"eu-west-1", "Ireland (Dublin)", 53.35, -6.26},
	{"eu-west-2", "London", 51.51, -0.13},
	{"eu-central-1", "Frankfurt", 50.11, 8.68},
	{"ap-south-1", "Mumbai", 19.08, 72.88},
	{"ap-southeast-1", "Singapore", 1.35, 103.82},
	{"ap-southeast-2", "Sydney", -33.87, 151.21},
	{"ap-northeast-1", "Tokyo", 35.68, 139.69},
	{"ap-northeast-2", "Seoul", 37.57, 126.98},
}

// Distance model constants.
const (
	// EarthRadiusKm is the mean Earth radius.
	EarthRadiusKm = 6371.0
	// FibreKmPerMs is light in glass fibre (refractive index ≈ 1.5):
	// two thirds of c, 200 km per millisecond.
	FibreKmPerMs = 299792.458 / 1.5 / 1000
	// DefaultFibreFactor is how much longer the fibre route is than the
	// great circle. "Dissecting Latency in the Internet's Fiber
	// Infrastructure" (Bozkurt et al., 2018) gives the measured rule of
	// thumb for the public Internet, routing included, as 2.1, and the
	// shortest conduit paths as 1.3 in the median; a cloud provider's
	// backbone between its own regions sits between the two, so we take
	// 1.5. It is a flag: the study reports inflation relative to the
	// handshake, which the factor scales alike on every path but the
	// fixed processing times.
	DefaultFibreFactor = 1.5
	// DefaultPoPRTT is the round trip from a client to the point of
	// presence of a cloud with a large footprint (the paper's Akamai
	// case, §6.3.1), whose edge servers sit in or next to the client's
	// access network.
	DefaultPoPRTT = 2 * time.Millisecond
)

// GreatCircleKm is the haversine distance between a and b.
func GreatCircleKm(a, b Region) float64 {
	rad := math.Pi / 180
	dLat, dLon := (b.Lat-a.Lat)*rad, (b.Lon-a.Lon)*rad
	h := math.Sin(dLat/2)*math.Sin(dLat/2) + math.Cos(a.Lat*rad)*math.Cos(b.Lat*rad)*math.Sin(dLon/2)*math.Sin(dLon/2)
	return 2 * EarthRadiusKm * math.Asin(math.Min(1, math.Sqrt(h)))
}

// RTTMatrix is the round trip between every pair of regions, in
// milliseconds at real scale.
type RTTMatrix struct {
	Regions     []Region    `json:"regions"`
	FibreFactor float64     `json:"fibre_factor"`
	RTTms       [][]float64 `json:"rtt_ms"`
}

// NewRTTMatrix derives the matrix from great-circle distances: RTT =
// 2 × distance × factor / (2/3 c). A region's round trip to itself is 0.
func NewRTTMatrix(regions []Region, factor float64) (*RTTMatrix, error) {
	if factor < 1 {
		return nil, fmt.Errorf("pecbench: fibre-path factor %v below 1: no fibre is shorter than the great circle", factor)
	}
	m := &RTTMatrix{Regions: regions, FibreFactor: factor, RTTms: make([][]float64, len(regions))}
	for i, a := range regions {
		m.RTTms[i] = make([]float64, len(regions))
		for j, b := range regions {
			if i != j {
				m.RTTms[i][j] = 2 * GreatCircleKm(a, b) * factor / FibreKmPerMs
			}
		}
	}
	return m, nil
}

// RTT returns the round trip between regions i and j.
func (m *RTTMatrix) RTT(i, j int) time.Duration {
	return time.Duration(m.RTTms[i][j] * float64(time.Millisecond))
}

// Nearest returns the region closest to i by round trip, other than i and
// the regions in not.
func (m *RTTMatrix) Nearest(i int, not ...int) int {
	best := -1
	for j := range m.Regions {
		skip := j == i
		for _, n := range not {
			skip = skip || j == n
		}
		if !skip && (best < 0 || m.RTTms[i][j] < m.RTTms[i][best]) {
			best = j
		}
	}
	return best
}
