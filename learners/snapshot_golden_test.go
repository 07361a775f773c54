//go:build amd64 && !noasm && !gccgo && !safe

package learners

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Snapshots are in changelogs: every learner's snapshot bytes after the
// same stream are pinned by their SHA-256 (taken from the build before the
// encoder grew its buffer once per vector), in allCases order, so that a
// change of the format cannot pass as a refactoring. The floats are those of
// gonum's amd64 assembly (floats.Dot sums in four lanes there, in order
// elsewhere), so the hashes hold on that build only; `go test -tags noasm`
// runs the rest of the package on the pure-Go arithmetic (.ci/run).
func TestSnapshotBytesAreStable(t *testing.T) {
	want := []struct{ name, sha string }{
		{"perceptron", "912d82f2f1cceb380dfbd400db5823ef237f83841cfa6b3ead844158691976a0"},
		{"perceptron", "496105721a7536c37418d4893868c97bc581e8ec40d70a5c21b822caa8bb652c"},
		{"modified-perceptron", "1c91cbf4ba133cfc4f42c659a98e47c4b3f2027062f891016eb2b5dd03210683"},
		{"modified-perceptron{\"init\":\"random\"}", "19c019b595e634fa87f08db8734143684a175339795e4d26253e37c5d5701e44"},
		{"modified-perceptron{\"renormalize_every\":0}", "c2db61ee4eca49c2ea8d3d71813e68c6db12f57d2a51eaa03b6213e81dc297ec"},
		{"shifting-perceptron{\"lambda\":0.05}", "5e3a3cd56f5d310c812bd9e1a5ceed26ab359f49696940958e3d2991fe522805"},
		{"shifting-perceptron", "5cdf14a9bda9c47385f15cff224bc03dd312d297708448b197a20c3ca22002bb"},
		// Format version 3 (stored inputs in the vector codec); their version-2
		// bytes are testdata/snapshots/budget-perceptron-v2-*.bin, which
		// TestOlderSnapshotsRestore restores.
		{"budget-perceptron{\"budget\":7}", "859ec8231b4af29e3c78433fff526e88617075751d4e7095c75c6bc882ed9b4c"},
		{"budget-perceptron{\"budget\":5,\"evict_among_all\":true,\"recompute_every\":3}", "515b802bcbb606b84a20a74204458d260644e28dbb6196b4aa5a9774a2223837"},
		{"threshold-tracker{\"gamma\":0.02}", "b1f09bd80ea445831c7fce1e6f5b1032bcbab472f4b1907b5e58c80d3f09a23f"},
		{"winnow2", "43b1d27ecb2ec81cfa27b7ca2f794442e4120c23b5a0e60ee7e0aebb8e34ed77"},
		{"winnow2{\"demote_to_zero\":true,\"theta\":3}", "316e6c61bf3d5e18878bf6a3ca1da990d9bf0737b3700545403dc460187299ed"},
		{"tracking-winnow", "4e99b5653093e1f0f92eceb46b00f8d525785c46cda9c41c30c85fabd0adb7db"},
		{"tracking-winnow{\"transform\":1,\"m\":0.4}", "f3525293ab812792c4329066d3ecfcf9d8d3329f78c5f2495d41466be05fd7e0"},
		{"tracking-winnow{\"transform\":2,\"m\":0.4,\"lambda\":6}", "d9bd21131d1c03502aea46c18427d92e883494004fb356b02556b85b8fada958"},
		{"swin", "31323e6b9363a0e6bd9791550c2885d7132517b8aabc1866d6d113663e8cee49"},
		{"swin{\"randomized\":true}", "0f101c6c63f2f8b2042510e78840340e228183edd0f7fe1bcc06dba6a2900581"},
		{"weighted-majority{\"members\":[{\"name\":\"swin\",\"params\":{\"randomized\":true}},{\"name\":\"tracking-winnow\"},{\"name\":\"winnow2\",\"params\":{\"theta\":2}}]}", "076ac5ac536d09bc2819bb2df665e5ac7fce4efeafe49a3bf07b80ea7ff4049e"},
		{"odm", "2988d6c2478ee944a4ef2122d06c6f3148a7ba93a86fcdab1af558d989a4bd0d"},
		{"odm{\"schedule\":\"constant\",\"eta\":0.0001}", "c8927f1f1ff749a1569481e36c1ae9fd1fbf9c516293602e6f2a8a7429eed15f"},
		{"dynamic-odm{\"horizon\":300}", "d61f05c1627d288b75abdeb09c13864e442ad54c1bd22c7f80ba9e41284eebac"},
		{"dynamic-odm{\"init\":\"zero\",\"candidates\":4,\"epochs\":\"paper\",\"C\":2}", "f9326456453a896a1e061d828e2b5c0226c946a18a6670b55ba6b17298e78af6"},
		{"sop", "7b41c49c4b32d9c3888c9a76dfd1751fc9b5950cb1eb6d60a8bc6b7c0adf0438"},
		{"sop{\"diagonal\":true}", "eb5ee59465605d8ecf262c89156b70d75ce1c1acde591d54e28c09e485830699"},
		{"lasec", "14ea028d344322cd6e54ba90c87a5ab6ae04be2ac24308b2d68177c127b447e1"},
		{"lasec", "7e718b098125c12bc9ce3464c2eb35fc8ba9bcbd9d35ee462ea3b821e03c83c1"},
		{"lasec{\"diagonal\":true,\"c\":20}", "39bdf7060a84824a7c57f6bcc3c42af69ead670d3924982e2c6d307e73a7e397"},
		{"perceptron-ss", "ca632dab08bb36a19c1fd9762623e04a917b82eb1257964c687472d2562f09d0"},
		{"sop-ss", "079e622a61d1f78dcb2659dc1347439bb22c9640c3de2f995536bea03f070663"},
		{"sop-ss{\"diagonal\":true,\"b\":0.1}", "ecfacb43d49e004012f6715eb64ca0fec0afea643c21efa412ce7f96e9978a29"},
		{"lasec-ss{\"a\":0.05}", "ee6fb5623badf60dbcb3a4c03296a35fd9810bf80aad48753a4e32b210daee9a"},
		{"lasec-ss{\"c\":\"inf\"}", "e4739a1bd74b5a4b3876a6f4febfb5a7f6047bfc5da7603138802497a2ab239f"},
		{"bbq{\"kappa\":0.4}", "670f2b99c32e224a91a0cbae1c949df23726f5c8d96ce606e39590bbf2d0e6bc"},
		{"bbq-i{\"kappa\":0.3,\"rho\":0.5}", "e883800382c43a942b437f17a64ea1e9a8f7011f1de31b11c89b9017beacf0c7"},
		{"logreg", "a711a55b3f064ea412218ffd05992205c7aeffdd3789cbb5b277828a71e60c78"},
		{"logreg{\"eta\":0.5,\"l2\":0.001}", "3cfe8b3ad5ae7408033058cf35e8e5fb23130d9d5aadd7d9ccc4cfc46f328829"},          // the format unchanged; its values since the slow copy's steps are bounded by slow·η (was e5dcc752…)
		{"logreg{\"slow\":0,\"prior\":0}", "6611334acd5bd89026629a202b1fe3860dc71b1a0bfe43ef7699d1acd7881f6a"},            // the one-step default's bytes before slow existed: its checkpoints stay valid
		{"logreg{\"weigh\":\"logloss\",\"prior\":0}", "fc26ed5775e3a1458f29e2233a36c52a3ede1e3cc8b02f23b8960dd443a8f0d8"}, // the two-step default's bytes of 29 November: its checkpoints stay valid
	}
	cases := allCases()
	if len(cases) != len(want) {
		t.Fatalf("%d cases, %d pinned hashes: pin the new case's hash", len(cases), len(want))
	}
	for i, c := range cases {
		l := caseLearner(t, c)
		play(t, l, c.stream(5, 300))
		if got := fmt.Sprintf("%x", sha256.Sum256(snapshot(t, l))); c.String() != want[i].name || got != want[i].sha {
			t.Errorf("case %d %s: snapshot SHA-256 %s, want %s (%s)", i, c, got, want[i].sha, want[i].name)
		}
	}
}

