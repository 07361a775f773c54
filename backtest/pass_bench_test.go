package backtest

import (
	"context"
	"testing"
)

// BenchmarkPipelinePass is the pass of a reproduction: the perceptron over
// crammer-random-d5's stream (T = 5,000) with D = 1,000 inputs (the
// paper's) and D = 10 (the pass's fixed cost per event).
func BenchmarkPipelinePass(b *testing.B) {
	for _, d := range []string{"1000", "10"} {
		b.Run("D="+d, func(b *testing.B) {
			events, dim := synthEvents(b, "synth:latent-hyperplane?d=5&D="+d+"&T=5000&drift=random&sigma=0.1", 1)
			b.ResetTimer()
			for b.Loop() {
				if _, err := PipelinePass(context.Background(), Spec{Name: "perceptron"}, events, dim, 1, Options{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(events))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
