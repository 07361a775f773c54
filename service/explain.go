package service

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
)

// probeTimeout bounds each probe explain makes.
const probeTimeout = 3 * time.Second

// explain adds what is probably wrong to an error of the first contact with
// the brokers, when the error alone does not say: a TLS client facing a
// plaintext listener sees a timeout or EOF, a plaintext client facing a TLS
// or SASL listener sees EOF. It probes the first broker the other way
// (plaintext when TLS is configured, TLS when it is not) and names the
// setting to change.
func (s *Service) explain(ctx context.Context, err error) error {
	if why := certificateTrouble(err, s.cfg.Dialer); why != "" {
		return fmt.Errorf("%w: %s", err, why)
	}
	var ne net.Error
	eof := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
	timeout := errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
	if !eof && !timeout || len(s.cfg.Brokers) == 0 {
		return err
	}
	broker := s.cfg.Brokers[0]
	if s.cfg.Dialer.TLS != nil {
		if plaintext(ctx, broker) {
			return fmt.Errorf("%w: broker %s answers in plaintext, but TLS is configured (DRIFTSTREAM_TLS): point at the cluster's TLS listener, or turn TLS off", err, broker)
		}
		return err
	}
	if speaksTLS(ctx, broker) {
		return fmt.Errorf("%w: broker %s expects TLS: set DRIFTSTREAM_TLS=true (and DRIFTSTREAM_TLS_CA_FILE for a private CA)", err, broker)
	}
	if s.cfg.Dialer.SASLMechanism == nil && eof {
		return fmt.Errorf("%w: broker %s closed the connection without answering; its listener probably requires SASL: set DRIFTSTREAM_SASL_MECHANISM, DRIFTSTREAM_SASL_USERNAME and DRIFTSTREAM_SASL_PASSWORD_FILE", err, broker)
	}
	return err
}

// certificateTrouble says which setting to change when a TLS handshake
// failed over a certificate: the broker's, which this client cannot verify,
// or this client's, which the broker refused (mutual TLS); "" otherwise.
func certificateTrouble(err error, d *kafka.Dialer) string {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &unknown):
		return "the broker's certificate is not signed by a CA this client trusts: set DRIFTSTREAM_TLS_CA_FILE to the cluster's CA bundle (PEM)"
	case errors.As(err, &hostname):
		return fmt.Sprintf("the broker's certificate is not valid for %q: set DRIFTSTREAM_TLS_SERVER_NAME to a name it carries, or dial the broker by that name", hostname.Host)
	case errors.As(err, &invalid):
		return "the broker's certificate is not valid now (expired, not yet valid, or not for server use): renew it on the broker"
	}
	// A refusal of this client's certificate arrives as the broker's TLS
	// alert, which crypto/tls reports only as text.
	msg := err.Error()
	for _, alert := range []string{"tls: certificate required", "tls: bad certificate", "tls: unknown certificate authority", "tls: certificate expired"} {
		if strings.Contains(msg, "remote error: "+alert) {
			if d == nil || d.TLS == nil || (len(d.TLS.Certificates) == 0 && d.TLS.GetClientCertificate == nil) {
				return "the broker requires a client certificate (mutual TLS): set DRIFTSTREAM_TLS_CERT_FILE and DRIFTSTREAM_TLS_KEY_FILE"
			}
			return "the broker refused this client's certificate (mutual TLS): DRIFTSTREAM_TLS_CERT_FILE must be signed by a CA in the broker's truststore, and valid now"
		}
	}
	return ""
}

// plaintext reports whether broker answers a plaintext ApiVersions request.
func plaintext(ctx context.Context, broker string) bool {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	conn, err := (&kafka.Dialer{Timeout: probeTimeout}).DialContext(ctx, "tcp", broker)
	if err != nil {
		return false
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(probeTimeout))
	_, err = conn.ApiVersions()
	return err == nil
}

// speaksTLS reports whether broker completes a TLS handshake (the
// certificate is not checked: this only tells the listener's kind).
func speaksTLS(ctx context.Context, broker string) bool {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} // #nosec G402 -- a probe, nothing is sent
	conn, err := d.DialContext(ctx, "tcp", broker)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}
