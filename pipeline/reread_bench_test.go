package pipeline

import (
	"context"
	"fmt"
	"testing"

	"github.com/driftstream/driftstream/checkpoint"
)

// BenchmarkRereadAfterRestore times a restore from the changelog and the
// re-read of the events topic that gives the keys back the inputs of their
// events awaiting labels: 100,000 events over 1,000 keys, one in ten
// never labeled, every event re-read. "selective" is what the restore
// does (only the records whose inputs a key lacks are decoded); "every
// record" decodes them all, as a restore into a state that holds its
// inputs must.
func BenchmarkRereadAfterRestore(b *testing.B) {
	cfg := testConfig(b, "logreg", "")
	cfg.PendingTTL, cfg.MaxPending = 1_000_000, 1000 // the service's defaults
	var recs []Record
	for i := range 100_000 {
		v := fmt.Sprintf(`{"id":"e%d","x":[%d,1,-1,0.5],"label":%d}`, i, i%7-3, 1-2*(i%2))
		if i%10 == 0 {
			v = fmt.Sprintf(`{"id":"e%d","x":[%d,1,-1,0.5]}`, i, i%7-3)
		}
		recs = append(recs, Record{Offset: int64(i), Key: fmt.Appendf(nil, "k%d", i%1000), Value: []byte(v)})
	}
	ref, err := NewWorker(cfg, 0)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range recs {
		if err := ref.Process(context.Background(), r); err != nil {
			b.Fatal(err)
		}
	}
	store := checkpoint.NewMemoryStore()
	if _, _, err := ref.Checkpoint(context.Background(), store); err != nil {
		b.Fatal(err)
	}
	for _, selective := range []bool{true, false} {
		name := map[bool]string{true: "selective", false: "every record"}[selective]
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				w, _ := NewWorker(cfg, 0)
				res, err := w.Restore(context.Background(), store)
				if err != nil || res.From[EventsTopic] != 0 {
					b.Fatalf("restore from %v: %v", res.From, err)
				}
				w.reread.selective = selective
				for _, r := range recs {
					if err := w.Process(context.Background(), r); err != nil {
						b.Fatal(err)
					}
				}
				if got := w.Totals(); got.Skipped != int64(len(recs)) {
					b.Fatalf("%d records skipped, want %d", got.Skipped, len(recs))
				}
			}
		})
	}
}
