package service

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
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
	var ne net.Error
	eof := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
	timeout := errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
	if !eof && !timeout || len(s.cfg.Brokers) == 0 {
		return err
	}
	broker := s.cfg.Brokers[0]
	if s.cfg.Dialer.TLS != nil {
		if plaintext(ctx, broker) {
			return fmt.Errorf("%w: broker %s answers in plaintext, but TLS is configured (DRIFTSTREAM_TLS_ENABLED): point at the cluster's TLS listener, or turn TLS off", err, broker)
		}
		return err
	}
	if speaksTLS(ctx, broker) {
		return fmt.Errorf("%w: broker %s expects TLS: set DRIFTSTREAM_TLS_ENABLED=true (and DRIFTSTREAM_TLS_CA_FILE for a private CA)", err, broker)
	}
	if s.cfg.Dialer.SASLMechanism == nil && eof {
		return fmt.Errorf("%w: broker %s closed the connection without answering; its listener probably requires SASL: set DRIFTSTREAM_SASL_MECHANISM, DRIFTSTREAM_SASL_USERNAME and DRIFTSTREAM_SASL_PASSWORD_FILE", err, broker)
	}
	return err
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
