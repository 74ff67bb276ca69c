package soak

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Dial opens an HTTP/2 connection to the notary at addr from src: TLS
// with ALPN h2, the client preface and an empty SETTINGS frame. It returns
// the framer (responses' header blocks decoded) and the connection.
func h2Dial(ctx context.Context, src, addr string) (*http2.Framer, net.Conn, error) {
	raw, err := dialer(src).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	tc := tls.Client(raw, pinnedTLS(nil, "h2"))
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		raw.Close()
		return nil, nil, err
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
		raw.Close()
		return nil, nil, fmt.Errorf("soak: server chose %q, not h2", p)
	}
	if _, err := io.WriteString(tc, http2.ClientPreface); err != nil {
		raw.Close()
		return nil, nil, err
	}
	fr := http2.NewFramer(tc, tc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		raw.Close()
		return nil, nil, err
	}
	return fr, tc, nil
}

// h2Housekeeping answers what a well-behaved client must, so that the
// attacks differ from a real client only in what they mean to: SETTINGS and
// PING are acknowledged and received DATA is credited back.
func h2Housekeeping(fr *http2.Framer, wmu *sync.Mutex, f http2.Frame) {
	wmu.Lock()
	defer wmu.Unlock()
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if !f.IsAck() {
			fr.WriteSettingsAck()
		}
	case *http2.PingFrame:
		if !f.IsAck() {
			fr.WritePing(true, f.Data)
		}
	case *http2.DataFrame:
		if n := len(f.Data()); n > 0 {
			fr.WriteWindowUpdate(0, uint32(n))
		}
	}
}

// h2SlowBodies opens H2Conns HTTP/2 connections to the
// notary and on each keeps up to H2Streams Convergence requests open (or as
// many as the server allows) that announce content-length: 4000 and never
// send a body. Every second it replaces the streams the server has ended.
func (a *attack) h2SlowBodies() {
	a.source = h2Source
	a.c = newCounters("conns_opened", "conns_failed", "streams_opened", "streams_reset", "responses", "responses_503", "goaways")
	held := a.c.gauge("streams_held")
	path := fmt.Sprintf("/target/site.test+%d", a.w.site.Addr.Port())
	a.run = func(ctx context.Context) {
		workers(ctx, a.sc.H2Conns, time.Second, func(ctx context.Context, _ int) {
			fr, conn, err := h2Dial(ctx, a.source, a.w.notary.Addr.String())
			if err != nil {
				a.c.add("conns_failed", 1)
				return
			}
			stop := context.AfterFunc(ctx, func() { conn.Close() })
			defer stop()
			a.c.add("conns_opened", 1)

			var wmu sync.Mutex // the framer and the encoder are not safe for concurrent use
			var hbuf bytes.Buffer
			enc := hpack.NewEncoder(&hbuf)
			open := map[uint32]bool{}
			next := uint32(1)
			var serverMax atomic.Int64
			serverMax.Store(int64(a.sc.H2Streams))
			topUp := func() error {
				wmu.Lock()
				defer wmu.Unlock()
				for int64(len(open)) < min(int64(a.sc.H2Streams), serverMax.Load()) {
					hbuf.Reset()
					for _, h := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":authority", "notary"}, {":path", path},
						{"content-type", "application/x-www-form-urlencoded"}, {"content-length", "4000"}} {
						enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]})
					}
					if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: next, BlockFragment: hbuf.Bytes(), EndHeaders: true}); err != nil {
						return err
					}
					open[next] = true
					next += 2
					a.c.add("streams_opened", 1)
					held.inc()
				}
				return nil
			}
			closeStream := func(id uint32) bool {
				wmu.Lock()
				defer wmu.Unlock()
				if !open[id] {
					return false
				}
				delete(open, id)
				held.dec()
				return true
			}
			done := make(chan struct{})
			settings := make(chan struct{}, 1)
			defer func() {
				conn.Close()
				<-done
				for range open {
					held.dec()
				}
			}()
			go func() {
				defer close(done)
				for {
					f, err := fr.ReadFrame()
					if err != nil {
						return
					}
					switch f := f.(type) {
					case *http2.SettingsFrame:
						if v, ok := f.Value(http2.SettingMaxConcurrentStreams); ok {
							serverMax.Store(int64(v))
						}
						select {
						case settings <- struct{}{}:
						default:
						}
					case *http2.MetaHeadersFrame:
						if closeStream(f.StreamID) {
							a.c.add("responses", 1)
							if f.PseudoValue("status") == "503" {
								a.c.add("responses_503", 1)
							}
						}
					case *http2.RSTStreamFrame:
						if closeStream(f.StreamID) {
							a.c.add("streams_reset", 1)
						}
					case *http2.GoAwayFrame:
						a.c.add("goaways", 1)
					}
					h2Housekeeping(fr, &wmu, f)
				}
			}()
			// Open streams once the server has said how many it allows
			// (its first SETTINGS), as a client that means to fill them
			// would.
			select {
			case <-settings:
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				// Stream IDs are odd and below 2^31: a connection that has
				// used them up ends, and the worker opens another.
				if next > 1<<30 || topUp() != nil {
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-done:
					return
				case <-tick.C:
				}
			}
		})
	}
	a.achieved = func() string {
		return fmt.Sprintf("held up to %d bodiless streams open at once over %d connections; %d streams opened, %d reset by the notary, %d answered (%d with 503)",
			a.c.get("streams_held_peak"), a.c.get("conns_opened"), a.c.get("streams_opened"), a.c.get("streams_reset"), a.c.get("responses"), a.c.get("responses_503"))
	}
}
