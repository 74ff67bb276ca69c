package verifybench

import (
	"encoding/json"
	"fmt"
)

// Servo is one row of the Servo certificate-verification experiment's
// table (the blog post "Certificate verification", OpenSSL against
// rustls/webpki inside Servo, 2017): one site and method, each figure the
// mean in ms of the calls made while opening the site. A figure the
// experiment did not give is 0 and left out of JSON.
type Servo struct {
	Site string `json:"site"`
	// Method is the experiment's: "openssl", "rustls serial" or
	// "rustls parallel".
	Method string `json:"method"`
	// RootsMS is its "roots creation", the counterpart of the roots
	// phase; ConnectorMS its "http connector creation", which has none
	// here (pkie builds no HTTP connector).
	RootsMS     float64 `json:"roots_creation_ms,omitempty"`
	ConnectorMS float64 `json:"http_connector_creation_ms,omitempty"`
	// VerifyCallMS is its "openssl/rustls verify call", the verify
	// phase (go-parallel's parallel phase included); VerificationMS its
	// "total verification time", the sum of the phases; ConnectionMS its
	// "total connection time", the connection with verification.
	VerifyCallMS   float64 `json:"verify_call_ms,omitempty"`
	VerificationMS float64 `json:"total_verification_ms,omitempty"`
	ConnectionMS   float64 `json:"total_connection_ms,omitempty"`
}

// servoMethod is the experiment's method a back end stands in for:
// rustls runs rustls-webpki, serially unless asked; the parallel variant
// here is Go's, as webpki has none. go has no counterpart.
func servoMethod(backend string) string {
	switch backend {
	case "openssl":
		return "openssl"
	case "webpki":
		return "rustls serial"
	case "go-parallel":
		return "rustls parallel"
	}
	return ""
}

// servoFigures returns the experiment's row for a site (a name of Sites)
// and the method the back end stands in for.
func servoFigures(site, backend string) (Servo, bool) {
	m := servoMethod(backend)
	if m == "" {
		return Servo{}, false
	}
	for _, s := range servoTable() {
		if s.Site == site && s.Method == m {
			return s, true
		}
	}
	return Servo{}, false
}

// addPaper puts the experiment's figures beside every site's methods and
// its own count of fastest methods beside the comparison.
func (r *Report) addPaper() {
	if r.Comparison != nil {
		r.Comparison.ServoFastest = servoFastest()
	}
	for i := range r.Sites {
		for j := range r.Sites[i].Methods {
			m := &r.Sites[i].Methods[j]
			if s, ok := servoFigures(r.Sites[i].Site, m.Backend); ok {
				m.Paper = &s
			}
		}
	}
}

