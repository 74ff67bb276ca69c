package ctsynth

import (
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"

	"github.com/transparency-dev/tessera/api/layout"
)

// Handler serves the log's static-ct-api monitoring paths: /checkpoint,
// /tile/<L>/<N>[.p/<W>] from the stored hash tiles, /tile/data/<N>[.p/<W>]
// generated from the indices, and /issuer/<sha256 hex>. Full tiles are
// immutable and say so; anything else is 404.
func (l *Log) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p := strings.TrimPrefix(r.URL.Path, "/")
		switch {
		case p == "checkpoint":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			w.Write(l.checkpoint)
		case strings.HasPrefix(p, "issuer/"):
			fp := issuerFingerprint
			if p[len("issuer/"):] != hex.EncodeToString(fp[:]) {
				http.NotFound(w, r)
				return
			}
			immutable(w)
			w.Write(issuerDER)
		case strings.HasPrefix(p, "tile/data/"):
			n, width, ok := l.tileRange(p[len("tile/data/"):], l.meta.Entries)
			if !ok {
				http.NotFound(w, r)
				return
			}
			b := make([]byte, 0, width*1600)
			for i := n * TileWidth; i < n*TileWidth+width; i++ {
				b, _ = AppendTileLeaf(b, i)
			}
			immutable(w)
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			w.Write(b)
		case strings.HasPrefix(p, "tile/"):
			level, rest, _ := strings.Cut(p[len("tile/"):], "/")
			lv, err := layout.ParseTileLevel(level)
			if err != nil || lv >= uint64(len(l.counts)) {
				http.NotFound(w, r)
				return
			}
			n, width, ok := l.tileRange(rest, l.counts[lv])
			if !ok {
				http.NotFound(w, r)
				return
			}
			b := make([]byte, width*32)
			if _, err := l.levels[lv].ReadAt(b, int64(n*TileWidth*32)); err != nil {
				http.Error(w, "reading the hash tile failed", http.StatusInternalServerError)
				return
			}
			immutable(w)
			w.Write(b)
		default:
			http.NotFound(w, r)
		}
	})
}

// tileRange parses a tile index path ("x001/234" or "x001/234.p/17") and
// returns the tile index and width if the level's count items cover it: a
// full tile must be full, a partial tile of width W must have W items.
func (l *Log) tileRange(s string, count uint64) (n, width uint64, ok bool) {
	if strings.Contains(s, "..") {
		return 0, 0, false
	}
	n, p, err := layout.ParseTileIndexPartial(s)
	if err != nil || n > count/TileWidth {
		return 0, 0, false
	}
	width = TileWidth
	if p > 0 {
		width = uint64(p)
	}
	if n*TileWidth+width > count {
		return 0, 0, false
	}
	return n, width, true
}

func immutable(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
}
