package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/segmentio/kafka-go"
)

// A group of three members that join and leave, then a rolling restart of
// each with SIGTERM: every stop writes its last checkpoint and commits, so
// no prediction is written twice, none is missing, and the final key states
// equal an uninterrupted run's.
func TestBlackBoxRollingRestartRepeatsNothing(t *testing.T) {
	b := newBlackBox(t)
	prod := startProducer(t, b.addr, b.topic("events"), 150, 12000, 3000)
	stop := func(p *proc) {
		t.Helper()
		p.signal(t, syscall.SIGTERM)
		p.waitClean(t)
	}
	restored := func(p *proc) func() bool { return func() bool { return p.count(`"partition restored"`) >= 1 } }
	members := []*proc{b.start()}
	waitFor(t, 60*time.Second, "the first member's partitions", restored(members[0]))
	for range 2 { // two more join
		p := b.start()
		waitFor(t, 60*time.Second, "a joining member's partition", restored(p))
		members = append(members, p)
		time.Sleep(300 * time.Millisecond)
	}
	for i, p := range members { // a rolling restart: each stops, and a new one takes its place
		stop(p)
		members[i] = b.start()
		waitFor(t, 60*time.Second, "the replacement's partition", restored(members[i]))
		time.Sleep(300 * time.Millisecond)
	}
	ids := prod.finish(t)
	b.finishWith(ids, members...)
	if dups, _ := b.verify(ids); dups != 0 {
		t.Fatalf("%d predictions written twice across clean stops", dups)
	}
}

// The changelog compacted by a real broker's log cleaner: the changelog is
// created with small segments and an eager cleaner, the service checkpoints
// a few keys many times over, the cleaner removes the superseded records
// (offsets go missing), and a fresh member restores every key from what the
// cleaner kept: final states equal an uninterrupted run's. Needs a real
// broker (DRIFTSTREAM_KAFKA_ADDR): the in-process one has no log cleaner of
// this kind.
func TestRealKafkaCompactedChangelogRestores(t *testing.T) {
	kafkatest.RealBroker(t, "a real broker's log cleaner")
	b := newBlackBox(t)
	kafkatest.CreateTopic(t, b.addr, kafka.TopicConfig{Topic: b.topic("changelog"), NumPartitions: blackBoxPartitions, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}, {ConfigName: "segment.ms", ConfigValue: "200"},
			{ConfigName: "min.cleanable.dirty.ratio", ConfigValue: "0.01"}, {ConfigName: "delete.retention.ms", ConfigValue: "100"},
			{ConfigName: "min.compaction.lag.ms", ConfigValue: "0"}}})
	prod := startProducer(t, b.addr, b.topic("events"), 20, 20000, 4000)
	p := b.start()
	ids := prod.finish(t)
	b.waitPredicted(ids)
	// The cleaner keeps the latest record per key: offsets of superseded
	// checkpoints disappear from the log.
	compacted := func() (records, span int64) {
		for _, msgs := range readTopic(t, b.addr, b.topic("changelog")) {
			if len(msgs) > 0 {
				records += int64(len(msgs))
				span += msgs[len(msgs)-1].Offset - msgs[0].Offset + 1
			}
		}
		return records, span
	}
	waitFor(t, 90*time.Second, "the log cleaner to compact the changelog", func() bool {
		records, span := compacted()
		return span > 0 && records < span/2
	})
	records, span := compacted()
	t.Logf("the changelog holds %d of the %d records written at its offsets", records, span)
	p.kill(t)
	// The next member restores from the compacted log alone and goes on with
	// events that come after.
	more := startProducerFrom(t, b.addr, b.topic("events"), 20, 2000, 4000, len(ids))
	ids = append(ids, more.finish(t)...)
	b.finishWith(ids)
	if c := b.finishers[len(b.finishers)-1]; c.count(`"partition restored"`) < blackBoxPartitions {
		t.Fatalf("the last member restored %d partitions, want %d", c.count(`"partition restored"`), blackBoxPartitions)
	}
	b.verify(ids)
}

