package notary

import (
	"encoding/json"
)

// BundleHost is one replica of a notary in a Convergence bundle.
type BundleHost struct {
	Host        string `json:"host"`
	SSLPort     int    `json:"ssl_port"`
	HTTPPort    int    `json:"http_port"`
	Certificate string `json:"certificate"` // PEM
}

// Bundle is a Convergence v1 ".notary" file: how clients find a notary and
// which certificate to pin for it.
type Bundle struct {
	Version        int          `json:"version"`
	Name           string       `json:"name"`
	BundleLocation string       `json:"bundle_location"`
	Region         string       `json:"region,omitempty"`
	Hosts          []BundleHost `json:"hosts"`
}

// Bundle returns a bundle for this identity reachable at host on the given
// ports.
func (id *Identity) Bundle(host string, sslPort, httpPort int, name, region, location string) Bundle {
	if name == "" {
		name = id.Name
	}
	return Bundle{
		Version: 1, Name: name, BundleLocation: location, Region: region,
		Hosts: []BundleHost{{Host: host, SSLPort: sslPort, HTTPPort: httpPort, Certificate: string(id.CertPEM)}},
	}
}

// MarshalIndent renders a bundle as written to a .notary file.
func (b Bundle) MarshalIndent() ([]byte, error) {
	out, err := json.MarshalIndent(b, "", "  ")
	return append(out, '\n'), err
}
