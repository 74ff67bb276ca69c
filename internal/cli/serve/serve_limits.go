package serve

import (
	"flag"
	"fmt"
	"net"
	"net/http"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/httplimit"
)

// connFlags adds the connection-cap flags every serve command has and
// returns a function that reads them once parsed.
func connFlags(fs *flag.FlagSet) func() (httplimit.Options, error) {
	maxConns := fs.Int("max-conns", 0, fmt.Sprintf("open connections at most; more are closed at once, and above three quarters idle ones are closed (0: half the open-file limit, at most 4096; here %d)", httplimit.DefaultMaxConns()))
	perIP := fs.Int("max-conns-per-ip", httplimit.DefaultMaxConnsPerClient, "open connections per client address at most (an IPv6 client's /64)")
	return func() (httplimit.Options, error) {
		if *maxConns < 0 || *perIP < 0 {
			return httplimit.Options{}, command.UsageError("--max-conns and --max-conns-per-ip must not be negative")
		}
		return httplimit.Options{MaxConns: *maxConns, MaxConnsPerClient: *perIP}, nil
	}
}

// serveLimited serves srv on ln within the connection caps o.
func serveLimited(srv *http.Server, ln net.Listener, o httplimit.Options) error {
	return srv.Serve(httplimit.Listen(srv, ln, o))
}