// Snapshots an older build wrote restore into the same learner: the budget
// perceptron's version-2 snapshots (written before its stored inputs moved
// to the vector codec) give, once restored, the learner that the same
// stream gives this build — the same version-3 bytes — and predict alike.
func TestOlderSnapshotsRestore(t *testing.T) {
	files := map[string]string{
		`{"budget":7}`: "budget-perceptron-v2-budget7-dim8.bin",
		`{"budget":5,"evict_among_all":true,"recompute_every":3}`: "budget-perceptron-v2-budget5-evictall-recompute3-dim40.bin",
	}
	found := 0
	for _, c := range allCases() {
		file, ok := files[string(c.params)]
		if c.name != "budget-perceptron" || !ok {
			continue
		}
		found++
		old, err := os.ReadFile(filepath.Join("testdata", "snapshots", file))
		if err != nil {
			t.Fatal(err)
		}
		if old[0] != 2 {
			t.Fatalf("%s: format version %d, want 2", file, old[0])
		}
		fresh, restored := caseLearner(t, c), caseLearner(t, c)
		play(t, fresh, c.stream(5, 300))
		if err := restored.UnmarshalBinary(old); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if a, b := snapshot(t, restored), snapshot(t, fresh); !bytes.Equal(a, b) || a[0] != FormatVersion {
			t.Fatalf("%s restored, then snapshot again: %d bytes (version %d); the same stream now: %d bytes (version %d)", file, len(a), a[0], len(b), b[0])
		}
		next := c.stream(6, 200)
		if a, b := play(t, restored, next), play(t, fresh, next); !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: the restored learner and this build's predict differently", file)
		}
	}
	if found != len(files) {
		t.Fatalf("%d of %d pinned older snapshots have a case", found, len(files))
	}
}

// caseLearner is c's learner, as the pinned snapshots were taken from:
// built by c's Maker, seed 3, key "k".
func caseLearner(t *testing.T, c learnerCase) Learner {
	t.Helper()
	m, err := NewMaker(c.name, json.RawMessage(c.params), c.dim)
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.New(Config{Dim: c.dim, Seed: 3, Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
