package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// Kafka builds the dialer (consumer group, readers, changelog) and the
// transport (writers) that carry the configured TLS and SASL settings.
func (c *Config) Kafka() (*kafka.Dialer, *kafka.Transport, error) {
	tlsCfg, err := c.tlsConfig()
	if err != nil {
		return nil, nil, err
	}
	mech, err := c.saslMechanism()
	if err != nil {
		return nil, nil, err
	}
	dialer := &kafka.Dialer{Timeout: 10 * time.Second, DualStack: true, TLS: tlsCfg, SASLMechanism: mech}
	transport := &kafka.Transport{DialTimeout: 10 * time.Second, TLS: tlsCfg, SASL: mech}
	return dialer, transport, nil
}

func (c *Config) tlsConfig() (*tls.Config, error) {
	if !c.TLS {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.TLSServerName}
	if c.TLSCAFile != "" {
		pem, err := os.ReadFile(c.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("TLS CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA file %s holds no PEM certificate", c.TLSCAFile)
		}
		cfg.RootCAs = pool
	}
	if c.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("TLS client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func (c *Config) saslMechanism() (sasl.Mechanism, error) {
	if c.SASLMechanism == "none" || c.SASLMechanism == "" {
		return nil, nil
	}
	pw, err := c.Password()
	if err != nil {
		return nil, err
	}
	switch c.SASLMechanism {
	case "plain":
		return plain.Mechanism{Username: c.SASLUsername, Password: pw}, nil
	case "scram-sha-256":
		return scram.Mechanism(scram.SHA256, c.SASLUsername, pw)
	case "scram-sha-512":
		return scram.Mechanism(scram.SHA512, c.SASLUsername, pw)
	}
	return nil, errors.New("unknown SASL mechanism " + c.SASLMechanism)
}
