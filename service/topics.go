package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/segmentio/kafka-go"
)

// ensureTopics creates missing topics through the controller (the changelog
// compacted), checks that an existing changelog is compacted, and that the
// labels topic and the changelog are co-partitioned with the events topic.
func (s *Service) ensureTopics(ctx context.Context) error {
	conn, err := s.dialAny(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctrl, err := conn.Controller()
	if err != nil {
		return fmt.Errorf("find the controller: %w", err)
	}
	addr := net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port))
	cconn, err := s.cfg.Dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("connect to the controller %s: %w", addr, err)
	}
	defer cconn.Close()
	t := s.cfg.Topics
	for _, name := range []string{t.Events, t.Labels, t.Predictions, t.Queries, t.DeadLetters, t.Alerts, t.Changelog} {
		if name == "" {
			continue
		}
		tc := kafka.TopicConfig{Topic: name, NumPartitions: s.cfg.Partitions, ReplicationFactor: s.cfg.Replication}
		if name == t.Changelog {
			tc.ConfigEntries = []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}}
		} else {
			for _, k := range slices.Sorted(maps.Keys(s.cfg.StreamTopicConfig)) {
				tc.ConfigEntries = append(tc.ConfigEntries, kafka.ConfigEntry{ConfigName: k, ConfigValue: s.cfg.StreamTopicConfig[k]})
			}
		}
		if err := cconn.CreateTopics(tc); err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", name, err)
		}
	}
	if t.Changelog != "" && s.cfg.Store == nil {
		if err := s.checkCompacted(ctx, addr, t.Changelog); err != nil {
			return err
		}
	}
	count := func(topic string) (int, error) {
		ps, err := conn.ReadPartitions(topic)
		return len(ps), err
	}
	ne, err := count(t.Events)
	if err != nil {
		return fmt.Errorf("topic %s: %w", t.Events, err)
	}
	s.eventPartitions = ne
	for _, other := range []string{t.Labels, t.Changelog} {
		if other == "" {
			continue
		}
		n, err := count(other)
		if err != nil {
			return fmt.Errorf("topic %s: %w", other, err)
		}
		if n != ne {
			return fmt.Errorf("topic %s has %d partitions but %s has %d: they must be co-partitioned (same partition count, same keys) so that a key's labels and state live with its events", other, n, t.Events, ne)
		}
	}
	return nil
}

// dialAny connects to the first reachable bootstrap broker.
func (s *Service) dialAny(ctx context.Context) (*kafka.Conn, error) {
	var errs []error
	for _, b := range s.cfg.Brokers {
		conn, err := s.cfg.Dialer.DialContext(ctx, "tcp", b)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, fmt.Errorf("connect to %s: %w", b, err))
	}
	return nil, errors.Join(errs...)
}

// checkCompacted refuses a changelog whose cleanup policy deletes records:
// retention would drop the state of keys that have been quiet for a while,
// and a restore would silently start them from scratch.
func (s *Service) checkCompacted(ctx context.Context, addr, topic string) error {
	client := &kafka.Client{Addr: kafka.TCP(addr), Timeout: s.cfg.Dialer.Timeout}
	if s.cfg.Transport != nil {
		client.Transport = s.cfg.Transport
	}
	resp, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"cleanup.policy"}}}})
	if err != nil {
		return fmt.Errorf("describe changelog topic %s: %w", topic, err)
	}
	policy := "delete" // the broker default when the topic does not set it
	for _, r := range resp.Resources {
		if r.Error != nil {
			return fmt.Errorf("describe changelog topic %s: %w", topic, r.Error)
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName == "cleanup.policy" {
				policy = e.ConfigValue
			}
		}
	}
	if policy != "compact" {
		return fmt.Errorf("changelog topic %s has cleanup.policy=%s: it must be exactly compact, or retention deletes the state of quiet keys; fix it with\n  kafka-configs.sh --bootstrap-server %s --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact",
			topic, strings.TrimSpace(policy), addr, topic)
	}
	return nil
}
