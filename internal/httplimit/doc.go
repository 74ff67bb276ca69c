// Package httplimit bounds what clients can take of a public HTTP server, so
// that no one client address, and no one kind of request, can take what the
// others need.
//
// A server has four resources a hostile client can exhaust by holding them
// rather than by using them: connections (file descriptors), HTTP/2 streams,
// request handling slots and the time a request body takes to arrive. The
// package bounds each at its own layer:
//
//   - Listen wraps the server's listener. It counts open connections in
//     total and per client address (ClientKey: the IP, IPv6 grouped by /64,
//     the smallest block one subscriber is normally given) and closes at once
//     a connection beyond either cap. Above a high-water mark it closes idle
//     keep-alive connections, oldest first, to make room: http.Server has no
//     per-connection idle timeout, so the listener learns which connections
//     are idle from the server's ConnState hook. Listen also bounds HTTP/2
//     streams per connection and the HTTP/2 receive buffers.
//   - Handler takes a slot for each request from a pool (Slots) chosen per
//     request, with a per-client share of each pool, and answers 503 at once
//     when there is none. Separate pools keep cheap reads apart from
//     expensive writes; requests that take no slot (health checks, metrics)
//     always answer.
//   - Handler gives each request body a deadline: a grace period plus the
//     time the bytes received so far take at a minimum rate. A client that
//     declares a body and sends none loses its slot after the grace period,
//     on HTTP/1 and on each HTTP/2 stream alike, instead of holding it for
//     the server's read timeout.
//   - Handler answers a path that is not in canonical form ("//", "/./",
//     "/../") with a JSON 400 instead of letting http.ServeMux redirect it.
//
// Caps per client address assume the server sees its clients' addresses.
// Behind a proxy or a NAT that hides them, raise the per-client caps.
package httplimit