// SASL/SCRAM-SHA-512 on a real broker's SASL listener
// (DRIFTSTREAM_KAFKA_SASL_ADDR; scripts/kafka-broker.sh adds the user
// "driftstream" at format time): the service runs with the right password,
// and with a wrong one it fails at start, at once, with the explained
// message.
func TestRealKafkaSASLSCRAM(t *testing.T) {
	addr := os.Getenv("DRIFTSTREAM_KAFKA_SASL_ADDR")
	if addr == "" {
		t.Skip("needs a real broker's SASL listener: set DRIFTSTREAM_KAFKA_SASL_ADDR (scripts/kafka-broker.sh starts one on its port + 1)")
	}
	b := newBlackBox(t)
	for i, a := range b.args {
		if a == "-brokers" {
			b.args[i+1] = addr
		}
	}
	sasl := []string{"-sasl-mechanism", "scram-sha-512", "-sasl-username", "driftstream"}
	base := b.args
	b.args = append(append([]string{}, base...), sasl...)
	os.Setenv("DRIFTSTREAM_SASL_PASSWORD", "wrong")
	defer os.Unsetenv("DRIFTSTREAM_SASL_PASSWORD")
	b.start().failsSaying(t, 30*time.Second, "a wrong password", "SASL")
	os.Setenv("DRIFTSTREAM_SASL_PASSWORD", "driftstream-pw")
	prod := startProducer(t, b.addr, b.topic("events"), 50, 3000, 3000) // the producer on the plain listener
	ids := prod.finish(t)
	b.finishWith(ids)
	b.verify(ids)
	store, err := checkpoint.NewKafkaStore(&kafka.Dialer{}, []string{b.addr}, b.topic("changelog"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	snap, err := store.Load(context.Background(), 0, nil)
	if err != nil || snap.Owner == nil || !bytes.Contains([]byte(snap.Owner.Owner), []byte("/")) {
		t.Fatalf("changelog written over SASL: %v %+v", err, snap.Owner)
	}
}

// Mutual TLS on a real broker's SSL listener (DRIFTSTREAM_KAFKA_TLS_ADDR,
// with the CA and a client certificate that scripts/kafka-broker.sh made in
// DRIFTSTREAM_KAFKA_TLS_DIR): each wrong setting fails the start at once
// with the setting to change — a CA that did not sign the broker's
// certificate, no client certificate, a client certificate of another CA —
// and the right ones run the service end to end over TLS: every event
// predicted, identical to an uninterrupted run.
func TestRealKafkaTLS(t *testing.T) {
	addr, dir := os.Getenv("DRIFTSTREAM_KAFKA_TLS_ADDR"), os.Getenv("DRIFTSTREAM_KAFKA_TLS_DIR")
	if addr == "" || dir == "" {
		t.Skip("needs a real broker's TLS listener: set DRIFTSTREAM_KAFKA_TLS_ADDR and DRIFTSTREAM_KAFKA_TLS_DIR (scripts/integration.sh does)")
	}
	b := newBlackBox(t)
	for i, a := range b.args {
		if a == "-brokers" {
			b.args[i+1] = addr
		}
	}
	base := b.args
	ca, cert, key := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	otherCA, otherCert, otherKey := otherAuthority(t, b.dir)
	for _, tc := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"a CA that did not sign the broker", []string{"-tls-ca-file", otherCA, "-tls-cert-file", cert, "-tls-key-file", key}, "not signed by a CA this client trusts: set DRIFTSTREAM_TLS_CA_FILE"},
		{"no client certificate", []string{"-tls-ca-file", ca}, "requires a client certificate (mutual TLS)"},
		{"a client certificate of another CA", []string{"-tls-ca-file", ca, "-tls-cert-file", otherCert, "-tls-key-file", otherKey}, "refused this client's certificate"},
	} {
		b.args = append(append([]string{}, base...), append([]string{"-tls"}, tc.flags...)...)
		b.start().failsSaying(t, 30*time.Second, tc.name, tc.want)
	}
	b.args = append(append([]string{}, base...), "-tls", "-tls-ca-file", ca, "-tls-cert-file", cert, "-tls-key-file", key)
	prod := startProducer(t, b.addr, b.topic("events"), 50, 3000, 3000) // on the plain listener
	ids := prod.finish(t)
	b.finishWith(ids)
	b.verify(ids)
}

// otherAuthority writes a CA the broker does not trust and a client
// certificate it signed, as PEM files under dir.
func otherAuthority(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	clientKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	clientTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "client"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	clientDER, err := x509.CreateCertificate(rand.Reader, clientTmpl, caTmpl, &clientKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(clientKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, kind string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	return write("other-ca.pem", "CERTIFICATE", caDER), write("other-client.pem", "CERTIFICATE", clientDER), write("other-client-key.pem", "PRIVATE KEY", keyDER)
}
