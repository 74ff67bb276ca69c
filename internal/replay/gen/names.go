package gen

import (
	"fmt"
	"net/netip"
)

var (
	sitePrefix = []string{"www", "www", "www", "secure", "login", "api", "mail", "static", "m", "shop", "portal", "cdn", "accounts", "app"}
	siteWord1  = []string{"blue", "north", "red", "open", "bright", "river", "stone", "green", "silver", "swift", "cloud", "prairie", "maple", "iron", "lake", "summit", "golden", "urban", "pixel", "cedar", "harbor", "polar", "quick", "true"}
	siteWord2  = []string{"field", "bank", "media", "works", "books", "news", "labs", "market", "health", "store", "games", "travel", "mail", "photo", "net", "press", "music", "learn", "hub", "point", "craft", "wire", "sport", "docs"}
	siteTLD    = []string{"com", "com", "com", "com", "net", "org", "edu", "io", "co.uk", "de"}
	fbPOP      = []string{"iad3", "ord1", "atl1", "dfw1", "lga1", "sjc2", "mia1", "sea1"}
	spotifyPOP = []string{"ash2", "lon6", "gew1", "sjc1"}
	appleSvc   = []string{"caldav", "contacts", "fmip", "keyvalueservice", "quota", "ckdatabase", "streams", "escrowproxy"}
)

// styleName makes the n'th name of a style; IP-shaped styles encode a,
// the host's address, as those providers' PTR records do. Names are
// unique within a style (by n, or by address).
func styleName(s NameStyle, n int, a netip.Addr, seed uint64) string {
	b := a.As4()
	h := mix(seed ^ uint64(n)<<8 ^ uint64(s))
	pick := func(l []string, k uint) string { return l[(h>>(k*8))%uint64(len(l))] }
	switch s {
	case StyleAkamaiPTR:
		return fmt.Sprintf("a%d-%d-%d-%d.deploy.static.akamaitechnologies.com", b[0], b[1], b[2], b[3])
	case StyleEC2:
		return fmt.Sprintf("ec2-%d-%d-%d-%d.compute-1.amazonaws.com", b[0], b[1], b[2], b[3])
	case StyleTwitter:
		return fmt.Sprintf("r-%d-%d-%d-%d.twttr.com", b[0], b[1], b[2], b[3])
	case StyleFacebook:
		pop := fbPOP[(n/2)%len(fbPOP)]
		if n%2 == 0 {
			return fmt.Sprintf("scontent-%s-%d.xx.fbcdn.net", pop, n/2/len(fbPOP)+1)
		}
		return fmt.Sprintf("edge-star-shv-%02d-%s.facebook.com", n/2/len(fbPOP)+1, pop)
	case StyleSpotify:
		return fmt.Sprintf("%s-accesspoint-a%d.ap.spotify.com", spotifyPOP[n%len(spotifyPOP)], n/len(spotifyPOP)+1)
	case StyleAppleAkamai:
		return fmt.Sprintf("p%d-%s.icloud.com", n/len(appleSvc)+1, appleSvc[n%len(appleSvc)])
	case StyleAkamaiEdge:
		return fmt.Sprintf("e%d.a.akamaiedge.net", n+1)
	case StyleCDN:
		if n%2 == 0 {
			return fmt.Sprintf("cs%d.wpc.edgecastcdn.net", n/2+1)
		}
		return fmt.Sprintf("%s%d.vo.llnwd.net", pick(siteWord1, 0), n/2+1)
	}
	return fmt.Sprintf("%s.%s%s%d.%s", pick(sitePrefix, 0), pick(siteWord1, 1), pick(siteWord2, 2), n+1, pick(siteTLD, 3))
}
