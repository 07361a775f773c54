package learners

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"
)

// Without the step guard, a constant step is refused, with the state untouched, exactly when
// η·(1 + 2λ·max(1,μ)·‖x‖²/(1−θ)²) ≥ 2 — the bound past which gradient descent
// on the round's objective diverges — for odm and for dynamic-odm's
// candidates; just below the bound the step is taken.
func TestODMConstantStepGuard(t *testing.T) {
	const eta, lambda, mu, theta = 0.01, 4.0, 0.5, 0.5
	// ‖x‖² at which η·L = 2: L = 1 + 2λ‖x‖²/(1−θ)².
	edge := (2/eta - 1) * (1 - theta) * (1 - theta) / (2 * lambda)
	params := `{"lambda":4,"mu":0.5,"theta":0.5,"schedule":"constant","eta":0.01,"step_guard":0}` // no guard: refused
	for _, name := range []string{"odm", "dynamic-odm"} {
		for _, tc := range []struct {
			scale    float64
			unstable bool
		}{{0.999, false}, {1.001, true}, {100, true}} {
			l := mustNew(t, name, params, Config{Dim: 2, Seed: 1})
			x := mustDense(t, []float64{math.Sqrt(edge * tc.scale), 0})
			before, _ := l.MarshalBinary()
			p, _ := l.Predict(x)
			err := l.Learn(x, 1, l.Decide(p))
			after, _ := l.MarshalBinary()
			if tc.unstable != errors.Is(err, ErrUnstable) {
				t.Fatalf("%s, ‖x‖² = %.4g × the bound: Learn = %v", name, tc.scale, err)
			}
			if tc.unstable {
				// Decide may have moved round counters; Learn must not have
				// changed the weights: a second Learn is refused the same way.
				if err2 := l.Learn(x, 1, p); !errors.Is(err2, ErrUnstable) {
					t.Fatalf("%s: a refused step changed the state: %v", name, err2)
				}
			} else if bytes.Equal(before, after) {
				t.Fatalf("%s: a stable step changed nothing", name)
			}
		}
	}
}

// inv_t_offset steps η = 1/(s+s₀): from w = 0 the first step on (x, +1)
// gives w = η·λ·2/(1−θ)·x, so the score on x is η·λ·2/(1−θ)·‖x‖² with
// η = 1/(1+s₀).
func TestODMOffsetSchedule(t *testing.T) {
	for _, s0 := range []float64{1, 9, 99} {
		l := mustNew(t, "odm", fmt.Sprintf(`{"lambda":2,"theta":0.3,"schedule":"inv_t_offset","s0":%v}`, s0), Config{Dim: 3})
		x := mustDense(t, []float64{0.5, -1, 2})
		p, _ := l.Predict(x)
		if err := l.Learn(x, 1, l.Decide(p)); err != nil {
			t.Fatal(err)
		}
		q, _ := l.Predict(x)
		want := 1 / (1 + s0) * 2 * 2 / (1 - 0.3) * x.SquaredNorm()
		if math.Abs(q.Score-want) > 1e-12*want {
			t.Fatalf("s0 = %v: score %v after one step, want %v", s0, q.Score, want)
		}
	}
	for _, bad := range []string{`{"schedule":"inv_t_offset"}`, `{"schedule":"inv_t_offset","s0":-1}`, `{"s0":3}`, `{"schedule":"inv_t","eta":0.1}`} {
		if _, err := New("odm", []byte(bad), Config{Dim: 3}); !errors.Is(err, ErrParam) {
			t.Fatalf("%s accepted: %v", bad, err)
		}
	}
}

// The step guard: with κ, a constant step too large for an input is cut to
// κ·2/L for that round (L its curvature) instead of being refused, and the
// weights stay finite on inputs of any norm; without it the step is refused.
func TestODMStepGuard(t *testing.T) {
	for _, guard := range []float64{0, 0.5} {
		params := fmt.Sprintf(`{"lambda":64,"theta":0.5,"mu":0.5,"schedule":"constant","eta":0.01,"step_guard":%g}`, guard)
		if guard == 0 {
			params = `{"lambda":64,"theta":0.5,"mu":0.5,"schedule":"constant","eta":0.01,"step_guard":0}`
		}
		for _, name := range []string{"odm", "dynamic-odm"} {
			l, err := New(name, json.RawMessage(params), Config{Dim: 3, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			x, _ := NewDense([]float64{30, -40, 1}) // ‖x‖² = 2,501: η·L ≈ 25.6
			p, _ := l.Predict(x)
			err = l.Learn(x, 1, l.Decide(p))
			if guard == 0 {
				if !errors.Is(err, ErrUnstable) {
					t.Fatalf("%s without a guard: %v, want ErrUnstable", name, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s with κ = %g: %v", name, guard, err)
			}
			for range 100 {
				p, _ := l.Predict(x)
				if err := l.Learn(x, -1, l.Decide(p)); err != nil {
					t.Fatalf("%s with κ = %g: %v", name, guard, err)
				}
			}
			if p, err := l.Predict(x); err != nil || math.IsNaN(p.Score) || math.Abs(p.Score) > 10 {
				t.Fatalf("%s with κ = %g: margin %v (%v) after 100 guarded steps", name, guard, p.Score, err)
			}
		}
	}
	if _, err := New("odm", json.RawMessage(`{"step_guard":1}`), Config{Dim: 2}); err == nil {
		t.Fatal("κ = 1 was accepted")
	}
}