// servoTable is the experiment's table as published, its site names
// spelt as Sites spells them (rust: rust-lang, wapo: washingtonpost). It
// gave hackernews-rustlsserial only its first two columns ("I'm not sure
// what happened").
func servoTable() []Servo {
	return []Servo{
		{Site: "arstechnica", Method: "openssl", RootsMS: 6.5937645, ConnectorMS: 3.06476595, VerifyCallMS: 0.04212679, ConnectionMS: 7.63642713, VerificationMS: 0.11863110},
		{Site: "arstechnica", Method: "rustls parallel", RootsMS: 0.6452306, ConnectorMS: 1.8578739, VerifyCallMS: 0.9613585, ConnectionMS: 10.6051663, VerificationMS: 0.9679321},
		{Site: "arstechnica", Method: "rustls serial", RootsMS: 1.7092342, ConnectorMS: 4.8119877, VerifyCallMS: 0.8465297, ConnectionMS: 17.3814024, VerificationMS: 0.8523814},
		{Site: "cnn", Method: "openssl", RootsMS: 0.5902370, ConnectorMS: 3.33709690, VerifyCallMS: 0.00156567, ConnectionMS: 5.87286853, VerificationMS: 0.00410566},
		{Site: "cnn", Method: "rustls parallel", RootsMS: 0.4306289, ConnectorMS: 2.5159100, VerifyCallMS: 0.3190672, ConnectionMS: 9.7441715, VerificationMS: 0.3259468},
		{Site: "cnn", Method: "rustls serial", RootsMS: 0.5596800, ConnectorMS: 2.3019310, VerifyCallMS: 0.2837703, ConnectionMS: 6.2241893, VerificationMS: 0.2915407},
		{Site: "duckduckgo", Method: "openssl", RootsMS: 0.5305152, ConnectorMS: 2.91319830, VerifyCallMS: 0.00221078, ConnectionMS: 7.69686665, VerificationMS: 0.00550160},
		{Site: "duckduckgo", Method: "rustls parallel", RootsMS: 0.4963679, ConnectorMS: 3.2570464, VerifyCallMS: 0.4329721, ConnectionMS: 6.4144129, VerificationMS: 0.4383328},
		{Site: "duckduckgo", Method: "rustls serial", RootsMS: 0.5634392, ConnectorMS: 2.5714297, VerifyCallMS: 2.1426261, ConnectionMS: 5.4416704, VerificationMS: 0.2206577},
		{Site: "github", Method: "openssl", RootsMS: 0.5259603, ConnectorMS: 2.41714400, VerifyCallMS: 0.00726623, ConnectionMS: 10.90148742, VerificationMS: 0.01794724},
		{Site: "github", Method: "rustls parallel", RootsMS: 0.4670057, ConnectorMS: 2.2619585, VerifyCallMS: 5.4297168, ConnectionMS: 14.1635926, VerificationMS: 5.4348146},
		{Site: "github", Method: "rustls serial", RootsMS: 0.4736196, ConnectorMS: 2.9527882, VerifyCallMS: 0.5425635, ConnectionMS: 20.3668883, VerificationMS: 0.5584827},
		{Site: "google", Method: "openssl", RootsMS: 0.4657012, ConnectorMS: 3.11720415, VerifyCallMS: 0.00158668, ConnectionMS: 5.99938325, VerificationMS: 0.00500675},
		{Site: "google", Method: "rustls parallel", RootsMS: 0.4081303, ConnectorMS: 2.2226142, VerifyCallMS: 0.2490465, ConnectionMS: 4.9481365, VerificationMS: 0.2554819},
		{Site: "google", Method: "rustls serial", RootsMS: 0.7276384, ConnectorMS: 2.8976474, VerifyCallMS: 0.2454053, ConnectionMS: 4.8469683, VerificationMS: 0.2522257},
		{Site: "hackernews", Method: "openssl", RootsMS: 0.5978065, ConnectorMS: 2.74829625, VerifyCallMS: 0.00170511, ConnectionMS: 4.20313573, VerificationMS: 0.00576318},
		{Site: "hackernews", Method: "rustls parallel", RootsMS: 0.4728535, ConnectorMS: 2.7132263, VerifyCallMS: 0.6241498, ConnectionMS: 4.1972928, VerificationMS: 0.6394845},
		{Site: "hackernews", Method: "rustls serial", RootsMS: 2.3374316, ConnectorMS: 0.4007136},
		{Site: "reddit", Method: "openssl", RootsMS: 0.3964899, ConnectorMS: 2.13715120, VerifyCallMS: 0.08706821, ConnectionMS: 7.40169574, VerificationMS: 0.21397945},
		{Site: "reddit", Method: "rustls parallel", RootsMS: 0.5623264, ConnectorMS: 2.4189925, VerifyCallMS: 1.9196810, ConnectionMS: 7.1750911, VerificationMS: 1.9263490},
		{Site: "reddit", Method: "rustls serial", RootsMS: 0.5554853, ConnectorMS: 2.4069789, VerifyCallMS: 0.3140017, ConnectionMS: 5.6085587, VerificationMS: 0.3186888},
		{Site: "rust-lang", Method: "openssl", RootsMS: 0.4763279, ConnectorMS: 2.50936690, VerifyCallMS: 0.00071792, ConnectionMS: 5.00488759, VerificationMS: 0.00246496},
		{Site: "rust-lang", Method: "rustls parallel", RootsMS: 0.5137190, ConnectorMS: 2.8609235, VerifyCallMS: 0.8248997, ConnectionMS: 6.2613387, VerificationMS: 0.8308361},
		{Site: "rust-lang", Method: "rustls serial", RootsMS: 0.7270381, ConnectorMS: 2.8080940, VerifyCallMS: 0.7364159, ConnectionMS: 5.9658525, VerificationMS: 0.7529244},
		{Site: "servo", Method: "openssl", RootsMS: 0.4126936, ConnectorMS: 2.46113245, VerifyCallMS: 0.01265213, ConnectionMS: 3.54343740, VerificationMS: 0.04969500},
		{Site: "servo", Method: "rustls parallel", RootsMS: 0.3729247, ConnectorMS: 2.2147630, VerifyCallMS: 0.4230856, ConnectionMS: 4.2786723, VerificationMS: 0.4297226},
		{Site: "servo", Method: "rustls serial", RootsMS: 0.4271293, ConnectorMS: 2.6142965, VerifyCallMS: 0.5498572, ConnectionMS: 5.1212375, VerificationMS: 0.5624017},
		{Site: "stackoverflow", Method: "openssl", RootsMS: 0.4872833, ConnectorMS: 2.54147045, VerifyCallMS: 0.00214393, ConnectionMS: 6.69359618, VerificationMS: 0.00602048},
		{Site: "stackoverflow", Method: "rustls parallel", RootsMS: 0.6955762, ConnectorMS: 2.4821835, VerifyCallMS: 0.3383331, ConnectionMS: 4.6982153, VerificationMS: 0.3459493},
		{Site: "stackoverflow", Method: "rustls serial", RootsMS: 0.6805226, ConnectorMS: 2.6676572, VerifyCallMS: 0.3023453, ConnectionMS: 5.4262767, VerificationMS: 0.3090781},
		{Site: "twitter", Method: "openssl", RootsMS: 0.5633570, ConnectorMS: 3.06855305, VerifyCallMS: 0.00996953, ConnectionMS: 25.13172682, VerificationMS: 0.02554954},
		{Site: "twitter", Method: "rustls parallel", RootsMS: 0.4326043, ConnectorMS: 2.1039143, VerifyCallMS: 2.9250449, ConnectionMS: 16.1298042, VerificationMS: 2.9300035},
		{Site: "twitter", Method: "rustls serial", RootsMS: 0.5732324, ConnectorMS: 2.8023081, VerifyCallMS: 4.0729707, ConnectionMS: 14.1060498, VerificationMS: 4.0807530},
		{Site: "washingtonpost", Method: "openssl", RootsMS: 5.2944900, ConnectorMS: 2.82199855, VerifyCallMS: 0.18614084, ConnectionMS: 8.39432315, VerificationMS: 0.63647240},
		{Site: "washingtonpost", Method: "rustls parallel", RootsMS: 0.3269752, ConnectorMS: 2.2430216, VerifyCallMS: 0.5247874, ConnectionMS: 6.2113378, VerificationMS: 0.5317807},
		{Site: "washingtonpost", Method: "rustls serial", RootsMS: 0.5703944, ConnectorMS: 3.0341653, VerifyCallMS: 0.5972499, ConnectionMS: 7.0022414, VerificationMS: 0.6031256},
		{Site: "wikipedia", Method: "openssl", RootsMS: 0.5330987, ConnectorMS: 2.39788525, VerifyCallMS: 0.00302343, ConnectionMS: 5.13799420, VerificationMS: 0.00806534},
		{Site: "wikipedia", Method: "rustls parallel", RootsMS: 0.4611093, ConnectorMS: 2.5344541, VerifyCallMS: 0.4680453, ConnectionMS: 4.9266177, VerificationMS: 0.4759743},
		{Site: "wikipedia", Method: "rustls serial", RootsMS: 0.4883241, ConnectorMS: 1.9458110, VerifyCallMS: 0.4012761, ConnectionMS: 4.9726309, VerificationMS: 0.4095681},
	}
}

// UnmarshalJSON reads a saved report and puts the experiment's figures
// beside its sites, so that one saved before they were part of the report
// prints and re-saves with them.
func (r *Report) UnmarshalJSON(b []byte) error {
	type plain Report
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	r.addPaper()
	return nil
}

// servoCell renders the experiment's row for the sites table: method,
// then roots / verify call / total verification / connection in ms.
func servoCell(p *Servo) string {
	if p == nil {
		return "–"
	}
	f := func(v float64) string {
		if v == 0 {
			return "–"
		}
		return fmt.Sprintf("%.3g", v)
	}
	return fmt.Sprintf("%s: %s / %s / %s / %s", p.Method, f(p.RootsMS), f(p.VerifyCallMS), f(p.VerificationMS), f(p.ConnectionMS))
}
