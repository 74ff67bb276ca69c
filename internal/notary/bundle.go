package notary

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
)

// BundleHost is one replica of a notary in a Convergence bundle.
type BundleHost struct {
	Host        string `json:"host"`
	SSLPort     int    `json:"ssl_port"`
	HTTPPort    int    `json:"http_port"`
	Certificate string `json:"certificate"` // PEM
	// V1Key is pkie's extension: the base64 Ed25519 key that signs v1
	// answers. Convergence clients ignore the unknown field; pkie's client
	// uses the v1 API for hosts that carry it.
	V1Key string `json:"pkie_v1_ed25519,omitempty"`
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
		Hosts: []BundleHost{{
			Host: host, SSLPort: sslPort, HTTPPort: httpPort, Certificate: string(id.CertPEM),
			V1Key: base64.StdEncoding.EncodeToString(id.V1.Public().(ed25519.PublicKey)),
		}},
	}
}

// MarshalIndent renders a bundle as written to a .notary file.
func (b Bundle) MarshalIndent() ([]byte, error) {
	out, err := json.MarshalIndent(b, "", "  ")
	return append(out, '\n'), err
}
