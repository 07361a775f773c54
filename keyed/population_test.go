package keyed

import "testing"

// The mixture follows the expert with fewer (recent) mistakes: a new key
// follows the population, its own learner takes over after the population
// errs where it does not, and the fixed share lets the population win the
// key back after the key's own learner starts to err.
func TestMixtureFollowsTheBetterExpert(t *testing.T) {
	m := &mixture{population: MixtureStart, own: 1 - MixtureStart}
	if !m.followsPopulation() {
		t.Fatal("a new key does not follow the population")
	}
	steps := 0
	for m.followsPopulation() {
		m.update(true, false)
		steps++
	}
	if steps != 4 { // 2/3·0.8^k < 1/3 first at k = 4 (the share pulls both toward 1/2)
		t.Fatalf("the key's learner took over after %d of the population's mistakes", steps)
	}
	for range 200 { // a long run of the population erring alone
		m.update(true, false)
	}
	if m.population < mixShare/2 {
		t.Fatalf("the population's weight %v fell under the share's floor", m.population)
	}
	back := 0
	for !m.followsPopulation() {
		m.update(false, true)
		back++
	}
	if back > 30 {
		t.Fatalf("the population took %d mistakes of the key's learner to win back", back)
	}
	if s := m.population + m.own; s < 0.999999 || s > 1.000001 {
		t.Fatalf("weights sum to %v", s)
	}
}
