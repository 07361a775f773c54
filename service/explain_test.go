package service

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// selfSigned is a certificate for localhost, for a TLS listener in tests.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// A client configured unlike the broker's listener gets an error that names
// the setting to change, not a bare timeout or EOF.
func TestListenerMismatchIsExplained(t *testing.T) {
	kafkatest.Slow(t)
	cert := selfSigned(t)
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	for _, tc := range []struct {
		name   string
		opts   []kfake.Opt
		dialer *kafka.Dialer
		want   string
	}{
		{"TLS against plaintext", nil, &kafka.Dialer{Timeout: 2 * time.Second, TLS: &tls.Config{InsecureSkipVerify: true}}, "answers in plaintext, but TLS is configured"},
		{"plaintext against TLS", []kfake.Opt{kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}})}, &kafka.Dialer{Timeout: 2 * time.Second}, "expects TLS: set DRIFTSTREAM_TLS=true"},
		{"TLS with an unknown CA", []kfake.Opt{kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}})},
			&kafka.Dialer{Timeout: 2 * time.Second, TLS: &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "localhost"}}, "not signed by a CA this client trusts: set DRIFTSTREAM_TLS_CA_FILE"},
		{"TLS to a name the certificate lacks", []kfake.Opt{kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}})},
			&kafka.Dialer{Timeout: 2 * time.Second, TLS: &tls.Config{RootCAs: pool}}, "not valid for \"127.0.0.1\": set DRIFTSTREAM_TLS_SERVER_NAME"},
		{"no client certificate against mutual TLS", []kfake.Opt{kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAnyClientCert})},
			&kafka.Dialer{Timeout: 2 * time.Second, TLS: &tls.Config{RootCAs: pool, ServerName: "localhost"}}, "requires a client certificate (mutual TLS): set DRIFTSTREAM_TLS_CERT_FILE"},
		{"no SASL against SASL", []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "pw")}, &kafka.Dialer{Timeout: 2 * time.Second}, "probably requires SASL: set DRIFTSTREAM_SASL_MECHANISM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			cfg := config_(t, c.ListenAddrs()[0], "g", tc.dialer, nil)
			_, err = New(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want one saying %q", err, tc.want)
			}
			t.Log(err)
		})
	}
}
