package pecwire

import "github.com/pkie/pkie/pec/cloudbundle"

// The cloud bundle is defined in package cloudbundle, which clients import;
// these names keep the cloud's and the forwarder's code unchanged.
type (
	Bundle  = cloudbundle.Bundle
	Point   = cloudbundle.Point
	HPKEKey = cloudbundle.HPKEKey
)

// Bundle format constants (cloudbundle.Version, cloudbundle.MaxBytes).
const (
	BundleVersion  = cloudbundle.Version
	MaxBundleBytes = cloudbundle.MaxBytes
)

// ParseBundle is cloudbundle.Parse.
func ParseBundle(data []byte) (*Bundle, error) { return cloudbundle.Parse(data) }

// ReadBundle is cloudbundle.Read.
func ReadBundle(path string) (*Bundle, error) { return cloudbundle.Read(path) }

// NewHPKEKey is cloudbundle.NewHPKEKey.
var NewHPKEKey = cloudbundle.NewHPKEKey
