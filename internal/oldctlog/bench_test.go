package oldctlog_test

import (
	"context"
	"testing"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	. "github.com/pkie/pkie/internal/oldctlog"
)

// BenchmarkAddChain is one add-chain: parse, one SQLite transaction with
// the leaf, its subtree hashes and a signed checkpoint, fsync, SCT.
func BenchmarkAddChain(b *testing.B) {
	l := newTestLog(b)
	_, chains := issue(b, 2000)
	i := 0
	for b.Loop() {
		if _, err := l.AddChain(context.Background(), chains[i%len(chains)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkImportBatch logs chains in batches of ImportBatch; reported per
// chain.
func BenchmarkImportBatch(b *testing.B) {
	l := newTestLog(b)
	_, chains := issue(b, ImportBatch)
	for b.Loop() {
		b.StopTimer()
		// Fresh certificates each round: duplicates would be free.
		_, chains = issue(b, ImportBatch)
		b.StartTimer()
		if _, err := l.AddChains(context.Background(), chains); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*ImportBatch), "ns/chain")
}

// BenchmarkInclusionProof serves an inclusion proof from the stored
// subtree hashes of a 2,000-entry log and verifies it.
func BenchmarkInclusionProof(b *testing.B) {
	l, _ := filledLog(b, 2000)
	ctx := context.Background()
	es, _ := l.Entries(ctx, 777, 778)
	lh := LeafHash(es[0].LeafInput)
	root, _ := l.RootAt(ctx, 2000)
	for b.Loop() {
		p, err := l.InclusionProof(ctx, 777, 2000)
		if err != nil {
			b.Fatal(err)
		}
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, 777, 2000, lh[:], p, root[:]); err != nil {
			b.Fatal(err)
		}
	}
}
