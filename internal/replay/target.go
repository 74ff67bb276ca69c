package replay

import (
	"strconv"
	"strings"
)

// TargetKey is the key every stage uses to tell targets apart: the host
// lower-cased (DNS names compare without regard to case, RFC 4343) and the
// port, as "host:port". A schedule's requests and target records, the
// driver's learned fingerprints and the report's dead-target lookup all
// key by it, so a hand-made schedule that spells one host in two cases
// still names one target.
func TargetKey(host string, port uint16) string {
	return strings.ToLower(host) + ":" + strconv.Itoa(int(port))
}
