package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/driftstream/driftstream/pipeline"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
)

// call makes one API request and decodes its JSON answer into out.
func call(t *testing.T, method, url, token string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s %s: %d %q: %v", method, url, resp.StatusCode, b, err)
	}
	return resp.StatusCode
}

// nh is the partition of key per partitioner, as a 404 names it.
func nh(s *Service, key string) map[string]int { return s.keyPartitions(key) }

// The API answers for every key the member holds, with counters that add up
// to the events produced; says where a key it does not hold lives; refuses
// resets without the admin token; and a reset is in the changelog, so that
// the next owner of the key holds the fresh learner. With a key store, the
// keys beyond the cache are answered from it, and the partitions' keys in
// memory (API and gauge) stay within the cache.
func TestKeyAPI(t *testing.T) {
	for _, cacheKeys := range []int{0, 2} {
		t.Run(fmt.Sprintf("cache-%d", cacheKeys), func(t *testing.T) { keyAPI(t, cacheKeys) })
	}
}

// keyAPI is TestKeyAPI with cacheKeys keys of a partition in memory (all
// with 0).
func keyAPI(t *testing.T, cacheKeys int) {
	addr := cluster(t)
	cfg := withKeyStore(t, testConfig(t, addr, "g-api"), cacheKeys)
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Metrics = m
	defer noKeyStoresLeft(t, cfg)
	s, stop := started(t, cfg)
	produce(t, addr, 1, 300)
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "events", Balancer: kafka.Murmur2Balancer{}, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	if err := w.WriteMessages(context.Background(), kafka.Message{Key: []byte("site/7"), Value: []byte(`{"id":"slash","x":[1,2,3],"label":1}`)}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	eventually(t, 60*time.Second, func() bool { return s.Totals().Events >= 301 }, func() string { return fmt.Sprintf("%+v", s.Totals()) })

	open := httptest.NewServer(API(s, ""))
	defer open.Close()
	admin := httptest.NewServer(API(s, "s3cret"))
	defer admin.Close()

	var parts struct{ Partitions []PartitionInfo }
	if code := call(t, "GET", open.URL+"/v1/partitions", "", &parts); code != 200 || len(parts.Partitions) != partitions {
		t.Fatalf("partitions: %d %+v", code, parts)
	}
	keys := 0
	for _, p := range parts.Partitions {
		if p.State != "running" {
			t.Fatalf("partition %+v", p)
		}
		keys += p.Keys
	}
	if keys != 21 {
		t.Fatalf("partitions hold %d keys, want 21", keys)
	}
	// Once the last checkpoint has evicted what it may, the keys in memory
	// are within the cache, and the gauges say what the API says.
	var spilled int
	eventually(t, 30*time.Second, func() bool {
		call(t, "GET", open.URL+"/v1/partitions", "", &parts)
		spilled = 0
		for _, p := range parts.Partitions {
			label := strconv.Itoa(p.Partition)
			if p.KeysInMemory < 0 || p.KeysInMemory > p.Keys || cacheKeys == 0 && p.KeysInMemory != p.Keys || cacheKeys > 0 && p.KeysInMemory > cacheKeys ||
				sample(t, reg, "driftstream_keys", "partition", label) != float64(p.Keys) || sample(t, reg, "driftstream_keys_in_memory", "partition", label) != float64(p.KeysInMemory) {
				return false
			}
			spilled += p.Keys - p.KeysInMemory
		}
		return true
	}, func() string {
		msg := fmt.Sprintf("partitions %+v; gauges (keys, in memory):", parts.Partitions)
		for p := range partitions {
			label := strconv.Itoa(p)
			msg += fmt.Sprintf(" %d: %v, %v", p, sample(t, reg, "driftstream_keys", "partition", label), sample(t, reg, "driftstream_keys_in_memory", "partition", label))
		}
		return msg
	})
	if want := max(0, 21-partitions*cacheKeys); cacheKeys > 0 && spilled < want {
		t.Fatalf("%d keys beyond memory, want at least %d", spilled, want)
	}
	if disk := testutil.ToFloat64(m.stateDirBytes); (cacheKeys > 0) != (disk > 0) {
		t.Fatalf("driftstream_state_dir_bytes %v with %d keys in memory", disk, cacheKeys)
	}
	if ok, why := s.Ready(); !ok || sample(t, reg, "driftstream_ready") != 1 {
		t.Fatalf("driftstream_ready %v on a running member (ready %v: %s)", sample(t, reg, "driftstream_ready"), ok, why)
	}

	var events, labeled int64
	for i := range 20 {
		key := fmt.Sprintf("device-%d", i)
		var in pipeline.KeyInfo
		if code := call(t, "GET", open.URL+"/v1/keys/"+key, "", &in); code != 200 {
			t.Fatalf("GET %s: %d", key, code)
		}
		want := kafka.Murmur2Balancer{}.Balance(kafka.Message{Key: []byte(key)}, 0, 1, 2)
		if in.Key != key || in.Partition != want || nh(s, key)["murmur2"] != want || in.Learner != "lasec-ss" || in.Params["a"] != 0.3 || in.StateBytes == 0 {
			t.Fatalf("GET %s: %+v (its partition is %d)", key, in, want)
		}
		events += in.Events
		labeled += in.Labeled
	}
	if tot := s.Totals(); events != 300 || labeled != tot.Labeled-1 {
		t.Fatalf("keys hold %d events, %d labeled; want 300 and %d", events, labeled, tot.Labeled-1)
	}
	var slash pipeline.KeyInfo
	if code := call(t, "GET", open.URL+"/v1/keys/"+url.PathEscape("site/7"), "", &slash); code != 200 || slash.Key != "site/7" || slash.Events != 1 {
		t.Fatalf("a key with a slash: %d %+v", code, slash)
	}

	var unknown apiError
	if code := call(t, "GET", open.URL+"/v1/keys/nobody", "", &unknown); code != 404 || unknown.NotHeld == nil || len(unknown.NotHeld.Partitions) != 3 ||
		len(unknown.NotHeld.Owned) != partitions || !strings.Contains(unknown.Error, "murmur2") {
		t.Fatalf("unknown key: %d %+v", code, unknown)
	}
	var e apiError
	for _, tc := range []struct {
		srv, token string
		want       int
	}{{open.URL, "", 403}, {open.URL, "s3cret", 403}, {admin.URL, "", 401}, {admin.URL, "wrong", 401}} {
		if code := call(t, "POST", tc.srv+"/v1/keys/device-3/reset", tc.token, &e); code != tc.want {
			t.Fatalf("reset with token %q: %d, want %d (%s)", tc.token, code, tc.want, e.Error)
		}
	}
	var before, after pipeline.KeyInfo
	call(t, "GET", open.URL+"/v1/keys/device-3", "", &before)
	if code := call(t, "POST", admin.URL+"/v1/keys/device-3/reset", "s3cret", &after); code != 200 || after.Resets != before.Resets+1 || after.Events != before.Events {
		t.Fatalf("reset: %d %+v (before %+v)", code, after, before)
	}
	if code := call(t, "POST", admin.URL+"/v1/keys/nobody/reset", "s3cret", &e); code != 404 {
		t.Fatalf("reset of an unknown key: %d", code)
	}
	stop()

	// The next owner restores the reset from the changelog.
	s2, stop2 := started(t, cfg)
	defer stop2()
	api2 := httptest.NewServer(API(s2, ""))
	defer api2.Close()
	var again pipeline.KeyInfo
	eventually(t, 30*time.Second, func() bool {
		return call(t, "GET", api2.URL+"/v1/keys/device-3", "", &again) == 200
	}, func() string { return "device-3 after the restart" })
	if again.Resets != 1 || again.Events != after.Events {
		t.Fatalf("after the restart: %+v", again)
	}
}
