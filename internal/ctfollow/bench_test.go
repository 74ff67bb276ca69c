package ctfollow

import (
	"context"
	"encoding/hex"
	"log/slog"
	"testing"

	"github.com/pkie/pkie/internal/ctwire"
	"github.com/transparency-dev/tessera/client"
	"github.com/transparency-dev/tessera/ctonly"
)

// benchEntries is the size of the benchmark log: 64 full data tiles.
const benchEntries = 64 * 256

// benchLog is a Tessera log of benchEntries entries, a third each plain
// certificates, precertificates and final certificates, served on
// loopback.
func benchLog(b *testing.B) *fixture {
	b.Helper()
	key := newLogKey(b, "ctfollow.bench/log")
	l := newTestLog(b, key)
	cf := newCertFactory(b)
	proto, keys, _ := cf.entries(3)
	es := make([]*ctonly.Entry, 0, benchEntries)
	ks := make([][][32]byte, 0, benchEntries)
	for i := 0; i < benchEntries; i++ {
		e := *proto[i%3]
		e.Timestamp += uint64(i)
		es = append(es, &e)
		ks = append(ks, keys[i%3])
	}
	l.addEntries(es, ks)
	return &fixture{cf: cf, log: l, srv: newLogServer(b, l, cf.ca)}
}

// BenchmarkSync mirrors the whole log from nothing, over HTTP on loopback
// and through local fetchers (a log in the same process), reporting
// entries per second. BenchmarkSyncCeiling is what the same tiles cost to
// fetch, parse and hash with no state, keys or checks: the ceiling.
func BenchmarkSync(b *testing.B) {
	fx := benchLog(b)
	files := client.FileFetcher{Root: fx.log.root}
	for _, tc := range []struct {
		name  string
		fetch *Fetchers
	}{
		{"http", nil},
		{"local", &Fetchers{Checkpoint: files.ReadCheckpoint, Tile: files.ReadTile, EntryBundle: fileDataTiles(fx.log.root),
			Issuer: func(_ context.Context, fp [32]byte) ([]byte, error) {
				return fx.srv.issuers[hex.EncodeToString(fp[:])], nil
			}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				c := Config{Kind: KindStatic, URL: fx.srv.URL, Key: fx.log.key.vkey, Dir: b.TempDir(), Fetch: tc.fetch,
					Logger: slog.New(slog.DiscardHandler)}
				f, err := Open(context.Background(), c)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				st, err := f.Sync(context.Background(), nil)
				if err != nil || st.Size != benchEntries {
					b.Fatal(st, err)
				}
				b.StopTimer()
				f.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(benchEntries*b.N)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}

func BenchmarkSyncCeiling(b *testing.B) {
	fx := benchLog(b)
	read := fileDataTiles(fx.log.root)
	ctx := context.Background()
	for b.Loop() {
		n := 0
		for t := uint64(0); t < benchEntries/256; t++ {
			tile, err := read(ctx, t, 0)
			if err != nil {
				b.Fatal(err)
			}
			es, err := ctwire.ParseDataTile(tile)
			if err != nil {
				b.Fatal(err)
			}
			for i := range es {
				if _, err := es[i].LeafHash(); err != nil {
					b.Fatal(err)
				}
				n++
			}
		}
		if n != benchEntries {
			b.Fatal(n)
		}
	}
	b.ReportMetric(float64(benchEntries*b.N)/b.Elapsed().Seconds(), "entries/s")
}
